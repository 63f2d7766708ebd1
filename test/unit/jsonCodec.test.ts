/**
 * A `Topic.json` codec run in its two steps (the Schema, then JSON) stores and reads back exactly
 * what the composed codec does, and fails where it fails: a NaN stored as null does not read back.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, Option, Schema } from "effect"
import { Topic } from "../../src/index.ts"
import * as JsonCodec from "../../src/internal/jsonCodec.ts"

class Point extends Schema.Class<Point>("Point")({ x: Schema.Number, at: Schema.Date, note: Schema.OptionFromNullOr(Schema.String) }) {}

describe("jsonCodec", () => {
  it("encodes to the composed codec's text and decodes the same values", () => {
    const cases: ReadonlyArray<readonly [Schema.Schema.AnyNoContext, ReadonlyArray<unknown>]> = [
      [Schema.Number, [0, -3.5, 1e21]],
      [Schema.String, ["", "a\"b\u2028"]],
      [Point, [new Point({ x: 1, at: new Date(0), note: Option.some("n") }), new Point({ x: 2, at: new Date(5), note: Option.none() })]]
    ]
    for (const [schema, values] of cases) {
      const codec = Topic.json(schema)
      const steps = JsonCodec.steps(codec)
      for (const value of values) {
        const text = steps.encode(value)
        assert.deepStrictEqual(text, Schema.encodeEither(codec)(value))
        assert.ok(Either.isRight(text))
        if (Either.isRight(text)) assert.deepStrictEqual(steps.decode(text.right), Schema.decodeEither(codec)(text.right))
      }
    }
  })

  it("a NaN or Infinity state encodes to null, which does not decode back; a value JSON rejects is a ParseError", () => {
    const steps = JsonCodec.steps(Topic.json(Schema.Number))
    for (const value of [NaN, Infinity, -Infinity]) {
      const text = steps.encode(value)
      assert.deepStrictEqual(text, Either.right("null"))
      assert.ok(Either.isLeft(steps.decode("null")))
    }
    const big = JsonCodec.steps(Topic.json(Schema.BigIntFromSelf))
    assert.ok(Either.isLeft(big.encode(1n)), "JSON.stringify throws on a bigint: a ParseError, not a throw")
    assert.ok(Either.isLeft(steps.decode("{not json")))
  })

  it("a codec not made by Topic.json runs as it is", () => {
    const steps = JsonCodec.steps(Schema.NumberFromString)
    assert.deepStrictEqual(steps.encode(5), Either.right("5"))
    assert.deepStrictEqual(steps.decode("7"), Either.right(7))
  })
})
