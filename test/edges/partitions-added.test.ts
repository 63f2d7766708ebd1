import { assert, describe, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Option } from "effect"
import { SkeinError } from "../../src/index.ts"
import { countOf } from "../helpers/counter.ts"
import { caughtUp, createTopics, eventually, kafka, produce, startInstance, unique } from "../helpers/kafka.ts"
import { tempDir } from "../helpers/tempDir.ts"

// Issue 29, defect 7: an input topic that gains partitions while the application runs. A missing
// partition read as empty (the admin's offset range was {0, 0}), so the task of a new input
// partition "restored" a changelog partition that does not exist, then failed its deliveries
// maxDeliveryFailures times (DeliveryFailed). The runner now detects the new partition count at
// the task's start and fails with the typed mismatch error, whose message has the fix.
describe("input partitions added while running", () => {
  it.scopedLive("the task of a new input partition fails with ChangelogPartitionMismatch, naming the fix", () =>
    Effect.gen(function*() {
      const input = unique("grown-in")
      const output = unique("grown-out")
      const applicationId = unique("grown-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 1 }])
      const counter = countOf(input, output, "grown-count")
      const stateDir = (name: string) => tempDir(`skein-grown-${name}-`)
      const options = { applicationId, deliveryBackoff: Duration.millis(10) }
      yield* produce(input, [0, 1].map((partition) => ({ key: `k${partition}`, value: "v", partition })))
      const first = yield* startInstance(counter, { ...options, stateDir: yield* stateDir("a") })
      // A second member, so that its leaving makes the first rebalance (and look the topics up again).
      const second = yield* startInstance(counter, { ...options, stateDir: yield* stateDir("b") })
      yield* caughtUp(applicationId, input)
      yield* eventually(Effect.sync(() => first.stats.assigned.size + second.stats.assigned.size === 2), {
        what: "both partitions' tasks running"
      })

      yield* Effect.promise(async () => {
        const admin = kafka().admin()
        await admin.connect()
        try {
          await admin.createPartitions({ topicPartitions: [{ topic: input, count: 3 }] })
        } finally {
          await admin.disconnect()
        }
      })
      yield* produce(input, [{ key: "k2", value: "v", partition: 2 }])
      yield* second.stop
      yield* eventually(Effect.map(first.exit, Option.isSome), { what: "the first instance's run to end", timeout: 90_000 })
      const exit = Option.getOrThrow(yield* first.exit)
      const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
      console.log(`aborts: ${first.stats.aborts}, ended with ${Exit.isFailure(exit) ? Cause.pretty(exit.cause).split("\n")[0] : "success"}`)
      assert.ok(
        Option.isSome(failure) && failure.value instanceof SkeinError.ChangelogPartitionMismatch,
        `ended with ${Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "success"}`
      )
      if (Option.isSome(failure) && failure.value instanceof SkeinError.ChangelogPartitionMismatch) {
        assert.deepStrictEqual({ expected: failure.value.expected, actual: failure.value.actual }, { expected: 3, actual: 2 })
        assert.include(failure.value.message, "use a new applicationId or migrate the state")
      }
      assert.strictEqual(first.stats.aborts, 0, "no delivery was tried into a changelog partition that does not exist")
    }), { timeout: 180_000 })
})
