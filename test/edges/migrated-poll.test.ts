import { assert, describe, it } from "@effect/vitest"
import { Data, Deferred, Effect, Option, Schema } from "effect"
import { Topic, Transformer } from "../../src/index.ts"
import { createTopics, eventually, kafka, produce, sleep, startInstance, unique } from "../helpers/kafka.ts"

class Boom extends Data.TaggedError("Boom")<{ readonly offset: number }> {}

// Issue 11, defect 8: a poll in which one task migrated (its commit was fenced)
// dropped the other tasks' outcomes: a record that failed in the same poll was
// forgotten, so after the rejoin its handler ran again instead of its
// partition staying stopped.
describe("a poll with a migrated task", () => {
  it.scopedLive("keeps the other tasks' failures: the failed partition stops once, its record runs once", () =>
    Effect.gen(function*() {
      const input = unique("mig-in")
      const output = unique("mig-out")
      const applicationId = unique("mig-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 1 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const calls = new Map<string, number>()
      const fenceNow = yield* Deferred.make<void>()
      const fenced = yield* Deferred.make<void>()
      const transformer = Transformer.stateless({
        name: "mig-copy",
        inputs: [In],
        transform: (record) =>
          Effect.gen(function*() {
            calls.set(record.value, (calls.get(record.value) ?? 0) + 1)
            if (record.value === "fenced" && calls.get("fenced") === 1) {
              yield* Deferred.succeed(fenceNow, undefined)
              yield* Deferred.await(fenced)
            }
            if (record.value === "boom") return yield* Effect.fail(new Boom({ offset: record.offset }))
            return { emit: [Topic.record(Out, record.key, record.value)] }
          })
      })
      const instance = yield* startInstance(transformer, { applicationId, maxPollRecords: 10, failureIsolation: "partition" })
      yield* eventually(Effect.sync(() => instance.stats.assigned.size === 2), { what: "both tasks to start" })
      // One send, so one fetch brings both partitions' batches, and one poll processes them.
      yield* produce(input, [{ key: "a", value: "fenced", partition: 0 }, { key: "b", value: "boom", partition: 1 }])
      yield* Deferred.await(fenceNow)
      // A newer owner of task 0's transactional id: task 0's commit in this poll is fenced.
      yield* Effect.promise(async () => {
        const producer = kafka().producer({ transactionalId: `${applicationId}-0`, idempotent: true, maxInFlightRequests: 1 })
        await producer.connect()
        const transaction = await producer.transaction()
        await transaction.abort()
        await producer.disconnect()
      })
      yield* Deferred.succeed(fenced, undefined)
      yield* eventually(Effect.sync(() => instance.stats.migrations > 0), { what: "task 0 to migrate" })
      // After the rejoin, task 0 runs "fenced" again and commits; partition 1 must stay stopped.
      yield* eventually(Effect.sync(() => (calls.get("fenced") ?? 0) >= 2 && instance.stats.assigned.has(0)), {
        timeout: 30_000,
        what: "task 0 to restart"
      })
      yield* sleep(2_000)
      assert.deepStrictEqual(
        {
          boomCalls: calls.get("boom"),
          stopped: [...instance.stats.stopped.keys()],
          ended: Option.isSome(yield* instance.exit)
        },
        { boomCalls: 1, stopped: [1], ended: false }
      )
    }), { timeout: 90_000 })
})
