import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Option, Schema } from "effect"
import type { Scope } from "effect"
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import * as path from "node:path"
import { Topic, Transformer } from "../../src/index.ts"
import type { SkeinConfig } from "../../src/index.ts"
import {
  brokers,
  caughtUp,
  createTopics,
  eventually,
  groupOffsets,
  offsets,
  produce,
  readCommitted,
  startInstance,
  unique
} from "../helpers/kafka.ts"

const app = path.join(import.meta.dirname, "apps", "mode-copy.ts")

/** SIGKILLs a child process and waits until it is gone. */
const kill = (child: ChildProcess) =>
  Effect.async<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
    child.kill("SIGKILL")
  })

/** Runs the copier as its own process; the scope SIGKILLs it if the test has not. */
const startApp = (env: Record<string, string>): Effect.Effect<{ readonly kill: Effect.Effect<void> }, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => spawn(process.execPath, ["--import", "tsx", app], { env: { ...process.env, ...env }, stdio: "ignore" })),
      kill
    ),
    (child) => ({ kill: kill(child) })
  )

const partitions = 2

/** One sentinel per input partition, produced after everything else: its output means the partition is caught up. */
const sentinels = (tag: string) =>
  Array.from({ length: partitions }, (_, partition) => ({ key: `sentinel-${partition}`, value: `${tag}-${partition}`, partition }))

/** Waits until the outputs of all `sentinels(tag)` are readable (read_committed). */
const awaitSentinels = (output: string, tag: string) =>
  eventually(
    Effect.map(readCommitted(output), (records) => {
      const values = new Set(records.map((r) => r.value))
      return sentinels(tag).every((s) => values.has(s.value))
    }),
    { timeout: 60_000, what: `the outputs of the ${tag} sentinels` }
  )

const isSentinel = (value: string | null) => value !== null && value.startsWith("sentinel")

const committedTotal = (groupId: string, topic: string) =>
  Effect.map(groupOffsets(groupId, topic), (committed) => [...committed.values()].reduce((n, o) => n + Math.max(0, o), 0))

/**
 * Copies N records with a child process, SIGKILLs it once all N outputs are
 * visible, starts it again and lets it catch up. Returns the input offsets
 * committed at the kill and the output values (without the sentinels).
 */
const crashAndRestart = (guarantee: SkeinConfig.ProcessingGuarantee, total: number) =>
  Effect.scoped(Effect.gen(function*() {
    const tag = guarantee === "exactly-once" ? "eos" : "alos"
    const input = unique(`modes-${tag}-in`)
    const output = unique(`modes-${tag}-out`)
    const applicationId = unique(`modes-${tag}-app`)
    yield* createTopics([{ name: input, partitions }, { name: output, partitions }])
    const env = {
      INPUT: input,
      OUTPUT: output,
      APPLICATION_ID: applicationId,
      BROKERS: brokers().join(","),
      PROCESSING_GUARANTEE: guarantee,
      // At-least-once commits no offsets during this test: everything acknowledged is redelivered.
      COMMIT_INTERVAL_MS: String(Duration.toMillis(Duration.seconds(60)))
    }
    yield* produce(input, Array.from({ length: total }, (_, i) => ({ key: `k${i % 20}`, value: `v${i}` })))

    const first = yield* startApp(env)
    yield* eventually(Effect.map(readCommitted(output), (records) => records.length >= total), {
      timeout: 60_000,
      what: `${total} outputs of the first ${guarantee} process`
    })
    const beforeKill = (yield* readCommitted(output)).map((r) => r.value)
    yield* first.kill
    const committedAtKill = yield* committedTotal(applicationId, input)

    const second = yield* startApp(env)
    yield* produce(input, sentinels("sentinel"))
    yield* awaitSentinels(output, "sentinel")
    yield* second.kill
    const values = (yield* readCommitted(output)).map((r) => r.value).filter((v) => !isSentinel(v))
    return { beforeKill, committedAtKill, values }
  }))

