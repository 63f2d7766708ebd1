import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Option, Schema } from "effect"
import { Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, eventually, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

class InjectedFailure extends Schema.TaggedError<InjectedFailure>()("InjectedFailure", { offset: Schema.Number }) {}

// EosIntegrationTest "failure mid-transaction": per partition 10 records are
// committed, then 5 more arrive and the transform fails on one of them.
describe("failure in the middle of a transaction", () => {
  it.scopedLive("the run fails with the typed error; a restart finishes exactly once with exact sums", () =>
    Effect.gen(function*() {
      const input = unique("fail-in")
      const output = unique("fail-out")
      const applicationId = unique("fail-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Topic.json(Schema.Number) })
      const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Schema.Number) })
      let failOn: number | undefined = undefined
      const summer = Transformer.make({
        name: "sum",
        inputs: [In],
        state: Schema.Number,
        transform: (record, sum) =>
          record.value === failOn
            ? Effect.fail(new InjectedFailure({ offset: record.offset }))
            : Effect.succeed({
              emit: [Topic.record(Out, record.key, Option.getOrElse(sum, () => 0) + record.value)],
              state: Transformer.set(Option.getOrElse(sum, () => 0) + record.value)
            })
      })
      const keys = ["a", "b", "c", "d"]
      // Values 1..10 per partition, keys spread over both partitions.
      const first = Array.from({ length: 20 }, (_, i) => ({
        key: keys[i % 4] ?? "a",
        value: JSON.stringify(i + 1),
        partition: i % 2
      }))
      yield* produce(input, first)
      const one = yield* startInstance(summer, { applicationId, maxPollRecords: 100 })
      yield* caughtUp(applicationId, input)
      // Five more per partition; the transform fails on value 23.
      failOn = 23
      yield* produce(input, Array.from({ length: 10 }, (_, i) => ({
        key: keys[i % 4] ?? "a",
        value: JSON.stringify(21 + i),
        partition: i % 2
      })))
      yield* eventually(Effect.map(one.exit, Option.isSome), { what: "the run to fail" })
      const exit = yield* Fiber.await(one.fiber)
      assert.ok(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        const error = Option.getOrUndefined(Cause.failureOption(exit.cause))
        assert.ok(error instanceof InjectedFailure, `typed failure, got ${String(exit.cause)}`)
      }
      // Nothing past the 20 committed records is visible.
      const visible = yield* readCommitted(output)
      assert.strictEqual(visible.length <= 30, true)
      const committedValues = visible.map((r) => Number(r.value))
      assert.ok(committedValues.length >= 20)

      failOn = undefined
      yield* startInstance(summer, { applicationId, maxPollRecords: 100 })
      yield* caughtUp(applicationId, input)
      const records = yield* readCommitted(output)
      assert.strictEqual(records.length, 30, "each input record produces exactly one output")
      // The last output per key is the exact sum of its inputs.
      const sums = new Map<string, number>()
      for (let i = 0; i < 20; i++) sums.set(keys[i % 4] ?? "a", (sums.get(keys[i % 4] ?? "a") ?? 0) + i + 1)
      for (let i = 0; i < 10; i++) sums.set(keys[i % 4] ?? "a", (sums.get(keys[i % 4] ?? "a") ?? 0) + 21 + i)
      const last = new Map<string, number>()
      for (const r of [...records].sort((a, b) => a.offset - b.offset)) last.set(r.key ?? "", Number(r.value))
      assert.deepStrictEqual(Object.fromEntries(last), Object.fromEntries(sums))
      // Every running sum appears once: the outputs per key are strictly increasing.
      for (const key of keys) {
        const seq = records.filter((r) => r.key === key).sort((a, b) => a.offset - b.offset).map((r) => Number(r.value))
        assert.deepStrictEqual(seq, [...new Set(seq)].sort((a, b) => a - b))
      }
    }))
})
