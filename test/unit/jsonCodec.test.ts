/**
 * A `Topic.json` codec run in its two steps (the Schema, then JSON) stores and reads back exactly
 * what the composed codec does, and fails where it fails: a NaN stored as null does not read back.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, Option, ParseResult, Schema } from "effect"
import { Topic } from "../../src/index.ts"
import * as JsonCodec from "../../src/internal/codec/jsonCodec.ts"
import * as JsonExact from "../../src/internal/codec/jsonExact.ts"

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

  it("a bare Number, String or Boolean state encodes as the Schema does without its parser: the same texts and errors", () => {
    const cases: ReadonlyArray<readonly [Schema.Schema.AnyNoContext, ReadonlyArray<unknown>]> = [
      [Schema.Number, [0, -0, 1.5, -3e300, NaN, Infinity, "1", true, null, undefined, {}]],
      [Schema.String, ["", "x", "\u2028", 1, false, null, []]],
      [Schema.Boolean, [true, false, 0, "true", null]]
    ]
    for (const [schema, values] of cases) {
      const codec = Topic.json(schema)
      const steps = JsonCodec.steps(codec)
      const encodeComposed = Schema.encodeUnknownEither(codec)
      for (const value of values) {
        const label = `${String(schema)} ${typeof value} ${JSON.stringify(value)}`
        const text = steps.encode(value as never)
        const composed = encodeComposed(value)
        assert.strictEqual(Either.isRight(text), Either.isRight(composed), label)
        if (Either.isRight(text) && Either.isRight(composed)) assert.strictEqual(text.right, composed.right, label)
        // The error is the state Schema's own (the JSON step is a second one), as it was through its parser.
        const own = Schema.encodeUnknownEither(schema)(value)
        if (Either.isLeft(text) && Either.isLeft(own)) assert.strictEqual(text.left.message, own.left.message, label)
        // Stored only when the composed codec's text reads back.
        const stored = steps.store(value as never)
        const readsBack = Either.isRight(composed) && Either.isRight(Schema.decodeEither(codec)(composed.right))
        assert.strictEqual(Either.isRight(stored), readsBack, label)
        if (Either.isRight(stored) && Either.isRight(composed)) assert.strictEqual(stored.right, composed.right, label)
      }
    }
  })

  it("a codec not made by Topic.json runs as it is", () => {
    const steps = JsonCodec.steps(Schema.NumberFromString)
    assert.deepStrictEqual(steps.encode(5), Either.right("5"))
    assert.deepStrictEqual(steps.decode("7"), Either.right(7))
  })

  describe("store", () => {
    /** What the batch checked before `store`: encode, then decode the text back. */
    const reference = <A>(steps: JsonCodec.Steps<A>, value: A): "stored" | "Encode" | "ReadBack" => {
      const text = steps.encode(value)
      if (Either.isLeft(text)) return "Encode"
      return Either.isRight(steps.decode(text.right)) ? "stored" : "ReadBack"
    }
    const verdict = <A>(steps: JsonCodec.Steps<A>, value: A): "stored" | "Encode" | "ReadBack" => {
      const stored = steps.store(value)
      if (Either.isLeft(stored)) return stored.left._tag
      assert.deepStrictEqual(Either.right(stored.right), steps.encode(value), "the stored text is the encoded text")
      return "stored"
    }
    const check = <A, I>(schema: Schema.Schema<A, I>, value: A, expected: "stored" | "Encode" | "ReadBack") => {
      const steps = JsonCodec.steps(Topic.json(schema))
      assert.strictEqual(reference(steps, value), expected, `encode + decode of ${String(value)}`)
      assert.strictEqual(verdict(steps, value), expected, `store of ${String(value)}`)
    }

    it("NaN, Infinity and -Infinity nested in objects and arrays do not read back", () => {
      const Nested = Schema.Struct({ counts: Schema.Array(Schema.Number), inner: Schema.Struct({ n: Schema.Number }) })
      for (const bad of [NaN, Infinity, -Infinity]) {
        check(Nested, { counts: [1, bad], inner: { n: 2 } }, "ReadBack")
        check(Nested, { counts: [1], inner: { n: bad } }, "ReadBack")
        check(Schema.Record({ key: Schema.String, value: Schema.Number }), { a: 1, b: bad }, "ReadBack")
      }
      check(Nested, { counts: [1, 2.5, -0], inner: { n: 1e300 } }, "stored")
    })

    it("undefined in an array, or in a required field JSON drops, does not read back", () => {
      check(Schema.Array(Schema.Union(Schema.Number, Schema.Undefined)), [1, undefined], "ReadBack")
      check(Schema.Undefined, undefined, "ReadBack")
      // A required undefined field JSON drops reads back: the Schema reads a missing key as undefined
      // (Effect's default parse option exact: false), as before.
      check(Schema.Struct({ a: Schema.Undefined, b: Schema.Number }), { a: undefined, b: 1 }, "stored")
      // An optional field JSON drops reads back (without it), as before.
      check(Schema.Struct({ a: Schema.optional(Schema.Number) }), { a: undefined }, "stored")
    })

    it("a bigint or a Date the Schema encodes as itself is not JSON; their string forms are", () => {
      check(Schema.BigIntFromSelf, 1n, "Encode")
      check(Schema.DateFromSelf, new Date(0), "ReadBack")
      check(Schema.Struct({ at: Schema.DateFromSelf }), { at: new Date(0) }, "ReadBack")
      check(Schema.BigInt, 1n, "stored")
      check(Schema.Date, new Date(0), "stored")
      check(Schema.Struct({ at: Schema.Date, note: Schema.OptionFromNullOr(Schema.String) }), { at: new Date(0), note: Option.none() }, "stored")
    })

    it("a transformation whose decode does not undo its encode is read back, not assumed", () => {
      // encode subtracts 10, decode refuses a negative: 5 encodes to -5, which does not decode.
      const Shifted = Schema.transformOrFail(Schema.Number, Schema.Number, {
        strict: true,
        decode: (n, _, ast) => n < 0 ? ParseResult.fail(new ParseResult.Type(ast, n, "negative")) : ParseResult.succeed(n + 10),
        encode: (n) => ParseResult.succeed(n - 10)
      })
      check(Shifted, 5, "ReadBack")
      check(Shifted, 15, "stored")
    })

    it("a Schema that refuses the value fails its encode", () => {
      check(Schema.Int, 1.5, "Encode")
      check(Schema.Int, 2, "stored")
    })
  })

  describe("jsonExact", () => {
    it("exact: only values JSON gives back equal", () => {
      for (const value of ["", "\u2028", true, null, 0, 1.5, [], [1, "a", [null]], {}, { a: { b: [1] } }]) {
        assert.isTrue(JsonExact.exact(value), JSON.stringify(value))
      }
      const holey: Array<number> = [1, 3]
      holey[4] = 5
      const notExact: ReadonlyArray<unknown> = [
        NaN, -Infinity, -0, undefined, 1n, Symbol.for("s"), () => 1, holey, [undefined], { a: undefined }, { a: [NaN] },
        new Date(0), new Map(), Object.create(null), new (class Point { x = 1 })()
      ]
      notExact.forEach((value, i) => assert.isFalse(JsonExact.exact(value), `case ${i}`))
    })

    it("lawful: no transformation, no declaration, no symbol key", () => {
      interface Tree { readonly value: number; readonly children: ReadonlyArray<Tree> }
      const Tree: Schema.Schema<Tree> = Schema.Struct({ value: Schema.Number, children: Schema.Array(Schema.suspend(() => Tree)) })
      for (const schema of [Schema.Number, Schema.Int, Schema.Struct({ a: Schema.String, b: Schema.optional(Schema.Boolean) }), Schema.Array(Schema.Literal("x", 1)), Schema.Record({ key: Schema.String, value: Schema.Unknown }), Tree]) {
        assert.isTrue(JsonExact.lawful(schema.ast), String(schema))
      }
      const sym = Symbol.for("k")
      for (const schema of [Schema.Date, Schema.DateFromSelf, Point, Schema.NumberFromString, Schema.Struct({ [sym]: Schema.Number }), Schema.Struct({ a: Schema.Array(Schema.Date) })]) {
        assert.isFalse(JsonExact.lawful(schema.ast), String(schema))
      }
    })
  })
})
