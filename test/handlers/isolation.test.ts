import { assert, describe, it } from "@effect/vitest"
import { Cause, Data, Effect, Exit, Fiber, Option, Schema } from "effect"
import { Health, SkeinError, Topic, Transformer } from "../../src/index.ts"
import {
  createTopics,
  deleteRecordsBefore,
  eventually,
  groupOffsets,
  offsets,
  produce,
  readCommitted,
  setGroupOffsets,
  sleep,
  startInstance,
  unique
} from "../helpers/kafka.ts"
import type { Produced, RunningInstance } from "../helpers/kafka.ts"

class Boom extends Data.TaggedError("Boom")<{ readonly partition: number; readonly offset: number }> {
  override get message(): string {
    return `boom at ${this.partition}@${this.offset}`
  }
}

/**
 * A stateless copier over a 3-partition topic whose transform fails with the
 * unmapped typed error `Boom` on the value "boom". `calls` counts transform
 * calls per value.
 */
const setup = Effect.gen(function*() {
  const input = unique("iso-in")
  const output = unique("iso-out")
  yield* createTopics([{ name: input, partitions: 3 }, { name: output, partitions: 1 }])
  const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
  const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
  const calls = new Map<string, number>()
  const transformer = Transformer.stateless({
    name: "iso-copy",
    inputs: [In],
    transform: (record) =>
      Effect.gen(function*() {
        calls.set(record.value, (calls.get(record.value) ?? 0) + 1)
        if (record.value === "boom") return yield* Effect.fail(new Boom({ partition: record.partition, offset: record.offset }))
        return { emit: [Topic.record(Out, record.key, record.value)] }
      })
  })
  return { input, output, transformer, calls }
})

const on = (partition: number, values: ReadonlyArray<string>): Array<Produced> =>
  values.map((value) => ({ key: value, value, partition }))

/** One send: each partition's records land in one record batch, so partition 1's failure is mid-batch. */
const firstRecords = [
  ...on(0, ["a0", "a1"]),
  ...on(1, ["b0", "b1", "boom", "b3"]),
  ...on(2, ["c0", "c1"])
]

/** Waits until the group's committed offsets reach `expected` for the listed partitions. */
const committedAtLeast = (groupId: string, topic: string, expected: ReadonlyArray<readonly [number, number]>) =>
  eventually(
    Effect.map(groupOffsets(groupId, topic), (committed) =>
      expected.every(([partition, offset]) => (committed.get(partition) ?? -1) >= offset)),
    { what: `${groupId} to commit ${JSON.stringify(expected)}` }
  )

/** Waits until `partition` is stopped; fails at once if the run ended instead. */
const stopped = <E>(instance: RunningInstance<E>, partition: number) =>
  eventually(
    Effect.gen(function*() {
      const exit = yield* instance.exit
      if (Option.isSome(exit)) {
        const cause = Exit.isFailure(exit.value) ? Cause.pretty(exit.value.cause) : "without a failure"
        return yield* Effect.fail(new Error(`the run ended: ${cause}`))
      }
      return instance.stats.stopped.has(partition)
    }),
    { what: `partition ${partition} to stop` }
  )

const failureOf = <E>(exit: Exit.Exit<never, E>): E | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

