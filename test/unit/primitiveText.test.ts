/**
 * `primitiveText.ts`: the encode fast paths of `Schema.String` and `Schema.NumberFromString`, and
 * `Schema.String`'s decode, return what the Schema returns, for the values they take and for the
 * ones they hand over.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import * as PrimitiveText from "../../src/internal/codec/primitiveText.ts"

/** The encode of `steps` against the Schema's, on `values` (the wrong types included). */
const sameAsSchema = <A>(codec: Schema.Schema<A, string>, values: ReadonlyArray<unknown>) => {
  const fast = PrimitiveText.steps(codec).encode
  const slow = Schema.encodeUnknownEither(codec)
  for (const value of values) {
    // Values of the wrong type reach the fast path from untyped code (a transform in JavaScript).
    const expected = slow(value)
    const actual = fast(value as A)
    assert.strictEqual(Either.isRight(actual), Either.isRight(expected), `${String(value)}: the same outcome`)
    if (Either.isRight(actual) && Either.isRight(expected)) assert.strictEqual(actual.right, expected.right)
    if (Either.isLeft(actual) && Either.isLeft(expected)) assert.strictEqual(actual.left.message, expected.left.message)
  }
}

describe("primitive text codecs", () => {
  it("Schema.String encodes as the Schema does", () => {
    sameAsSchema(Schema.String, ["", "a", "\u00e9\u{1F600}", " ", 1, null, undefined, {}])
  })

  it("Schema.String decodes as the Schema does, a branded or refined string through the Schema", () => {
    // Texts reach decode as strings; other values only from untyped code.
    const texts: ReadonlyArray<unknown> = ["", "a", "\u00e9\u{1F600}", " ", "\uD800", 1, null, undefined]
    for (const codec of [Schema.String, Schema.String.pipe(Schema.minLength(2)), Schema.NonEmptyString]) {
      const fast = PrimitiveText.steps<string>(codec).decode
      const slow = Schema.decodeUnknownEither(codec)
      for (const text of texts) {
        const expected = slow(text)
        const actual = fast(text as string)
        assert.strictEqual(Either.isRight(actual), Either.isRight(expected), `${String(text)}: the same outcome`)
        if (Either.isRight(actual) && Either.isRight(expected)) assert.strictEqual(actual.right, expected.right)
        if (Either.isLeft(actual) && Either.isLeft(expected)) assert.strictEqual(actual.left.message, expected.left.message)
      }
    }
  })

  it("Schema.NumberFromString encodes as the Schema does", () => {
    sameAsSchema(Schema.NumberFromString, [0, -0, 1, -1.5, 1e21, 5e-324, NaN, Infinity, -Infinity, "1", null, undefined, 1n])
  })

  it("another codec's steps are the Schema's", () => {
    const Positive = Schema.NumberFromString.pipe(Schema.positive())
    sameAsSchema(Positive, [1, 0, -1, "1"])
    const steps = PrimitiveText.steps(Positive)
    assert.isTrue(Either.isLeft(steps.encode(-1)))
    assert.deepStrictEqual(steps.decode("2"), Either.right(2))
  })
})
