/**
 * SIGKILL around a commit of a table whose topic is its changelog
 * (`sourceChangelog`, `SourceChangelog.ts`): the enrichment app
 * (test/apps/sourceChangelog.ts, orders left-joined with customers) runs as
 * a child process with a fault point armed at its first commit, which takes
 * the customers:
 *
 * - `SKEIN_FAULT=after-commit-before-store:1`: the commit happened, its
 *   store write (and checkpoint) did not. The restart keeps the store and
 *   reads the customers from its checkpoint up to the committed offset.
 * - `SKEIN_FAULT=commit-lost:1` (on a store kept at the committed offset):
 *   the transaction (orders, then customer updates written after them) is
 *   aborted while the task is told it committed, the store takes the
 *   updates and a checkpoint beyond the committed offset
 *   (test/chaos/FINDINGS.md #5, #6), the process dies. The restart does not
 *   keep that store: restored in full up to the committed offset, so those
 *   orders are joined with the values before the updates, as they were
 *   written (a store kept with the lost updates would join them with values
 *   from their future).
 *
 * Each round of orders is joined with exactly the customers' values it had
 * to see, once, read committed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { applicationIdOf } from "../../src/internal/runtime/runAll.ts"
import { enrichmentTransformer } from "../apps/sourceChangelogTopology.ts"
import {
  brokers,
  caughtUp,
  createTopics,
  eventually,
  groupOffsets,
  produceRaw,
  readCommitted,
  startInstance,
  unique
} from "../helpers/kafka.ts"
import { tempDir } from "../helpers/tempDir.ts"

const app = path.join(import.meta.dirname, "..", "apps", "sourceChangelog.ts")

/** Runs the app until it exits (its fault point kills it), at most 90 s: how it ended, and its output. */
const runFaulty = (env: Readonly<Record<string, string>>) =>
  Effect.async<{ readonly ending: string; readonly output: string }>((resume) => {
    const child = spawn(process.execPath, ["--import", "tsx", app], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout.on("data", (d: Buffer) => {
      output += d.toString("utf8")
    })
    child.stderr.on("data", (d: Buffer) => {
      output += d.toString("utf8")
    })
    const limit = setTimeout(() => child.kill("SIGKILL"), 90_000)
    child.on("exit", (code, signal) => {
      clearTimeout(limit)
      resume(Effect.succeed({ ending: signal ?? `exit ${code}`, output }))
    })
    return Effect.sync(() => {
      clearTimeout(limit)
      child.kill("SIGKILL")
    })
  })

describe("a source-topic changelog under SIGKILL around a commit", () => {
  it.scopedLive("a commit without its store write: the store's tail read; a lost commit: restored in full; the joins exact", () =>
    Effect.gen(function*() {
      const customers = unique("kill-customers")
      const orders = unique("kill-orders")
      const output = unique("kill-enriched")
      yield* createTopics([
        { name: customers, partitions: 1, config: { "cleanup.policy": "compact" } },
        { name: orders, partitions: 1 },
        { name: output, partitions: 1 }
      ])
      const transformer = enrichmentTransformer({ customers, orders, output })
      const groupId = applicationIdOf(unique("kill-app"), transformer)
      const stateDir = yield* tempDir("skein-source-kill-")
      const env = (fault: string) => ({
        SKEIN_APPLICATION_ID: groupId,
        // The killed app leaves the group when its session expires (the restart waits for that):
        // the broker's minimum, not the default 10 s.
        SKEIN_SESSION_TIMEOUT: "6 seconds",
        SKEIN_STATE_DIR: stateDir,
        KAFKA_BROKERS: brokers().join(","),
        CHAOS_INPUT_TOPIC: orders,
        CHAOS_OUTPUT_TOPIC: output,
        SOURCE_CHANGELOG_TABLE: customers,
        SKEIN_FAULT: fault
      })
      const committed = Effect.map(groupOffsets(groupId, customers), (offsets) => offsets.get(0) ?? 0)
      /** The joins of a round of orders once all are in, sorted; each order joined once. */
      const joinedRound = (round: string, keys: number) =>
        Effect.gen(function*() {
          const ofRound = Effect.map(readCommitted(output), (all) => all.filter((r) => r.value?.startsWith(`${round}+`) === true))
          yield* eventually(Effect.map(ofRound, (joined) => joined.length >= keys), { what: `the ${round} orders joined` })
          const joined = yield* ofRound
          assert.strictEqual(joined.length, keys, "each order joined once")
          return joined.map((r) => `${r.key}=${r.value}`).sort()
        })
      const expectedRound = (round: string, values: ReadonlyMap<string, string>) =>
        [...values].map(([key, value]) => `${key}=${round}+${value}`).sort()
      /** Runs the app in process on the state directory until `check` is done: how task 0 restored. */
      const restarted = <A>(check: Effect.Effect<A, unknown>) =>
        Effect.gen(function*() {
          const instance = yield* startInstance(transformer, { applicationId: groupId, stateDir })
          yield* eventually(Effect.sync(() => instance.stats.restores.has(0)), { what: "task 0 to start" })
          const restore = instance.stats.restores.get(0)!
          yield* check
          yield* instance.stop
          return restore
        })

      // 1. Killed after its first commit (the customers), before the store write.
      const first = new Map(Array.from({ length: 20 }, (_, i) => [`c${i}`, `v${i}`] as const))
      yield* produceRaw(customers, [...first].map(([key, value]) => ({ key, value })))
      const killed = yield* runFaulty(env("after-commit-before-store:1"))
      assert.strictEqual(killed.ending, "SIGKILL", killed.output)
      assert.include(killed.output, "skein fault after-commit-before-store: SIGKILL at commit 1 (task 0)")
      const afterKill = yield* committed
      assert.isAbove(afterKill, 0, "the first commit took customers")
      const tail = yield* restarted(Effect.gen(function*() {
        yield* caughtUp(groupId, customers)
        yield* produceRaw(orders, [...first.keys()].map((key) => ({ key, value: "first" })))
        assert.deepStrictEqual(yield* joinedRound("first", first.size), expectedRound("first", first))
      }))
      assert.deepStrictEqual(
        [tail.mode, tail.from, tail.until, tail.records],
        ["tail", 0, afterKill, afterKill],
        `the store kept at its checkpoint (0), the committed customers read: ${JSON.stringify(tail)}`
      )

      // 2. Orders, then customer updates written after them; a commit of them the brokers lost.
      yield* produceRaw(orders, [...first.keys()].map((key) => ({ key, value: "second" })))
      const updated = new Map([...first].map(([key, value]) => [key, `${value}b`] as const))
      yield* produceRaw(customers, [...updated].map(([key, value]) => ({ key, value })))
      const keptAt = yield* committed
      const lost = yield* runFaulty(env("commit-lost:1"))
      assert.strictEqual(lost.ending, "SIGKILL", lost.output)
      assert.include(lost.output, "skein fault commit-lost: transaction 1 aborted, reported committed (task 0)")
      assert.strictEqual(yield* committed, keptAt, "the lost commit moved no offset")
      const full = yield* restarted(Effect.gen(function*() {
        // The orders written before the updates see the values before them.
        assert.deepStrictEqual(yield* joinedRound("second", first.size), expectedRound("second", first))
        yield* caughtUp(groupId, customers)
        yield* produceRaw(orders, [...first.keys()].map((key) => ({ key, value: "third" })))
        assert.deepStrictEqual(yield* joinedRound("third", first.size), expectedRound("third", updated))
      }))
      assert.deepStrictEqual([full.mode, full.from, full.until, full.records], ["full", 0, keptAt, keptAt], JSON.stringify(full))
      assert.include(full.reason, `beyond the committed offset ${keptAt}`)
    }), 240_000)
})
