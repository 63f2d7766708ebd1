/**
 * Skein contender app (bench/contenders/skein.ts): the benchmark's stateful per-key count on the
 * Skein runtime. Input key -> running count; one output record per input record, value = the
 * count as a decimal string; state in Skein's changelog-backed store.
 *
 *   node --import tsx bench/apps/skein-count.ts --mode eos|alos --brokers B --input T --output T
 *        --group G --state-dir D [--commit-interval-ms N]
 *
 * The same file, unchanged, is the skein-eos-bun and skein-eos-deno contenders
 * (`node_modules/.bin/bun bench/apps/skein-count.ts ...`, `node_modules/.bin/deno run -A ...`).
 *
 * --mode eos (skein-eos): processingGuarantee "exactly-once"; --mode alos (skein-alos):
 * processingGuarantee "at-least-once".
 *
 * Speaks the contender protocol (bench/contenders/types.ts) on stdout:
 *  - started: the app's modules are loaded (before it connects).
 *  - first-read: the first call of the transform.
 *  - restore-start: the first task store directory appears under --state-dir (Skein opens a
 *    task's store right before restoring it from the changelog).
 *  - restore-end: when Runner stats' restoredRecords/tasksStarted stop changing for 2 s after
 *    the first task started; ts = the last change, records = restoredRecords, tailTasks /
 *    fullTasks = running tasks restored from their kept checkpoint / from the whole changelog.
 * --commit-interval-ms: Skein's commitInterval in alos mode (how often offsets of acknowledged
 * work are committed); ignored in eos mode, which commits one transaction per poll batch.
 * Connection security: the SKEIN_* settings of its environment (bench/lib/security.ts), given to
 * SkeinConfig, so Skein's own client boundary connects.
 *
 * Skein is loaded from its build, `dist/` (`npm run build`; the harness builds it first), as an
 * installed package runs it: not its TypeScript sources through tsx, which wraps each named
 * function it compiles in a `__name` call and compiles the sources at every start.
 * SKEIN_BENCH_BUILD=<file> loads another build's `index.js` (an experiment's A/B).
 * SKEIN_BENCH_STATS=1 (diagnosis only): the runner's commits and batches so far, every second, on
 * stderr (the run's log), e.g. how many records a transaction held.
 */
import { existsSync, readdirSync } from "node:fs"
import { join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { parseArgs } from "node:util"
import { Duration, Effect, Option, Schema } from "effect"
import type * as Skein from "../../src/index.ts"
import { runUntilSignalled } from "../lib/runApp.ts"
import { securityFromEnv, skeinSecurity } from "../lib/security.ts"

const { values } = parseArgs({
  options: {
    mode: { type: "string", default: "eos" },
    brokers: { type: "string" },
    input: { type: "string" },
    output: { type: "string" },
    group: { type: "string" },
    "state-dir": { type: "string" },
    "commit-interval-ms": { type: "string" },
  },
})
const { brokers, input, output, group } = values
const stateDir = values["state-dir"]
const usage = "usage: skein-count --mode eos|alos --brokers B --input T --output T --group G --state-dir D [--commit-interval-ms N]"
if (brokers === undefined || input === undefined || output === undefined || group === undefined || stateDir === undefined) {
  console.error(usage)
  process.exit(2)
}
const guarantees = { eos: "exactly-once", alos: "at-least-once" } as const
const mode = values.mode
if (mode !== "eos" && mode !== "alos") {
  console.error(`skein-count: unknown --mode ${mode}\n${usage}`)
  process.exit(2)
}
const build = process.env["SKEIN_BENCH_BUILD"] ?? new URL("../../dist/index.js", import.meta.url).href
const { Runner, SkeinConfig, Topic, Transformer }: typeof Skein = await import(
  build.startsWith("file:") ? build : pathToFileURL(resolve(build)).href
)
const commitIntervalMs = Number(values["commit-interval-ms"] ?? Duration.toMillis(SkeinConfig.defaults.commitInterval))
if (!Number.isFinite(commitIntervalMs) || commitIntervalMs <= 0) {
  console.error(`skein-count: --commit-interval-ms must be a positive number\n${usage}`)
  process.exit(2)
}

const emit = (event: string, extra: Record<string, number> = {}): void => {
  process.stdout.write(`${JSON.stringify({ event, ts: Date.now(), ...extra })}\n`)
}
// The modules are loaded (node, tsx and Skein's imports): what follows is the app's own start.
emit("started")

const Input = Topic.make({ name: input, key: Schema.String, value: Schema.String })
const Output = Topic.make({ name: output, key: Schema.String, value: Schema.NumberFromString })

let firstRead = false
const Count = Transformer.make({
  name: "count",
  inputs: [Input],
  state: Schema.Number,
  transform: (record, count) =>
    Effect.sync(() => {
      if (!firstRead) {
        firstRead = true
        emit("first-read")
      }
      const next = Option.getOrElse(count, () => 0) + 1
      return { emit: [Topic.record(Output, record.key, next)], state: Transformer.set(next) }
    }),
})

// Restore instrumentation (see the header).
const stats = Runner.makeStats()
let restoreStarted = false
let lastSeen = { restored: 0, tasks: 0, at: 0 }
let restoreReported = false
const storeOpened = (): boolean => {
  if (!existsSync(stateDir)) return false
  for (const d of readdirSync(stateDir)) {
    try {
      if (readdirSync(join(stateDir, d)).length > 0) return true
    } catch {
      // not a directory
    }
  }
  return false
}
const watcher = setInterval(() => {
  if (!restoreStarted && storeOpened()) {
    restoreStarted = true
    emit("restore-start")
  }
  const now = { restored: stats.restoredRecords, tasks: stats.tasksStarted, at: Date.now() }
  if (now.restored !== lastSeen.restored || now.tasks !== lastSeen.tasks) {
    lastSeen = now
    restoreReported = false
  } else if (!restoreReported && lastSeen.tasks > 0 && Date.now() - lastSeen.at >= 2000) {
    restoreReported = true
    const modes = [...stats.restores.values()].map((r) => r.mode)
    const tailTasks = modes.filter((m) => m === "tail").length
    const fullTasks = modes.filter((m) => m === "full").length
    process.stdout.write(`${JSON.stringify({ event: "restore-end", ts: lastSeen.at, records: lastSeen.restored, tailTasks, fullTasks })}\n`)
  }
}, 20)
watcher.unref()
if (process.env["SKEIN_BENCH_STATS"] !== undefined) {
  setInterval(() => process.stderr.write(`STATS commits=${stats.commits} batches=${stats.batches}\n`), 1000).unref()
}

const program = Runner.runWithStats(Count, stats).pipe(
  Effect.provide(SkeinConfig.layer({
    applicationId: group,
    brokers: brokers.split(","),
    stateDir,
    processingGuarantee: guarantees[mode],
    commitInterval: Duration.millis(commitIntervalMs),
    // An experiment's knob, unset in the benchmark: SKEIN_MAX_POLL_RECORDS, as Skein's own env config reads it.
    ...(process.env["SKEIN_MAX_POLL_RECORDS"] === undefined ? {} : { maxPollRecords: Number(process.env["SKEIN_MAX_POLL_RECORDS"]) }),
    // Likewise SKEIN_MAX_BATCH_DURATION (milliseconds here), unset in the benchmark.
    ...(process.env["SKEIN_MAX_BATCH_DURATION"] === undefined
      ? {}
      : { maxBatchDuration: Duration.millis(Number(process.env["SKEIN_MAX_BATCH_DURATION"])) }),
    ...skeinSecurity(securityFromEnv()),
  })),
)
runUntilSignalled(program)
