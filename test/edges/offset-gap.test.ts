import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Option, Schema } from "effect"
import { SkeinError, Topic, Transformer } from "../../src/index.ts"
import {
  createTopics,
  deleteRecordsBefore,
  eventually,
  groupOffsets,
  produce,
  readCommitted,
  sleep,
  startInstance,
  unique
} from "../helpers/kafka.ts"

// Issue 11, defect 1: retention overtakes a running, lagging task. kafkajs's
// OffsetOutOfRange recovery used to commit the default offset for the group and
// reset the fetch to the earliest offset: the deleted records' successors were
// skipped without a trace. The runner must stop the partition (or the run) with
// OffsetOutOfRange instead, and keep the committed offset where it was.
describe("offset gap while running", () => {
  for (const isolation of ["partition", "run"] as const) {
    it.scopedLive(`records deleted past a running task's position: OffsetOutOfRange, never a skip (${isolation})`, () =>
      Effect.gen(function*() {
        const input = unique("gap-in")
        const output = unique("gap-out")
        const applicationId = unique("gap-app")
        yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
        const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
        const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
        const entered = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const copy = Transformer.stateless({
          name: "gap-copy",
          inputs: [In],
          transform: (record) =>
            Effect.gen(function*() {
              if (record.value === "v0") {
                yield* Deferred.succeed(entered, undefined)
                yield* Deferred.await(release)
              }
              return { emit: [Topic.record(Out, record.key, record.value)] }
            })
        })
        yield* produce(input, Array.from({ length: 10 }, (_, i) => ({ key: `k${i}`, value: `v${i}`, partition: 0 })))
        // A buffer of one batch: the partition pauses at 10 records, so 10..999 are fetched only after the deletion.
        const instance = yield* startInstance(copy, { applicationId, failureIsolation: isolation, maxPollRecords: 10 })
        // The task holds the fetched batch 0..9 while retention deletes 10..499.
        yield* Deferred.await(entered)
        yield* produce(input, Array.from({ length: 990 }, (_, i) => ({ key: `k${i + 10}`, value: `v${i + 10}`, partition: 0 })))
        yield* deleteRecordsBefore(input, [{ partition: 0, offset: 500 }])
        yield* Deferred.succeed(release, undefined)

        // Wait for the partition to stop (or the run to end), or for the runner to move past the gap.
        yield* eventually(
          Effect.gen(function*() {
            const ended = Option.isSome(yield* instance.exit)
            const committed = (yield* groupOffsets(applicationId, input)).get(0) ?? -1
            return ended || instance.stats.stopped.has(0) || committed > 10 || committed < -1
          }),
          { what: "the partition to stop or the run to end", timeout: 30_000 }
        )
        yield* sleep(2_000)
        const values = (yield* readCommitted(output)).map((r) => r.value)
        const committed = yield* groupOffsets(applicationId, input)
        assert.deepStrictEqual(
          { outputs: values.length, last: values[values.length - 1], committed: committed.get(0) },
          { outputs: 10, last: "v9", committed: 10 },
          "only the records before the gap are output; the committed offset stays at the first record not processed"
        )
        if (isolation === "partition") {
          assert.match(instance.stats.stopped.get(0) ?? "", /before the earliest/)
        } else {
          const exit = Option.getOrThrow(yield* instance.exit)
          const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
          assert.ok(Option.isSome(failure) && failure.value instanceof SkeinError.OffsetOutOfRange, `ended with ${
            Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "success"
          }`)
        }
      }), { timeout: 90_000 })
  }
})