describe("delivery modes", () => {
  it.live("at-least-once mode re-produces on redelivery after a crash and exactly-once does not", () =>
    Effect.gen(function*() {
      const total = 200
      const [alos, eos] = yield* Effect.all(
        [crashAndRestart("at-least-once", total), crashAndRestart("exactly-once", total)],
        { concurrency: 2 }
      )
      const expected = new Set(Array.from({ length: total }, (_, i) => `v${i}`))

      // Before the crash both modes produced each record once.
      for (const run of [alos, eos]) {
        assert.strictEqual(run.beforeKill.length, total)
        assert.deepStrictEqual(new Set(run.beforeKill), expected)
      }

      // At-least-once: no offset commit within the interval, so the restart re-produced
      // every record after the committed offsets.
      assert.isBelow(alos.committedAtKill, total, "at-least-once had not committed every offset at the kill")
      assert.deepStrictEqual(new Set(alos.values), expected, "nothing lost")
      assert.strictEqual(alos.values.length, total + (total - alos.committedAtKill), "records since the last offset commit re-produced once")
      assert.isAbove(alos.values.length, total, "at-least-once duplicates after a crash")
      for (const value of expected) {
        const copies = alos.values.filter((v) => v === value).length
        assert.isAtLeast(copies, 1)
        assert.isAtMost(copies, 2)
      }

      // Exactly-once: offsets were committed with the outputs; the restart produced nothing again.
      assert.strictEqual(eos.committedAtKill, total, "exactly-once committed the offsets with the outputs")
      assert.strictEqual(eos.values.length, total, "exactly-once: no duplicates after a crash")
      assert.deepStrictEqual(new Set(eos.values), expected)
    }), 120_000)

  const In = (name: string) => Topic.make({ name, key: Schema.String, value: Schema.String })
  const copyTo = (input: string, output: string) => {
    const Out = In(output)
    return Transformer.stateless({
      name: "copy",
      inputs: [In(input)],
      transform: (record) => Effect.succeed({ emit: [Topic.record(Out, record.key, record.value)] })
    })
  }

  it.scopedLive("at-least-once commits acknowledged offsets every commitInterval while running, also once input goes idle", () =>
    Effect.gen(function*() {
      const input = unique("alos-int-in")
      const output = unique("alos-int-out")
      const applicationId = unique("alos-int-app")
      yield* createTopics([{ name: input, partitions }, { name: output, partitions }])
      const burst = 50
      const instance = yield* startInstance(copyTo(input, output), {
        applicationId,
        processingGuarantee: "at-least-once",
        commitInterval: Duration.seconds(1)
      })
      // Two bursts, the second right after the first is acknowledged: its polls come before the
      // interval has passed, and no record follows them. The commit must not wait for more input.
      yield* produce(input, Array.from({ length: burst }, (_, i) => ({ key: `k${i % 10}`, value: `v${i}` })))
      yield* eventually(Effect.map(readCommitted(output), (records) => records.length >= burst), { what: "the first burst" })
      yield* produce(input, Array.from({ length: burst }, (_, i) => ({ key: `k${i % 10}`, value: `v${burst + i}` })))
      yield* caughtUp(applicationId, input, 30_000)
      assert.ok(Option.isNone(yield* instance.exit), "the offsets were committed by the running instance")
      assert.strictEqual(yield* committedTotal(applicationId, input), 2 * burst)
      assert.isAbove(instance.stats.commits, 0)
      yield* instance.stop
      const values = (yield* readCommitted(output)).map((r) => r.value)
      assert.strictEqual(values.length, 2 * burst)
      assert.strictEqual(new Set(values).size, 2 * burst)
    }), 90_000)

  it.scopedLive("at-least-once: a graceful interruption commits acknowledged offsets, so a restart re-produces nothing", () =>
    Effect.gen(function*() {
      const input = unique("alos-stop-in")
      const output = unique("alos-stop-out")
      const applicationId = unique("alos-stop-app")
      yield* createTopics([{ name: input, partitions }, { name: output, partitions }])
      const total = 100
      yield* produce(input, Array.from({ length: total }, (_, i) => ({ key: `k${i % 10}`, value: `v${i}` })))
      // No interval commit during the test: only the interruption can commit the offsets.
      const options = { applicationId, processingGuarantee: "at-least-once", commitInterval: Duration.seconds(60) } as const
      const first = yield* startInstance(copyTo(input, output), options)
      yield* eventually(Effect.map(readCommitted(output), (records) => records.length >= total), {
        what: `${total} acknowledged outputs`
      })
      assert.strictEqual(yield* committedTotal(applicationId, input), 0, "no offset committed before the interruption")
      yield* Fiber.interrupt(first.fiber)
      const ends = yield* offsets(input)
      const committed = yield* groupOffsets(applicationId, input)
      for (const end of ends) {
        assert.strictEqual(committed.get(end.partition), end.lastStable, `partition ${end.partition} committed on interruption`)
      }

      const second = yield* startInstance(copyTo(input, output), options)
      yield* produce(input, sentinels("sentinel"))
      yield* awaitSentinels(output, "sentinel")
      yield* second.stop
      const values = (yield* readCommitted(output)).map((r) => r.value).filter((v) => !isSentinel(v))
      assert.strictEqual(values.length, total, "the restart re-produced nothing")
      assert.strictEqual(new Set(values).size, total)
    }), 90_000)
})
