import { assert, describe, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import { decodeRecord, strictText } from "../../src/internal/runtime/decode.ts"
import type { FetchedRecord } from "../../src/internal/kafka/consumer.ts"
import { DecodeError } from "../../src/SkeinError.ts"
import * as Topic from "../../src/Topic.ts"

const record = (key: Buffer | null, value: Buffer | null): FetchedRecord => ({
  topic: "in",
  partition: 1,
  offset: 42,
  key,
  value,
  headers: {},
  rawHeaders: {},
  timestamp: 0
})

const Orders = Topic.make({
  name: "in",
  key: Schema.String,
  value: Topic.json(Schema.Struct({ id: Schema.String, amount: Schema.Number }))
})

const failure = (decoded: Either.Either<unknown, DecodeError>): DecodeError => {
  if (Either.isRight(decoded)) throw new Error("expected a DecodeError")
  return decoded.left
}

describe("decodeRecord", () => {
  it("decodes valid UTF-8 text with the topic's Schemas", () => {
    const decoded = decodeRecord(Orders, record(Buffer.from("ключ"), Buffer.from(JSON.stringify({ id: "😀", amount: 1 }))))
    assert.deepStrictEqual(decoded, Either.right({ key: "ключ", value: { id: "😀", amount: 1 } }))
  })

  it("a null key decodes to null; an empty value is text", () => {
    const Text = Topic.make({ name: "in", key: Schema.String, value: Schema.String })
    assert.deepStrictEqual(decodeRecord(Text, record(null, Buffer.alloc(0))), Either.right({ key: null, value: "" }))
  })

  for (
    const [name, bytes] of [
      ["a lone 0xff", [0xff]],
      ["a continuation byte", [0x80]],
      ["an overlong NUL", [0xc0, 0x80]],
      ["an encoded surrogate", [0xed, 0xa0, 0x80]],
      ["a truncated sequence", [0xe2, 0x82]],
      ["a code point above U+10FFFF", [0xf4, 0x90, 0x80, 0x80]]
    ] as const
  ) {
    it(`invalid UTF-8 (${name}) in the value is a poison record, never U+FFFD`, () => {
      const value = Buffer.concat([Buffer.from('{"id":"'), Buffer.from(bytes), Buffer.from('","amount":1}')])
      const error = failure(decodeRecord(Orders, record(Buffer.from("k"), value)))
      assert.strictEqual(error.part, "value")
      assert.deepStrictEqual([error.topic, error.partition, error.offset], ["in", 1, 42])
      assert.include(error.message, "not valid UTF-8")
    })
  }

  it("invalid UTF-8 in the key is a poison record of the key", () => {
    const error = failure(decodeRecord(Orders, record(Buffer.from([0x6b, 0xff]), Buffer.from('{"id":"a","amount":1}'))))
    assert.strictEqual(error.part, "key")
    assert.include(error.message, "key is not valid UTF-8")
  })

  it("the shared decoder recovers after invalid input", () => {
    assert.isUndefined(strictText(Buffer.from([0xe2, 0x82])))
    assert.strictEqual(strictText(Buffer.from("€")), "€")
    assert.strictEqual(strictText(Buffer.from([0xe2, 0x82, 0xac])), "€")
  })

  it("a byte order mark is kept as text (it is not JSON)", () => {
    assert.strictEqual(strictText(Buffer.from([0xef, 0xbb, 0xbf, 0x61])), "\ufeffa")
    const error = failure(decodeRecord(Orders, record(null, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"id":"a","amount":1}')]))))
    assert.strictEqual(error.part, "value")
  })

  it("a tombstone and a Schema failure are poison records with a bounded message", () => {
    assert.strictEqual(failure(decodeRecord(Orders, record(Buffer.from("k"), null))).part, "value")
    const deep = failure(decodeRecord(Orders, record(Buffer.from("k"), Buffer.from("[".repeat(100_000)))))
    assert.isAtMost(deep.message.length, 1200)
  })

  it("a codec that throws (a recursion too deep) is a poison record, not a crash", () => {
    interface Tree {
      readonly children: ReadonlyArray<Tree>
    }
    const Tree: Schema.Schema<Tree> = Schema.Struct({ children: Schema.Array(Schema.suspend(() => Tree)) })
    const Trees = Topic.make({ name: "in", key: Schema.String, value: Topic.json(Tree) })
    const nested = '{"children":['.repeat(50_000) + "]}".repeat(50_000)
    const error = failure(decodeRecord(Trees, record(Buffer.from("k"), Buffer.from(nested))))
    assert.strictEqual(error.part, "value")
    assert.isAtMost(error.message.length, 1200)
  })
})
