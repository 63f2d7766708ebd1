import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Option, Schema } from "effect"
import { Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, groupOffsets, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

/** What the transform saw: every call (by instance) and the slow record's runs. */
interface Probe {
  readonly calls: Array<{ readonly instance: string; readonly value: string }>
  slowRuns: number
  interrupted: boolean
  /** True while a slow run is sleeping. */
  running: boolean
  readonly slowStarted: Deferred.Deferred<void>
}

const makeProbe = Effect.map(Deferred.make<void>(), (slowStarted): Probe => ({
  calls: [],
  slowRuns: 0,
  interrupted: false,
  running: false,
  slowStarted
}))

/**
 * A copier whose record "slow" sleeps `slowFor` on its first run only (a
 * second run, after the first was interrupted, is immediate).
 */
const slowCopier = (input: string, output: string, probe: Probe, instance: string, slowFor: Duration.DurationInput) => {
  const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
  const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
  return Transformer.stateless({
    name: "copy",
    inputs: [In],
    transform: (record) =>
      Effect.gen(function*() {
        probe.calls.push({ instance, value: record.value })
        if (record.value === "slow" && probe.slowRuns++ === 0) {
          probe.running = true
          yield* Deferred.succeed(probe.slowStarted, undefined)
          yield* Effect.sleep(slowFor).pipe(
            Effect.onInterrupt(() => Effect.sync(() => {
              probe.interrupted = true
            })),
            Effect.ensuring(Effect.sync(() => {
              probe.running = false
            }))
          )
        }
        return { emit: [Topic.record(Out, record.key, record.value)] }
      })
  })
}

const values = (topic: string) => Effect.map(readCommitted(topic), (records) => records.map((r) => r.value ?? ""))

const count = (list: ReadonlyArray<string>, value: string) => list.filter((v) => v === value).length

describe("grace periods", () => {
  it.scopedLive("revocation: the handler is interrupted after revocationGrace, the work before it commits, the new owner re-runs it", () =>
    Effect.gen(function*() {
      const input = unique("revoke-in")
      const output = unique("revoke-out")
      const applicationId = unique("revoke-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const probe = yield* makeProbe
      const options = {
        applicationId,
        revocationGrace: Duration.seconds(2),
        rebalanceTimeout: Duration.seconds(20),
        sessionTimeout: Duration.seconds(6),
        heartbeatInterval: Duration.millis(500)
      }
      const a = yield* startInstance(slowCopier(input, output, probe, "A", "60 seconds"), options)
      yield* produce(input, [0, 1].map((partition) => ({ key: "w", value: `warm-up-${partition}`, partition })))
      yield* caughtUp(applicationId, input)

      const before = ["before-0", "before-1", "before-2", "before-3", "before-4"]
      const after = ["after-0", "after-1", "after-2"]
      const other = ["other-0", "other-1", "other-2"]
      // One produce: partition 0's records arrive in one fetch, so "before-*" share the slow record's batch.
      yield* produce(input, [
        ...[...before, "slow", ...after].map((value, i) => ({ key: `k${i}`, value, partition: 0 })),
        ...other.map((value, i) => ({ key: `o${i}`, value, partition: 1 }))
      ])
      yield* Deferred.await(probe.slowStarted)
      const atSlow = yield* values(output)
      assert.ok(before.every((v) => !atSlow.includes(v)), "the records before the slow one wait for its batch's transaction")

      // A second member: the group rebalances and A must give its partitions up.
      const b = yield* startInstance(slowCopier(input, output, probe, "B", "60 seconds"), options)
      yield* caughtUp(applicationId, input, 60_000)

      assert.isTrue(probe.interrupted, "A's handler was interrupted once the revocation grace ran out")
      assert.strictEqual(probe.slowRuns, 2, "the slow record ran again on the partition's new owner")
      for (const value of before) {
        assert.deepStrictEqual(
          probe.calls.filter((c) => c.value === value).map((c) => c.instance),
          ["A"],
          `${value} ran once, on A: A committed it before giving the partition up`
        )
      }
      const outputs = yield* values(output)
      for (const value of ["warm-up-0", "warm-up-1", ...before, "slow", ...after, ...other]) {
        assert.strictEqual(count(outputs, value), 1, `${value} is committed exactly once`)
      }
      assert.strictEqual(outputs.length, 2 + before.length + 1 + after.length + other.length)
      assert.ok(Option.isNone(yield* a.exit), "A is still running")
      assert.ok(Option.isNone(yield* b.exit), "B is still running")
      assert.isAbove(a.stats.rebalances, 0)
      assert.strictEqual(a.stats.teardownsWithTransactionInFlight, 0)
    }), 90_000)

  it.scopedLive("shutdown: a handler still running after shutdownGrace is interrupted; the work before it commits, it does not", () =>
    Effect.gen(function*() {
      const input = unique("grace-in")
      const output = unique("grace-out")
      const applicationId = unique("grace-app")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const probe = yield* makeProbe
      const instance = yield* startInstance(slowCopier(input, output, probe, "A", "60 seconds"), {
        applicationId,
        shutdownGrace: Duration.seconds(1)
      })
      yield* produce(input, [{ key: "w", value: "warm-up" }])
      yield* caughtUp(applicationId, input)
      const fast = ["fast-1", "fast-2", "fast-3"]
      yield* produce(input, [...fast, "slow", "fast-4"].map((value) => ({ key: "k", value })))
      yield* Deferred.await(probe.slowStarted)
      assert.ok(fast.every((v) => probe.calls.some((c) => c.value === v)), "the fast records ran before the slow one")

      const exit = yield* Fiber.interrupt(instance.fiber)
      assert.ok(Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause), "the run ended by the interruption, without an error")
      assert.isTrue(probe.interrupted, "the slow handler was interrupted once the grace ran out")

      const outputs = yield* values(output)
      assert.deepStrictEqual(outputs, ["warm-up", ...fast], "the fast records committed once, the slow one not")
      const slowOffset = (yield* readCommitted(input)).find((r) => r.value === "slow")?.offset
      assert.strictEqual(slowOffset, 4)
      const committed = yield* groupOffsets(applicationId, input)
      assert.strictEqual(committed.get(0), slowOffset, "the group's offset is the slow record's: a restart runs it again")
      assert.strictEqual(count(probe.calls.map((c) => c.value), "fast-4"), 0, "nothing after the slow record ran")
    }), 90_000)

  it.scopedLive("shutdown: a handler that finishes within shutdownGrace completes and its output commits", () =>
    Effect.gen(function*() {
      const input = unique("grace-ok-in")
      const output = unique("grace-ok-out")
      const applicationId = unique("grace-ok-app")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const probe = yield* makeProbe
      const instance = yield* startInstance(slowCopier(input, output, probe, "A", "1500 millis"), {
        applicationId,
        shutdownGrace: Duration.seconds(10),
        // One transaction for the whole batch, the slow record's 1.5 s included (with the default
        // maxBatchDuration of 1 s, fast-3 would wait for the next transaction, which a stop never starts).
        maxBatchDuration: Duration.minutes(1)
      })
      yield* produce(input, [{ key: "w", value: "warm-up" }])
      yield* caughtUp(applicationId, input)
      yield* produce(input, ["fast-1", "fast-2", "slow", "fast-3"].map((value) => ({ key: "k", value })))
      yield* Deferred.await(probe.slowStarted)
      const runningAtInterrupt = probe.running
      const exit = yield* Fiber.interrupt(instance.fiber)
      assert.ok(Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause), "the run ended by the interruption, without an error")
      assert.isTrue(runningAtInterrupt, "the interruption came while the slow handler ran")
      assert.isFalse(probe.interrupted, "the slow handler was not interrupted")
      assert.strictEqual(probe.slowRuns, 1)
      const outputs = yield* values(output)
      assert.deepStrictEqual(outputs, ["warm-up", "fast-1", "fast-2", "slow", "fast-3"], "the whole batch committed once")
      const committed = yield* groupOffsets(applicationId, input)
      assert.strictEqual(committed.get(0), 5, "the group's offset is the end of the input")
    }), 60_000)
})
