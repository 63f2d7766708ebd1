/**
 * SIGKILL around a commit: the counting app (test/apps/aggregate.ts) runs as
 * a child process with a fault point armed, so each faulty run kills itself
 * at its commit `KILL_AT`:
 * - `SKEIN_FAULT=after-commit-before-store:<n>`: right after the transaction
 *   committed and before that commit's store write (and checkpoint) reached
 *   LevelDB. The restart restores the stores' tails from the checkpoints
 *   before the lost writes (still valid).
 * - `SKEIN_FAULT=commit-lost:<n>`: the transaction is aborted where it would
 *   commit while the task is told it committed (a broker that acknowledged a
 *   commit and lost it: test/chaos/FINDINGS.md #5, #6), the store takes the
 *   commit's writes, then the process dies. The restart must not keep that
 *   store's tail: its changelog does not hold the store's last commit, so it
 *   restores in full.
 * Either way the final state must equal a read_committed recount of the
 * input, exactly.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as StateStore from "../../src/internal/stores/StateStore.ts"
import type { Aggregate, InputValue } from "../apps/model.ts"
import { brokers, createTopics, groupOffsets, offsets, produceRaw, readCommitted, unique } from "../helpers/kafka.ts"

const app = path.join(import.meta.dirname, "..", "apps", "aggregate.ts")

const PARTITIONS = 2
const KEYS = 300
const ROUNDS = 8
/** Runs that kill themselves, each at its commit `KILL_AT` with its fault point; then one runs to the end. */
const FAULTS = ["after-commit-before-store", "commit-lost", "after-commit-before-store"] as const
const KILLS = FAULTS.length
const KILL_AT = 8

interface Run {
  /** `SIGKILL`, `exit <code>`, or `timed out`. */
  readonly ending: string
  /** Its stdout and stderr. */
  readonly output: string
}

/** Runs the app until it exits, or until `finished` answers true (then SIGTERM: a clean stop). */
const runApp = (env: Readonly<Record<string, string>>, finished: () => Promise<boolean>) =>
  Effect.async<Run>((resume) => {
    const child = spawn(process.execPath, ["--import", "tsx", app], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (d: Buffer) => {
      output += d.toString("utf8")
    })
    child.stderr.on("data", (d: Buffer) => {
      output += d.toString("utf8")
    })
    let timedOut = false
    const poll = setInterval(() => {
      void finished().then((done) => {
        if (done) child.kill("SIGTERM")
      })
    }, 1000)
    const limit = setTimeout(() => {
      timedOut = true
      child.kill("SIGKILL")
    }, 150_000)
    child.on("exit", (code, signal) => {
      clearInterval(poll)
      clearTimeout(limit)
      resume(Effect.succeed({ ending: timedOut ? "timed out" : signal ?? `exit ${code}`, output }))
    })
    return Effect.sync(() => {
      clearInterval(poll)
      clearTimeout(limit)
      child.kill("SIGKILL")
    })
  })

/** The restores a run logged (`Task.ts`), in order. */
const restoresOf = (output: string) =>
  [...output.matchAll(/task (\d+): restored (\d+) changelog records \((tail|full): (.*?)\), offsets (\d+) to (\d+)/g)]
    .map((m) => ({
      partition: Number(m[1]),
      records: Number(m[2]),
      mode: m[3] ?? "",
      reason: m[4] ?? "",
      from: Number(m[5]),
      until: Number(m[6])
    }))

/** The fault points' last words in a run's output (`src/internal/runtime/faults.ts`): the task killed and the commit. */
const faultsOf = (output: string) => [
  ...[...output.matchAll(/skein fault after-commit-before-store: SIGKILL at commit (\d+) \(task (\d+)\)/g)]
    .map((m) => ({ fault: "after-commit-before-store", commit: Number(m[1]), partition: Number(m[2]) })),
  ...[...output.matchAll(/skein fault commit-lost: transaction (\d+) aborted, reported committed \(task (\d+)\)\n[^]*?skein fault commit-lost: SIGKILL after the store write \(task \2\)/g)]
    .map((m) => ({ fault: "commit-lost", commit: Number(m[1]), partition: Number(m[2]) }))
]

/** Each key's aggregate after all of `records` (each partition's in offset order). */
const recount = (records: ReadonlyArray<{ readonly key: string | null; readonly value: string | null; readonly offset: number }>) => {
  const state = new Map<string, Aggregate>()
  for (const r of [...records].sort((a, b) => a.offset - b.offset)) {
    const key = r.key ?? ""
    const value: InputValue = JSON.parse(r.value ?? "null")
    const previous = state.get(key)
    state.set(
      key,
      previous === undefined
        ? { count: 1, sum: value.v, min: value.v, max: value.v, id: value.id, seq: value.seq }
        : {
          count: previous.count + 1,
          sum: previous.sum + value.v,
          min: Math.min(previous.min, value.v),
          max: Math.max(previous.max, value.v),
          id: value.id,
          seq: value.seq
        }
    )
  }
  return state
}

const sorted = <V>(map: ReadonlyMap<string, V>) => [...map].sort(([a], [b]) => a.localeCompare(b))

