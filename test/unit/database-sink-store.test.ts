/**
 * The pure parts of the `DatabaseSink`'s store: a dead letter survives the
 * outbox byte for byte, its source is read back from Skein's headers, and
 * driver errors map to `DatabaseError` reasons by their codes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as SinkStore from "../../src/internal/database/SinkStore.ts"
import { SkeinError } from "../../src/index.ts"
import type { Topic } from "../../src/index.ts"

describe("DatabaseSink store", () => {
  it.effect("keeps a dead letter byte for byte through the outbox", () =>
    Effect.gen(function*() {
      const letter: Topic.EncodedRecord = {
        topic: "dlq",
        key: Buffer.from([0, 255, 1]),
        value: "héllo",
        headers: {
          trace: [Buffer.from([1, 2]), "two"],
          "skein.source.topic": "orders",
          "skein.source.partition": "3",
          "skein.source.offset": ["17", "42"]
        },
        timestamp: 1_700_000_000_000
      }
      const back = yield* SinkStore.decodeRecord(SinkStore.encodeRecord(letter))
      assert.deepStrictEqual(back.key, Buffer.from([0, 255, 1]))
      assert.deepStrictEqual(back.value, Buffer.from("héllo", "utf8"))
      assert.deepStrictEqual(back.headers?.["trace"], [Buffer.from([1, 2]), Buffer.from("two")])
      assert.strictEqual(back.timestamp, 1_700_000_000_000)
      // Skein's value follows an original one of the same name: the last is the source.
      assert.deepStrictEqual(SinkStore.sourceOf(letter), Option.some({ topic: "orders", partition: 3, offset: 42 }))
      assert.deepStrictEqual(SinkStore.sourceOf({ topic: "dlq", key: null, value: null }), Option.none())
    }))

  it.effect("fails on an outbox row that is not a stored record", () =>
    Effect.map(Effect.flip(SinkStore.decodeRecord("{\"topic\":1}")), (error) => assert.strictEqual(error._tag, "ParseError")))

  it("maps driver errors to reasons by their codes, with the fix for a refusal", () => {
    const refused = SinkStore.toDatabaseError("ensure")({ _tag: "SqlError", cause: Object.assign(new Error("permission denied for schema public"), { code: "42501" }) })
    assert.strictEqual(refused.reason, "Refused")
    assert.include(refused.message, "Grant")
    const gone = SinkStore.toDatabaseError("commit")({ _tag: "SqlError", cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }) })
    assert.strictEqual(gone.reason, "Unavailable")
    const other = SinkStore.toDatabaseError("commit")({ _tag: "SqlError", cause: Object.assign(new Error("syntax error"), { code: "42601" }) })
    assert.strictEqual(other.reason, "Failed")
    // A refusal needs a fix first; a server that went away may be back at the next start.
    assert.strictEqual(SkeinError.category(refused), "setup")
    assert.isTrue(SkeinError.isTransient(gone))
    assert.isTrue(SkeinError.isSkeinError(other))
  })
})
