import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Option, Schema } from "effect"
import { Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, eventually, groupOffsets, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

class InjectedFailure extends Schema.TaggedError<InjectedFailure>()("InjectedFailure", { offset: Schema.Number }) {}

// EosIntegrationTest "failure mid-transaction": per partition 10 records are
// committed, then 5 more arrive and the transform fails on one of them. One
// transaction per task (partition) per batch: the failed record's task commits
// the work finished before the record and nothing past it (docs/error-handling.md,
// "Delivery and failures"); the other partition's batch is committed before the failing
// one arrives, so what is visible after the failure is exact.
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
      // Values 1..10 per partition, keys spread over both partitions: a and c on partition 0, b and d on 1.
      const first = Array.from({ length: 20 }, (_, i) => ({
        key: keys[i % 4] ?? "a",
        value: JSON.stringify(i + 1),
        partition: i % 2
      }))
      yield* produce(input, first)
      const one = yield* startInstance(summer, { applicationId, maxPollRecords: 100 })
      yield* caughtUp(applicationId, input)
      const more = Array.from({ length: 10 }, (_, i) => ({
        key: keys[i % 4] ?? "a",
        value: JSON.stringify(21 + i),
        partition: i % 2
      }))
      // Five more on partition 1 (22..30, even), committed.
      yield* produce(input, more.filter((r) => r.partition === 1))
      yield* caughtUp(applicationId, input)
      // Five more on partition 0 (21..29, odd) in one send, so in one batch: 21 finishes, the transform fails on 23.
      failOn = 23
      yield* produce(input, more.filter((r) => r.partition === 0))
      yield* eventually(Effect.map(one.exit, Option.isSome), { what: "the run to fail" })
      const exit = yield* Fiber.await(one.fiber)
      assert.ok(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        const error = Option.getOrUndefined(Cause.failureOption(exit.cause))
        assert.ok(error instanceof InjectedFailure, `typed failure, got ${String(exit.cause)}`)
        assert.strictEqual(error.offset, 11, "the failed record is 23, partition 0 offset 11")
      }
      // Exactly the work before the failed record is visible: partition 0 up to 21, all of partition 1.
      const outputsByKey = (records: ReadonlyArray<{ readonly key: string | null; readonly value: string | null; readonly offset: number; readonly partition: number }>) => {
        const byKey: Record<string, Array<number>> = {}
        for (const r of [...records].sort((a, b) => a.partition - b.partition || a.offset - b.offset)) {
          ;(byKey[r.key ?? ""] ??= []).push(Number(r.value))
        }
        return byKey
      }
      const runningSums = (values: ReadonlyArray<number>) => values.map((_, i) => values.slice(0, i + 1).reduce((n, v) => n + v, 0))
      const inputsOf = (key: string, upTo: number) =>
        [...first, ...more].filter((r) => r.key === key && Number(r.value) <= upTo).map((r) => Number(r.value))
      assert.deepStrictEqual(outputsByKey(yield* readCommitted(output)), {
        a: runningSums(inputsOf("a", 21)),
        b: runningSums(inputsOf("b", 30)),
        c: runningSums(inputsOf("c", 22)),
        d: runningSums(inputsOf("d", 30))
      }, "committed: partition 0 up to 21 (not 23 or past it), partition 1 complete")
      assert.deepStrictEqual(
        Object.fromEntries(yield* groupOffsets(applicationId, input)),
        { 0: 11, 1: 15 },
        "partition 0 committed up to the failed record (offset 11), partition 1 to its end"
      )

      failOn = undefined
      yield* startInstance(summer, { applicationId, maxPollRecords: 100 })
      yield* caughtUp(applicationId, input)
      // Each input record produces exactly one output: per key, every running sum once, in order, ending at the exact sum.
      assert.deepStrictEqual(outputsByKey(yield* readCommitted(output)), {
        a: runningSums(inputsOf("a", 30)),
        b: runningSums(inputsOf("b", 30)),
        c: runningSums(inputsOf("c", 30)),
        d: runningSums(inputsOf("d", 30))
      })
    }))
})
