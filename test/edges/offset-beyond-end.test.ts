import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Option, Schema } from "effect"
import { SkeinError, Topic, Transformer } from "../../src/index.ts"
import {
  createTopics,
  eventually,
  groupOffsets,
  produce,
  readCommitted,
  setGroupOffsets,
  startInstance,
  unique
} from "../helpers/kafka.ts"

// Issue 29, defect 6: a committed offset beyond the partition's end (an unclean leader election
// truncated the log, or an operator set the offsets past it). The task started there, the fetch
// came back from kafkajs's reset offset, the runner restarted the task at once, again and again
// (no backoff), and once the partition grew past the committed offset the records below it were
// skipped. It is OffsetOutOfRange, handled per failureIsolation: "partition" stops that
// partition's task (reported in health, the others go on), "run" ends the run with it.
describe("committed offset beyond the end of its partition", () => {
  for (const isolation of ["partition", "run"] as const) {
    it.scopedLive(`OffsetOutOfRange, no restart loop, no skip (${isolation})`, () =>
      Effect.gen(function*() {
        const input = unique("beyond-in")
        const output = unique("beyond-out")
        const applicationId = unique("beyond-app")
        yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 1 }])
        const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
        const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
        const copy = Transformer.stateless({
          name: "beyond-copy",
          inputs: [In],
          transform: (record) =>
            Effect.succeed({ emit: [Topic.record(Out, record.key, `${record.partition}:${record.offset}`)] })
        })
        const records = (partition: number, from: number, count: number) =>
          Array.from({ length: count }, (_, i) => ({ key: `k${from + i}`, value: `v${from + i}`, partition }))
        yield* produce(input, [...records(0, 0, 5), ...records(1, 0, 5)])
        // Partition 0 ends at 5; its committed offset says 20.
        yield* setGroupOffsets(applicationId, input, [{ partition: 0, offset: 20 }, { partition: 1, offset: 0 }])

        const instance = yield* startInstance(copy, { applicationId, failureIsolation: isolation })
        if (isolation === "partition") {
          // Partition 1 runs: its records are committed.
          yield* eventually(
            Effect.map(groupOffsets(applicationId, input), (committed) => committed.get(1) === 5),
            { what: "partition 1's records committed", timeout: 60_000 }
          )
          // Partition 0 grows past its committed offset; partition 1 gets more records too, and
          // once those are committed the runner has fetched both partitions since.
          yield* produce(input, [...records(0, 5, 20), ...records(1, 5, 5)])
          yield* eventually(
            Effect.map(groupOffsets(applicationId, input), (committed) => committed.get(1) === 10),
            { what: "partition 1's later records committed", timeout: 60_000 }
          )
          const outputs = (yield* readCommitted(output)).map((r) => r.value)
          const committed = yield* groupOffsets(applicationId, input)
          console.log(`tasks started: ${instance.stats.tasksStarted}, stopped: ${JSON.stringify([...instance.stats.stopped])}`)
          assert.deepStrictEqual(
            {
              partition0Outputs: outputs.filter((v) => v?.startsWith("0:") === true),
              partition0Committed: committed.get(0),
              tasksStarted: instance.stats.tasksStarted,
              stopped: [...instance.stats.stopped.keys()]
            },
            { partition0Outputs: [], partition0Committed: 20, tasksStarted: 1, stopped: [0] },
            "partition 0 stopped once, nothing of it processed or skipped; only partition 1's task started"
          )
          assert.match(instance.stats.stopped.get(0) ?? "", /beyond the end offset 5/)
          assert.isUndefined(yield* instance.exit.pipe(Effect.map(Option.getOrUndefined)))
        } else {
          const exit = yield* eventually(instance.exit.pipe(Effect.map(Option.isSome)), {
            what: "the run to end",
            timeout: 60_000
          }).pipe(Effect.zipRight(instance.exit), Effect.map(Option.getOrThrow))
          const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
          assert.ok(
            Option.isSome(failure) && failure.value instanceof SkeinError.OffsetOutOfRange,
            `ended with ${Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "success"}`
          )
          if (Option.isSome(failure) && failure.value instanceof SkeinError.OffsetOutOfRange) {
            assert.include(failure.value.message, "beyond the end offset 5")
          }
          assert.strictEqual((yield* groupOffsets(applicationId, input)).get(0), 20, "the committed offset is left alone")
        }
      }), { timeout: 120_000 })
  }
})
