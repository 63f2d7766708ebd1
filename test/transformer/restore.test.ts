import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, kafka, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

describe("restore", () => {
  it.scopedLive("state, deletes included, is restored on another instance; aborted changelog writes never are", () =>
    Effect.gen(function*() {
      const input = unique("restore-in")
      const output = unique("restore-out")
      const applicationId = unique("restore-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Schema.Number) })
      const summer = Transformer.make({
        name: "sum",
        inputs: [In],
        state: Schema.Number,
        transform: (record, sum) => {
          if (record.value === "delete") return Effect.succeed({ state: Transformer.remove })
          const next = Option.getOrElse(sum, () => 0) + Number(record.value)
          return Effect.succeed({ emit: [Topic.record(Out, record.key, next)], state: Transformer.set(next) })
        }
      })
      const keys = Array.from({ length: 12 }, (_, i) => `key-${i}`)
      // First owner: every key gets 1 + 2 + 3; keys 0..3 are then deleted.
      yield* produce(input, keys.flatMap((key) => ["1", "2", "3"].map((value) => ({ key, value }))))
      yield* produce(input, keys.slice(0, 4).map((key) => ({ key, value: "delete" })))
      const first = yield* startInstance(summer, { applicationId, maxPollRecords: 7 })
      yield* caughtUp(applicationId, input)
      yield* first.stop

      // A crashed owner's transaction left open with changelog writes in it: the
      // next owner's fencing aborts it, and restoring must not see its values.
      const changelog = Transformer.changelogTopic(applicationId, summer)
      const zombies = yield* Effect.promise(() =>
        Promise.all([0, 1].map(async (partition) => {
          const producer = kafka().producer({ transactionalId: `${applicationId}-${partition}`, idempotent: true, maxInFlightRequests: 1 })
          await producer.connect()
          const transaction = await producer.transaction()
          await transaction.send({
            topic: changelog,
            messages: keys.map((key) => ({ key, value: "1000000", partition }))
          })
          return producer
        }))
      )

      // Another instance: its own stateDir, no local state, so it restores in full.
      const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), "skein-restore-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(elsewhere, { recursive: true, force: true })))
      const second = yield* startInstance(summer, { applicationId, maxPollRecords: 7, stateDir: elsewhere })
      yield* produce(input, keys.map((key) => ({ key, value: "10" })))
      yield* caughtUp(applicationId, input)
      assert.isAbove(second.stats.restoredRecords, 0)
      assert.deepStrictEqual([...second.stats.restores.values()].map((r) => r.mode), ["full", "full"])
      yield* Effect.promise(() => Promise.all(zombies.map((p) => p.disconnect())))

      const records = yield* readCommitted(output)
      const last = new Map<string, number>()
      for (const r of [...records].sort((a, b) => a.offset - b.offset)) last.set(r.key ?? "", Number(r.value))
      for (const [i, key] of keys.entries()) {
        // Deleted keys restart from nothing; the others continue from 6.
        assert.strictEqual(last.get(key), i < 4 ? 10 : 16, key)
      }
      assert.strictEqual(records.length, keys.length * 3 + keys.length)
    }))
})
