/**
 * Issue 29, defect 3: while a record of one partition retries (its rule's
 * schedule, well within its `maxRetryDuration`), the other partitions keep
 * being fetched, processed and committed: a task's batch runs beside the
 * others, and the poll loop never waits for it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Data, Deferred, Effect, Schedule, Schema } from "effect"
import { ErrorRule, Topic, Transformer } from "../../src/index.ts"
import { createTopics, eventually, groupOffsets, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

class NotYet extends Data.TaggedError("NotYet")<{ readonly key: string }> {}

describe("a record retrying on one partition", () => {
  it.scopedLive("holds up no other partition: their records commit while it retries", () =>
    Effect.gen(function*() {
      const input = unique("beside-in")
      const output = unique("beside-out")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const released = yield* Deferred.make<void>()
      let attempts = 0
      let attemptsWhenOthersCommitted = -1
      const transformer = Transformer.stateless({
        name: "beside",
        inputs: [In],
        transform: (record) =>
          Effect.gen(function*() {
            if (record.key === "slow" && !(yield* Deferred.isDone(released))) {
              attempts++
              return yield* new NotYet({ key: "slow" })
            }
            return { emit: [Topic.record(Out, record.key, record.value)] }
          }),
        rules: [ErrorRule.tagged("NotYet", { retry: Schedule.spaced("100 millis"), maxRetryDuration: "10 minutes", then: "fail" })]
      })
      const applicationId = unique("beside-app")
      yield* startInstance(transformer, { applicationId })
      yield* produce(input, [{ key: "slow", value: "0", partition: 0 }])
      yield* eventually(Effect.sync(() => attempts >= 2), { what: "the slow record to be retried" })
      yield* produce(input, ["a", "b", "c"].map((key) => ({ key, value: key, partition: 1 })))
      const committedBeside = yield* eventually(
        Effect.map(groupOffsets(applicationId, input), (committed) => (committed.get(1) ?? -1) >= 3),
        { timeout: 60_000, what: "partition 1's records to commit while partition 0's record retries" }
      ).pipe(Effect.either)
      attemptsWhenOthersCommitted = attempts
      yield* Deferred.succeed(released, undefined)
      assert.isTrue(committedBeside._tag === "Right", "partition 1 committed while partition 0's record was retrying")
      yield* eventually(
        Effect.map(groupOffsets(applicationId, input), (committed) => (committed.get(0) ?? -1) >= 1),
        { timeout: 60_000, what: "the slow record to succeed once released" }
      )
      assert.isAtLeast(attemptsWhenOthersCommitted, 2)
      assert.deepStrictEqual((yield* readCommitted(output)).map((r) => r.key).sort(), ["a", "b", "c", "slow"], "every record's output, once")
    }), 180_000)
})