describe("SIGKILL around a commit", () => {
  it.scopedLive("a restart keeps a store's tail only when the changelog holds its last commit; the final state equals a read_committed recount, exactly", () =>
    Effect.gen(function*() {
      const input = unique("kac-in")
      const output = unique("kac-out")
      const applicationId = unique("kac-app")
      yield* createTopics([{ name: input, partitions: PARTITIONS }, { name: output, partitions: PARTITIONS }])
      // Round by round, so every key gets records before and after every kill.
      let id = 0
      const messages = Array.from({ length: ROUNDS }, (_, round) =>
        Array.from({ length: KEYS }, (_, k) => {
          id++
          return {
            key: `k-${String(k).padStart(3, "0")}`,
            value: JSON.stringify({ id, seq: round + 1, v: (id * 37) % 101 })
          }
        })).flat()
      yield* produceRaw(input, messages)

      const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-kac-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(stateDir, { recursive: true, force: true })))
      const env = {
        SKEIN_APPLICATION_ID: applicationId,
        KAFKA_BROKERS: brokers().join(","),
        CHAOS_INPUT_TOPIC: input,
        CHAOS_OUTPUT_TOPIC: output,
        SKEIN_STATE_DIR: stateDir,
        SKEIN_MAX_POLL_RECORDS: "40",
        // A killed member leaves the group after 6 s, the broker's minimum.
        SKEIN_SESSION_TIMEOUT: "6 seconds",
        SKEIN_HEARTBEAT_INTERVAL: "1 second"
      }
      const caughtUp = () =>
        Effect.runPromise(Effect.gen(function*() {
          const ends = yield* offsets(input)
          const committed = yield* groupOffsets(applicationId, input)
          return ends.every((e) => (committed.get(e.partition) ?? -1) >= e.lastStable)
        }))
      const never = () => Promise.resolve(false)

      const runs: Array<Run> = []
      for (const fault of FAULTS) runs.push(yield* runApp({ ...env, SKEIN_FAULT: `${fault}:${KILL_AT}` }, never))
      runs.push(yield* runApp(env, caughtUp))
      const context = (i: number) => `run ${i} (${runs[i]?.ending}):\n${runs[i]?.output.split("\n").slice(-40).join("\n")}`

      assert.deepStrictEqual(runs.map((r) => r.ending), [...Array(KILLS).fill("SIGKILL"), "exit 0"], context(runs.length - 1))
      for (const [i, run] of runs.entries()) {
        const faults = faultsOf(run.output)
        const restores = restoresOf(run.output)
        if (i < KILLS) {
          // Each faulty run died at its commit KILL_AT, by its own fault point.
          assert.deepStrictEqual(faults.map((f) => [f.fault, f.commit]), [[FAULTS[i], KILL_AT]], context(i))
        } else {
          assert.deepStrictEqual(faults, [], context(i))
        }
        assert.deepStrictEqual(
          [...new Set(restores.map((r) => r.partition))].sort(),
          [0, 1],
          `every partition restored in run ${i}: ${context(i)}`
        )
        if (i === 0) {
          for (const r of restores) assert.deepStrictEqual([r.mode, r.reason], ["full", "no local state (no checkpoint)"])
          continue
        }
        const killed = faultsOf(runs[i - 1]?.output ?? "")[0]
        if (killed === undefined) return assert.fail(`no fault in run ${i - 1}: ${context(i - 1)}`)
        for (const r of restores) {
          if (killed.fault === "commit-lost" && r.partition === killed.partition) {
            // The store took a commit its changelog does not hold: never kept.
            assert.strictEqual(r.mode, "full", context(i))
            assert.match(r.reason, /does not hold the store's last commit/, context(i))
          } else {
            // The checkpoint before the lost write is still valid: a tail restore, never a full one.
            assert.deepStrictEqual([r.mode, r.reason], ["tail", "local state kept"], context(i))
          }
        }
        if (killed.fault === "after-commit-before-store") {
          // The killed task reads the lost commit's changelog records (after the checkpoint) back.
          const first = restores.find((r) => r.partition === killed.partition)
          if (first === undefined) return assert.fail(`no restore of the killed task ${killed.partition}: ${context(i)}`)
          assert.isAbove(first.records, 0, JSON.stringify(first))
          assert.isAtLeast(first.until - first.from, first.records, JSON.stringify(first))
        }
      }

      const inputs = yield* readCommitted(input)
      assert.strictEqual(inputs.length, KEYS * ROUNDS)
      const expected = sorted(recount(inputs))

      // Every output once, each from the exact state before it: a key's count is its record's seq.
      const outputs = yield* readCommitted(output)
      assert.strictEqual(outputs.length, KEYS * ROUNDS)
      const wrong = outputs
        .map((r) => JSON.parse(r.value ?? "null") as Aggregate)
        .filter((a) => a.count !== a.seq)
      assert.deepStrictEqual(wrong.slice(0, 5), [], `${wrong.length} outputs with a wrong count`)
      const latest = new Map<string, Aggregate>()
      for (const r of [...outputs].sort((a, b) => a.offset - b.offset)) latest.set(r.key ?? "", JSON.parse(r.value ?? "null"))
      assert.deepStrictEqual(sorted(latest), expected, "the last output of each key is its recount")

      // The stores as the last run left them hold exactly the recount.
      const stored = new Map<string, Aggregate>()
      for (let p = 0; p < PARTITIONS; p++) {
        yield* Effect.scoped(Effect.gen(function*() {
          const store = yield* StateStore.open(path.join(stateDir, applicationId, "aggregate", String(p)))
          const keys = yield* store.keys("")
          const values = yield* store.getMany(keys)
          keys.forEach((key, i) => stored.set(key, JSON.parse(values[i] ?? "null")))
        }))
      }
      assert.deepStrictEqual(sorted(stored), expected, "the stores hold the recount")
    }), { timeout: 600_000 })
})
