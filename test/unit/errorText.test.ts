import { assert, describe, it } from "@effect/vitest"
import { Cause, Either, Schema } from "effect"
import * as util from "node:util"
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
