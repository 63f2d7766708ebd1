import { assert, describe, it } from "@effect/vitest"
import { Cause, Either, ParseResult, Schema } from "effect"
import * as util from "node:util"
import { bounded, describe as describeError, describeIssue, formatParseError, truncate } from "../../src/internal/util/errorText.ts"
import { DecodeError, EncodeError } from "../../src/SkeinError.ts"
import * as Topic from "../../src/Topic.ts"

const Order = Topic.make({
  name: "orders",
  key: Schema.String,
  value: Topic.json(Schema.Struct({ id: Schema.String, amount: Schema.Number }))
})

const deep = (depth: number) => "[".repeat(depth) + "]".repeat(depth)

/** The DecodeError of a value that fails Order's value Schema. */
const decodeError = (value: string) => {
  const decoded = Order.decode("k", value)
  if (Either.isRight(decoded)) throw new Error("expected a decode failure")
  return new DecodeError({ topic: "orders", partition: 0, offset: 7, part: decoded.left.part, cause: decoded.left.cause })
}

describe("error texts of poison records", () => {
  it("a deeply nested JSON value: its DecodeError formats without overflowing the stack, bounded", () => {
    const error = decodeError(deep(50_000))
    const message = error.message
    assert.include(message, "Cannot decode the value of orders/0@7")
    assert.isAtMost(message.length, 2048)
    assert.isAtMost(error.cause.message.length, 2048)
    assert.isAtMost(String(error.cause).length, 2048)
    assert.isAtMost(Cause.pretty(Cause.fail(error)).length, 16_384)
    assert.isAtMost(util.inspect(error).length, 16_384)
    assert.isAtMost(String(error.stack).length, 16_384)
  })

  it("a huge value: the message never embeds an unbounded copy of it", () => {
    const error = decodeError(JSON.stringify(Array.from({ length: 100_000 }, (_, i) => i)))
    assert.isAtMost(error.message.length, 2048)
    assert.isAtMost(Cause.pretty(Cause.fail(error)).length, 16_384)
  })

  it("an EncodeError of a huge, deep output is bounded too", () => {
    let value: unknown = 1
    for (let i = 0; i < 50_000; i++) value = [value]
    const encoded = Schema.encodeUnknownEither(Schema.Struct({ id: Schema.String }))(value)
    if (Either.isRight(encoded)) throw new Error("expected an encode failure")
    const error = new EncodeError({ topic: "out", cause: encoded.left })
    assert.isAtMost(error.message.length, 2048)
    assert.isAtMost(Cause.pretty(Cause.fail(error)).length, 16_384)
  })
})

describe("errorText", () => {
  it("truncate keeps short texts and cuts long ones with a marker, never inside a surrogate pair", () => {
    assert.strictEqual(truncate("short", 10), "short")
    const cut = truncate("😀".repeat(1000), 101)
    assert.isAtMost(cut.length, 101)
    assert.include(cut, "more characters]")
    assert.notMatch(cut, /[\ud800-\udbff](?![\udc00-\udfff])/, "no lone high surrogate")
  })

  it("describe never throws and is bounded, whatever the failure", () => {
    const throwing = new Error("x")
    Object.defineProperty(throwing, "message", {
      get() {
        throw new RangeError("Maximum call stack size exceeded")
      }
    })
    assert.strictEqual(describeError(throwing), "Error (its message cannot be formatted)")
    assert.strictEqual(describeError({ a: 1 }), '{"a":1}')
    assert.include(describeError({ n: 1n }), "cannot be formatted")
    const circular: Record<string, unknown> = {}
    circular["self"] = circular
    assert.include(describeError(circular), "cannot be formatted")
    assert.isAtMost(describeError("y".repeat(100_000)).length, 1024)
    assert.strictEqual(describeError(undefined), "undefined")
  })

  it("a ParseError too deep to format falls back to its kind, path and message", () => {
    const issue = new ParseResult.Pointer(
      "a",
      {},
      new ParseResult.Pointer(0, [], new ParseResult.Type(Schema.Number.ast, "x", "not a number"))
    )
    assert.strictEqual(
      describeIssue(issue),
      'Type issue at ["a"][0], expected number: not a number (the full description is too deep or too large to format)'
    )
    const deep = decodeError("[".repeat(50_000)).cause
    assert.strictEqual(bounded(deep), deep, "bounded once")
    assert.isAtMost(formatParseError(deep).length, 1024)
  })
})
