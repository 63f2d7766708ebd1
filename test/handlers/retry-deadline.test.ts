/**
 * Defect: one stuck record stopped the instance. A retry rule with an endless
 * schedule (`Schedule.spaced` without a limit) retried a record that always
 * fails for ever; a poll waits for every task, so records arriving on other
 * partitions were never polled again. A rule's retries now end at its
 * `maxRetryDuration` (default `ErrorRule.defaultMaxRetryDuration`), and the
 * rule's `then` takes the record.
 */
import { assert, describe, it } from "@effect/vitest"
import { Data, Effect, Schedule, Schema } from "effect"
import { ErrorRule, Topic, Transformer } from "../../src/index.ts"
import { createTopics, eventually, groupOffsets, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

class Stuck extends Data.TaggedError("Stuck")<{ readonly key: string }> {}

describe("a record whose retries never end", () => {
  it.scopedLive("goes to the rule's `then` at its deadline; records on another partition are committed", () =>
    Effect.gen(function*() {
      const input = unique("stuck-in")
      const output = unique("stuck-out")
      const dlq = unique("stuck-dlq")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }, { name: dlq, partitions: 1 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const started = Date.now()
      const events: Array<string> = []
      const event = (name: string) => {
        if (events[events.length - 1] !== name) events.push(name)
        process.stderr.write(`[retry-deadline] +${Date.now() - started} ms ${name}\n`)
      }
      let attempts = 0
      const transformer = Transformer.stateless({
        name: "stuck",
        inputs: [In],
        transform: (record) =>
          record.key === "stuck"
            ? Effect.suspend(() => {
              attempts++
              event("stuck attempt")
              return Effect.fail(new Stuck({ key: record.key ?? "" }))
            })
            : Effect.sync(() => {
              event(`processed ${record.key}`)
              return { emit: [Topic.record(Out, record.key, record.value)] }
            }),
        rules: [ErrorRule.tagged("Stuck", { retry: Schedule.spaced("200 millis"), maxRetryDuration: "3 seconds", then: "dlq" })]
      })
      const applicationId = unique("stuck-app")
      yield* startInstance(transformer, { applicationId, deadLetterTopic: dlq })
      yield* produce(input, [{ key: "stuck", value: "never", partition: 0 }])
      // Partition 1's records come after the stuck record's poll, while it retries.
      yield* eventually(Effect.sync(() => attempts >= 2), { what: "the stuck record to be retried" })
      event("produce to partition 1")
      yield* produce(input, [{ key: "a", value: "1", partition: 1 }, { key: "b", value: "2", partition: 1 }])
      // A guard against the hang this test is about, not a bound on the deadline's timing.
      yield* eventually(
        Effect.map(groupOffsets(applicationId, input), (committed) => (committed.get(1) ?? -1) >= 2),
        { timeout: 90_000, what: "partition 1's records to be committed while partition 0's record retries endlessly" }
      )
      event("partition 1 committed")
      yield* eventually(
        Effect.map(groupOffsets(applicationId, input), (committed) => (committed.get(0) ?? -1) >= 1),
        { timeout: 90_000, what: "the stuck record to be dead-lettered and committed past" }
      )
      const dead = yield* readCommitted(dlq)
      assert.deepStrictEqual(dead.map((r) => r.key), ["stuck"], "the stuck record went to the rule's `then` (the dead letter topic)")
      assert.deepStrictEqual(
        (yield* readCommitted(output)).map((r) => r.key).sort(),
        ["a", "b"],
        "partition 1's records were processed and committed"
      )
      // The order of events: the stuck record retried before partition 1's records arrived, and
      // they were processed and committed after that.
      const order = events.join(" -> ")
      assert.strictEqual(events[0], "stuck attempt", order)
      const produced = events.indexOf("produce to partition 1")
      assert.isTrue(produced > 0, order)
      assert.isTrue(events.indexOf("processed a") > produced && events.indexOf("processed b") > produced, order)
      assert.isTrue(events.indexOf("partition 1 committed") > events.indexOf("processed b"), order)
    }))
})