describe("failure isolation", () => {
  it.scopedLive("partition: a failed record stops only its partition; the others keep processing and committing", () =>
    Effect.gen(function*() {
      const { calls, input, output, transformer } = yield* setup
      yield* produce(input, firstRecords)
      const applicationId = unique("iso-app")
      const instance = yield* startInstance(transformer, { applicationId, failureIsolation: "partition" })
      yield* stopped(instance, 1)
      yield* committedAtLeast(applicationId, input, [[0, 2], [2, 2]])

      // Records produced after the failure: partitions 0 and 2 process them, partition 1 does not.
      yield* produce(input, [...on(0, ["a2", "a3"]), ...on(1, ["b4"]), ...on(2, ["c2", "c3"])])
      yield* committedAtLeast(applicationId, input, [[0, 4], [2, 4]])
      yield* sleep(1000)

      const committed = yield* groupOffsets(applicationId, input)
      assert.deepStrictEqual([...committed].sort(([a], [b]) => a - b), [[0, 4], [1, 2], [2, 4]], "partition 1 stops at the failed record")
      const values = (yield* readCommitted(output)).map((r) => r.value).sort()
      assert.deepStrictEqual(values, ["a0", "a1", "a2", "a3", "b0", "b1", "c0", "c1", "c2", "c3"])
      assert.strictEqual(calls.get("boom"), 1, "the failed record ran once")
      assert.strictEqual(calls.get("b3") ?? 0, 0, "nothing after the failed record ran")
      assert.strictEqual(calls.get("b4") ?? 0, 0, "the stopped partition fetches nothing new")

      const health = yield* Health.snapshot(instance.stats)
      assert.strictEqual(health.stopped.length, 1)
      assert.strictEqual(health.stopped[0]?.partition, 1)
      assert.include(health.stopped[0]?.error ?? "", "boom at 1@2")
      assert.deepStrictEqual(health.assigned, [0, 2], "a stopped partition is not assigned")
      assert.strictEqual(health.phase, "running")
      assert.isTrue(Health.isLive(health))
      assert.isTrue(Health.isReady(health))
      assert.isTrue(Option.isNone(yield* instance.exit), "the run has not ended")
    }))

  it.scopedLive("run (default): the same failure ends the run with the typed error", () =>
    Effect.gen(function*() {
      const { calls, input, transformer } = yield* setup
      yield* produce(input, firstRecords)
      const applicationId = unique("iso-app")
      const instance = yield* startInstance(transformer, { applicationId })
      const exit = yield* Fiber.await(instance.fiber).pipe(Effect.timeout("60 seconds"))
      const error = failureOf(exit)
      assert.ok(error instanceof Boom, String(error))
      assert.strictEqual(error.partition, 1)
      assert.strictEqual(error.offset, 2)
      assert.strictEqual(instance.stats.phase, "failed")
      assert.strictEqual(calls.get("b3") ?? 0, 0)
      assert.strictEqual((yield* groupOffsets(applicationId, input)).get(1), 2, "the work before the failed record commits")
    }))

  it.scopedLive("an unreadable partition stops the same way and never silently resets", () =>
    Effect.gen(function*() {
      const { calls, input, output, transformer } = yield* setup
      yield* produce(input, [...on(0, ["x0", "x1"]), ...on(1, ["y0", "y1", "y2", "y3", "y4"]), ...on(2, ["z0", "z1"])])
      // Partition 1: the group committed up to offset 1, then retention deleted the records before 3.
      const partitionApp = unique("iso-app")
      const runApp = unique("iso-app")
      yield* setGroupOffsets(partitionApp, input, [{ partition: 1, offset: 1 }])
      yield* setGroupOffsets(runApp, input, [{ partition: 1, offset: 1 }])
      yield* deleteRecordsBefore(input, [{ partition: 1, offset: 3 }])
      assert.strictEqual((yield* offsets(input)).find((o) => o.partition === 1)?.low, 3)

      const instance = yield* startInstance(transformer, { applicationId: partitionApp, failureIsolation: "partition" })
      yield* stopped(instance, 1)
      yield* committedAtLeast(partitionApp, input, [[0, 2], [2, 2]])
      yield* produce(input, [...on(0, ["x2"]), ...on(1, ["y5"])])
      yield* committedAtLeast(partitionApp, input, [[0, 3]])
      yield* sleep(1000)

      const health = yield* Health.snapshot(instance.stats)
      assert.deepStrictEqual(health.stopped.map((s) => s.partition), [1])
      assert.include(health.stopped[0]?.error ?? "", `Committed offset 1 of ${input}/1 is before the earliest available offset 3`)
      assert.deepStrictEqual(health.assigned, [0, 2])
      assert.isTrue(Health.isLive(health))
      assert.isTrue(Health.isReady(health))
      assert.isTrue(Option.isNone(yield* instance.exit), "the run has not ended")
      assert.strictEqual((yield* groupOffsets(partitionApp, input)).get(1), 1, "the group offset is never reset")
      assert.isFalse([...calls.keys()].some((value) => value.startsWith("y")), "no record of partition 1 was processed")
      const values = (yield* readCommitted(output)).map((r) => r.value).sort()
      assert.deepStrictEqual(values, ["x0", "x1", "x2", "z0", "z1"])
      yield* instance.stop

      const failing = yield* startInstance(transformer, { applicationId: runApp })
      const exit = yield* Fiber.await(failing.fiber).pipe(Effect.timeout("60 seconds"))
      const error = failureOf(exit)
      assert.ok(error instanceof SkeinError.OffsetOutOfRange, String(error))
      assert.strictEqual(error.partition, 1)
      assert.strictEqual(error.committed, 1)
      assert.strictEqual(error.earliest, 3)
      assert.strictEqual((yield* groupOffsets(runApp, input)).get(1), 1, "the group offset is never reset")
    }))

  it.scopedLive("health over HTTP: live and ready despite a stopped partition, which /metrics reports", () =>
    Effect.gen(function*() {
      const { input, transformer } = yield* setup
      yield* produce(input, firstRecords)
      const applicationId = unique("iso-app")
      // Port 0: the endpoint listens on a port the system picks (a port found free, closed and
      // passed on could be taken by another process in between).
      const instance = yield* startInstance(transformer, { applicationId, failureIsolation: "partition", healthPort: 0 })
      yield* stopped(instance, 1)
      yield* committedAtLeast(applicationId, input, [[0, 2], [2, 2]])
      // Partitions 0 and 2 have committed: their tasks run, nothing is pending.
      const port = instance.stats.healthPort
      if (port === undefined) return assert.fail("the health endpoint does not listen")
      assert.isAbove(port, 0)

      const get = (route: string) =>
        Effect.promise(async () => {
          const response = await fetch(`http://127.0.0.1:${port}${route}`)
          return { status: response.status, body: await response.text() }
        })
      const live = yield* get("/health/live")
      assert.strictEqual(live.status, 200)
      assert.strictEqual((JSON.parse(live.body) as { status: string }).status, "live")
      const ready = yield* get("/health/ready")
      assert.strictEqual(ready.status, 200, ready.body)
      const snapshot = JSON.parse(ready.body) as { stopped: Array<{ partition: number; error: string }>; assigned: Array<number> }
      assert.deepStrictEqual(snapshot.stopped.map((s) => s.partition), [1])
      assert.include(snapshot.stopped[0]?.error ?? "", "boom at 1@2")
      assert.deepStrictEqual(snapshot.assigned, [0, 2])

      const metrics = yield* get("/metrics")
      assert.strictEqual(metrics.status, 200)
      assert.match(metrics.body, /^skein_partition_stopped\{[^}]*partition="1"[^}]*\} 1$/m)
      assert.notMatch(metrics.body, /^skein_partition_stopped\{[^}]*partition="[02]"/m)
      assert.match(metrics.body, /^skein_stopped_partitions\{[^}]*\} 1$/m)
      assert.match(metrics.body, /^skein_up\{[^}]*\} 1$/m)
      assert.match(metrics.body, /^skein_ready\{[^}]*\} 1$/m)
      const processed = /^skein_records_processed_total\{[^}]*\} (\d+)$/m.exec(metrics.body)
      assert.ok(processed !== null, metrics.body)
      assert.isAbove(Number(processed[1]), 0)
      assert.include(metrics.body, `application_id="${applicationId}"`)
    }))
})
