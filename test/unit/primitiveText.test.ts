/**
 * `primitiveText.ts`: the encode fast paths of `Schema.String` and `Schema.NumberFromString`, and
 * `Schema.String`'s decode, return what the Schema returns, for the values they take and for the
 * ones they hand over.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import type { ParseResult } from "effect"
import * as PrimitiveText from "../../src/internal/codec/primitiveText.ts"

/** The encode (or decode) of `steps` against the Schema's, on `values` (the wrong types included). */
const sameAsSchema = <A>(codec: Schema.Schema<A, string>, values: ReadonlyArray<unknown>, direction: "encode" | "decode" = "encode") => {
  const steps = PrimitiveText.steps(codec)
  // Values of the wrong type reach the fast paths from untyped code (a transform in JavaScript).
  const fast = (value: unknown) => direction === "encode" ? steps.encode(value as A) : steps.decode(value as string)
  const slow = direction === "encode" ? Schema.encodeUnknownEither(codec) : Schema.decodeUnknownEither(codec)
  for (const value of values) {
    const expected: Either.Either<unknown, ParseResult.ParseError> = slow(value)
    const actual: Either.Either<unknown, ParseResult.ParseError> = fast(value)
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
      sameAsSchema(codec, texts, "decode")
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
