import { assert, describe, it } from "@effect/vitest"
import { Effect, Metric } from "effect"
import * as RepartitionPurge from "../../src/internal/streams/repartitionPurge.ts"
import { KafkaError } from "../../src/SkeinError.ts"

describe("repartition purge", () => {
  it.effect("deletes below each reader's committed offsets; a purge that fails is counted and leaves the others", () =>
    Effect.gen(function*() {
      const deleted: Array<{ topic: string; offsets: ReadonlyArray<{ partition: number; offset: number }> }> = []
      const admin = {
        groupOffsets: (groupId: string, topic: string) =>
          Effect.succeed(
            groupId === "app-sub-1"
              ? [{ partition: 0, offset: 5 }, { partition: 1, offset: 0 }, { partition: 2, offset: 12 }]
              : [{ partition: 0, offset: 3 }]
          ).pipe(Effect.tap(() => Effect.sync(() => assert.include(topic, "-repartition")))),
        deleteRecordsBefore: (topic: string, offsets: ReadonlyArray<{ partition: number; offset: number }>) =>
          topic === "app-denied-repartition"
            ? Effect.fail(new KafkaError({ reason: "Protocol", operation: "deleteTopicRecords", cause: new Error("denied") }))
            : Effect.sync(() => {
              deleted.push({ topic, offsets })
            })
      }
      const failures = Metric.tagged(RepartitionPurge.purgeFailures, "topic", "app-denied-repartition")
      const before = (yield* Metric.value(failures)).count
      yield* RepartitionPurge.purgeOnce(admin, [
        { topic: "app-denied-repartition", groupId: "app-sub-2" },
        { topic: "app-by-key-repartition", groupId: "app-sub-1" }
      ])
      // Partition 1 has read nothing yet: nothing to delete there.
      assert.deepStrictEqual(deleted, [{
        topic: "app-by-key-repartition",
        offsets: [{ partition: 0, offset: 5 }, { partition: 2, offset: 12 }]
      }])
      const after = yield* Metric.value(failures)
      assert.strictEqual(after.count - before, 1)
    }))
})
