import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Option, Schema } from "effect"
import { Runner, SkeinConfig, Topic, Transformer } from "../../src/index.ts"
import { brokers, caughtUp, createTopics, eventually, groupOffsets, produce, readCommitted, unique } from "../helpers/kafka.ts"

/**
 * Issue 29, defect 4: a batch was bounded only by count, so a backlog of slow
 * records became one transaction committed after all of them. With
 * `maxBatchDuration`, what finished commits and the rest continues in the
 * next transaction.
 */
describe("maxBatchDuration", () => {
  it.scopedLive("a backlog of slow records commits in several transactions, the first before the last record runs", () =>
    Effect.gen(function*() {
      const input = unique("duration-in")
      const output = unique("duration-out")
      const applicationId = unique("duration-app")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const count = 60
      const values = Array.from({ length: count }, (_, i) => `v-${i}`)
      const last = values[count - 1]!
      // The last record of the backlog waits until the group has committed something:
      // within one transaction for the whole backlog, that never happens.
      const firstCommitSeen = yield* Deferred.make<void>()
      const copy = Transformer.stateless({
        name: "copy",
        inputs: [In],
        transform: (record) =>
          Effect.gen(function*() {
            // Each record takes a while, so the backlog lasts well past maxBatchDuration.
            yield* Effect.sleep(Duration.millis(20))
            if (record.value === last) yield* Deferred.await(firstCommitSeen)
            return { emit: [Topic.record(Out, record.key, record.value)] }
          })
      })
      // The whole backlog is in the topic before the runner starts: one fetch, one poll.
      yield* produce(input, values.map((value) => ({ key: "k", value })))
      const stats = Runner.makeStats()
      const fiber = yield* Effect.forkScoped(
        Runner.runWithStats(copy, stats).pipe(
          Effect.provide(SkeinConfig.layer({ applicationId, brokers: brokers(), maxBatchDuration: Duration.millis(200) }))
        )
      )
      const committedBeforeLast = yield* eventually(
        Effect.map(groupOffsets(applicationId, input), (committed) => (committed.get(0) ?? -1) > 0),
        { timeout: 60_000, what: "a commit while the backlog's last record is held (one transaction for the whole backlog never commits)" }
      ).pipe(Effect.either)
      yield* Deferred.succeed(firstCommitSeen, undefined)
      assert.isTrue(committedBeforeLast._tag === "Right", "part of the backlog committed before its last record finished")
      yield* caughtUp(applicationId, input)
      assert.ok(Option.isNone(yield* Fiber.poll(fiber)), "the runner is still running")
      const outputs = (yield* readCommitted(output)).map((r) => r.value)
      assert.deepStrictEqual(outputs, values, "every record's output, once, in order")
      assert.isAbove(stats.commits, 1, "the backlog committed in more than one transaction")
    }), 120_000)
})
