/**
 * Benchmark harness (issue #7). See bench/README.md.
 *
 *   npm run bench -- [--records N] [--partitions N] [--only a,b] [--runs N]
 *                    [--keys N] [--value-bytes N] [--rate N] [--latency-seconds N]
 *                    [--warmup-seconds N] [--commit-interval-ms N] [--no-throughput] [--no-latency]
 *                    [--no-restore] [--no-restart] [--restart-keys N] [--restart-batch N]
 *                    [--job count|windowed|enrichment|postgres] [--group-keys N] [--records-per-minute N] [--grace-seconds N]
 *                    [--table-keys N]
 *                    [--out bench/results/NAME.md]
 *
 * A secured cluster: KAFKA_BROKERS plus Skein's SKEIN_SECURITY_PROTOCOL, SKEIN_SASL_*, SKEIN_SSL_*
 * (bench/lib/security.ts); every contender connects with them.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { cpus, homedir, loadavg, totalmem } from "node:os"
import { basename, dirname, join, relative } from "node:path"
import { parseArgs } from "node:util"
import type { Admin, Kafka } from "kafkajs"
import { kafkajsEosFloor, kafkajsLoop } from "./contenders/kafkajs.ts"
import { kafkaPerfConsume, kafkaPerfProduce } from "./contenders/kafkatools.ts"
import { kafkajsPgLoop, skeinPostgres } from "./contenders/postgres.ts"
import { kafkaStreams } from "./contenders/kstreams.ts"
import { quixStreams } from "./contenders/quix.ts"
import { skeinAlos, skeinEos, skeinEosBun, skeinEosDeno } from "./contenders/skein.ts"
import type { CeilingContender, Contender, ProcessContender, SetupContext } from "./contenders/types.ts"
import { acquireBroker } from "./lib/broker.ts"
import {
  createTopics,
  deleteTopics,
  expectedCounts,
  groupCaughtUp,
  keySequence,
  makeKafka,
  measureLatency,
  preload,
  topicEnds,
  verifyOutput,
  WatermarkTimeline,
  type Workload,
} from "./lib/kafka.ts"
import { AppProcess, type Command } from "./lib/proc.ts"
import {
  describeSecurity,
  removeClientConfigFiles,
  securityFromEnv,
  writeClientConfigFiles,
  type ClientConfigFiles,
} from "./lib/security.ts"
import { renderMarkdown, renderRestart, renderText, type ContenderReport, type ReportMeta, type RunResult } from "./lib/report.ts"
import { runRestartPhase } from "./lib/restart.ts"
import { selectContenders } from "./lib/select.ts"
import { windowedBase, windowedInput, type WindowedInput, type WindowedWorkload } from "./lib/windowed.ts"
import { runWindowed, type WindowedRunCtx } from "./lib/windowedRun.ts"
import { tableRecordCount, type EnrichmentWorkload } from "./lib/enrichment.ts"
import { runEnrichment, type EnrichmentRunCtx } from "./lib/enrichmentRun.ts"
import { acquirePostgres, type PostgresHandle } from "./lib/postgres.ts"
import { runPostgres, type PostgresRunCtx } from "./lib/postgresRun.ts"
import { exec } from "./lib/setup.ts"
import { fmtInt, sleep } from "./lib/stats.ts"

const ALL: ReadonlyArray<Contender> = [skeinEos, skeinEosBun, skeinEosDeno, skeinAlos, kafkajsLoop, kafkajsEosFloor, kafkaStreams, quixStreams, kafkaPerfProduce, kafkaPerfConsume, skeinPostgres, kafkajsPgLoop]

/**
 * The contenders a job may take: the Postgres job's (an app for it, and skein-eos running its
 * count job for reference), or every other for the other jobs.
 */
const ofJob = (job: string): ReadonlyArray<Contender> =>
  ALL.filter((c) => {
    const postgresApp = c.kind === "process" && c.postgres !== undefined
    return job === "postgres" ? postgresApp || c.name === "skein-eos" : !postgresApp
  })

const { values: opt } = parseArgs({
  options: {
    records: { type: "string", default: "1000000" },
    partitions: { type: "string", default: "6" },
    keys: { type: "string", default: "20000" },
    "value-bytes": { type: "string", default: "100" },
    only: { type: "string" },
    runs: { type: "string", default: "3" },
    rate: { type: "string", default: "1000" },
    "latency-seconds": { type: "string", default: "20" },
    "warmup-seconds": { type: "string", default: "5" },
    "commit-interval-ms": { type: "string", default: "100" },
    "timeout-seconds": { type: "string", default: "1800" },
    "idle-wait-seconds": { type: "string", default: "180" },
    "no-throughput": { type: "boolean", default: false },
    "no-latency": { type: "boolean", default: false },
    "no-restore": { type: "boolean", default: false },
    "no-restart": { type: "boolean", default: false },
    "restart-keys": { type: "string", default: "1000000" },
    "restart-batch": { type: "string", default: "1000" },
    job: { type: "string", default: "count" },
    "group-keys": { type: "string", default: "1000" },
    "records-per-minute": { type: "string", default: "50000" },
    "grace-seconds": { type: "string", default: "300" },
    "table-keys": { type: "string", default: "100000" },
    out: { type: "string" },
    "from-json": { type: "string" },
    help: { type: "boolean", default: false },
  },
})

const int = (name: keyof typeof opt): number => {
  const v = Number(opt[name])
  if (!Number.isFinite(v) || v < 0) throw new Error(`--${name} must be a non-negative number`)
  return Math.floor(v)
}

/** 1-min load average above which a run is flagged as disturbed (the harness itself and the
 *  broker account for ~2 on this 2-core machine). */
const LOAD_WARN = cpus().length + 1.5
const LOAD_BUSY_DURING_RUN = cpus().length * 3

/** On a shared machine: before a run, wait up to `maxMs` for the load average to drop. */
const waitForQuiet = async (maxMs: number): Promise<void> => {
  const busy = (): boolean => (loadavg()[0] ?? 0) > LOAD_WARN
  if (maxMs <= 0 || !busy()) return
  log(`   machine busy (1-min load ${(loadavg()[0] ?? 0).toFixed(1)} on ${cpus().length} cores): waiting up to ${maxMs / 1000} s for it to calm down`)
  const until = Date.now() + maxMs
  while (busy() && Date.now() < until) await sleep(5000)
  log(`   1-min load now ${(loadavg()[0] ?? 0).toFixed(1)}`)
}

const log = (m: string): void => console.log(`[bench ${new Date().toISOString().slice(11, 19)}] ${m}`)

const root = process.cwd()
const cache = process.env["SKEIN_BENCH_CACHE"] ?? join(homedir(), ".cache", "skein", "bench")

const main = async (): Promise<void> => {
  if (opt["from-json"] !== undefined) return rerender(opt["from-json"])
  if (opt.help) {
    console.log("npm run bench -- [--records N] [--partitions N] [--only a,b] [--runs N] ... (see bench/README.md)")
    console.log(`contenders: ${ALL.map((c) => c.name).join(", ")}`)
    return
  }
  const w: Workload = {
    records: int("records"),
    partitions: Math.max(1, int("partitions")),
    keys: Math.max(1, int("keys")),
    valueBytes: int("value-bytes"),
    seed: 42,
  }
  const security = securityFromEnv()
  if (security.protocol !== "PLAINTEXT" && (process.env["KAFKA_BROKERS"] ?? "").trim() === "") {
    throw new Error(`SKEIN_SECURITY_PROTOCOL is ${security.protocol}: set KAFKA_BROKERS to the secured cluster (the private broker is PLAINTEXT)`)
  }
  const job: "count" | "windowed" | "enrichment" | "postgres" = opt.job === "windowed" ? "windowed" : opt.job === "enrichment" ? "enrichment" : opt.job === "postgres" ? "postgres" : "count"
  if (opt.job !== job) throw new Error(`--job must be count, windowed, enrichment or postgres, not ${opt.job}`)
  const windowed: WindowedWorkload | undefined = job === "windowed"
    ? (() => {
        const shape = {
          ...w,
          groupKeys: Math.max(1, int("group-keys")),
          recordsPerMinute: Math.max(1, int("records-per-minute")),
          graceMs: int("grace-seconds") * 1000,
          jitterMs: 5000,
        }
        return { ...shape, base: windowedBase(shape) }
      })()
    : undefined
  const enrichment: EnrichmentWorkload | undefined = job === "enrichment" ? { ...w, tableKeys: Math.max(1, int("table-keys")) } : undefined
  const runs = Math.max(1, int("runs"))
  const rate = Math.max(1, int("rate"))
  const latencySeconds = int("latency-seconds")
  const warmupSeconds = int("warmup-seconds")
  const commitIntervalMs = Math.max(1, int("commit-interval-ms"))
  const timeoutMs = int("timeout-seconds") * 1000
  const idleWaitMs = int("idle-wait-seconds") * 1000
  // The windowed job has the throughput phase only (with its own output check).
  const doThroughput = !opt["no-throughput"]
  const doLatency = job === "count" && !opt["no-latency"] && latencySeconds > 0
  // The restore phase restarts the throughput run's killed contender.
  const doRestore = job === "count" && doThroughput && !opt["no-restore"]
  const restartKeys = Math.max(1, int("restart-keys"))
  const restartBatch = Math.max(1, int("restart-batch"))
  const doRestart = job === "count" && !opt["no-restart"]
  if (windowed !== undefined && !doThroughput) throw new Error("--job windowed measures throughput only: drop --no-throughput")
  if (enrichment !== undefined && !doThroughput) throw new Error("--job enrichment measures throughput only: drop --no-throughput")
  const phases = (["throughput", "restore", "latency", "restart"] as const).filter(
    (p) => ({ throughput: doThroughput, restore: doRestore, latency: doLatency, restart: doRestart })[p],
  )

  const only = opt.only?.split(",").map((s) => s.trim()).filter((s) => s !== "")
  // --only matches full names, else prefixes (e.g. "skein-eos" = the Node row, "skein" = every Skein row, "kafka-perf").
  const selected = selectContenders(ofJob(job), only)
  if (selected.length === 0) throw new Error(`--only matched nothing; contenders of --job ${job}: ${ofJob(job).map((c) => c.name).join(", ")}`)

  const date = new Date().toISOString().slice(0, 10)
  const runId = `${Date.now().toString(36)}`
  const workDir = join(cache, "runs", runId)
  mkdirSync(workDir, { recursive: true })
  const defaultName = w.records === 1_000_000 && only === undefined && job === "count"
    ? date
    : `${date}${job === "count" ? "" : `-${job}`}-${w.records >= 1000 ? `${w.records / 1000}k` : w.records}`
  const outMd = opt.out ?? join("bench", "results", `${defaultName}.md`)
  if (security.protocol !== "PLAINTEXT") log(`security: ${describeSecurity(security)} (SKEIN_* settings)`)
  log(
    `run ${runId}: ${fmtInt(w.records)} records, ${w.partitions} partitions, ${fmtInt(w.keys)} keys, ${runs} run(s); ` +
      `phases ${phases.join(", ")}${doRestart ? ` (restart: ${fmtInt(restartKeys)} keys, ${fmtInt(restartBatch)} new records)` : ""}; logs in ${workDir}`,
  )
  if (enrichment !== undefined) {
    log(
      `enrichment job: a table of ${fmtInt(enrichment.tableKeys)} keys (${fmtInt(tableRecordCount(enrichment.tableKeys))} records), ` +
        `${fmtInt(enrichment.records)} stream records left-joined to it`,
    )
  }
  if (windowed !== undefined) {
    log(
      `windowed job: ${fmtInt(windowed.groupKeys)} second keys, ${fmtInt(windowed.recordsPerMinute)} records per minute of event time, ` +
        `grace ${windowed.graceMs / 1000} s, jitter ${windowed.jitterMs / 1000} s, base ${new Date(windowed.base).toISOString()}`,
    )
  }

  // Setup (idempotent, cached).
  const ctx: SetupContext = { root, cache, log }
  const available = new Map<string, string | undefined>()
  for (const c of selected) {
    if (windowed !== undefined && (c.kind !== "process" || c.windowed === undefined)) {
      available.set(c.name, "no windowed-job app")
      log(`${c.name}: not in the windowed job (no app for it)`)
      continue
    }
    if (enrichment !== undefined && (c.kind !== "process" || c.enrichment === undefined)) {
      available.set(c.name, "no enrichment-job app")
      log(`${c.name}: not in the enrichment job (no app for it)`)
      continue
    }
    const a = await c.setup(ctx).catch((e: unknown) => ({ ok: false as const, reason: String(e) }))
    available.set(c.name, a.ok ? undefined : a.reason)
    log(`${c.name}: ${a.ok ? "ready" : `unavailable: ${a.reason}`}`)
  }

  const broker = await acquireBroker(log)
  // The Postgres job's database: DATABASE_URL, else an embedded server (skein/testing's PostgresServer).
  const postgres: PostgresHandle | undefined = job === "postgres" ? await acquirePostgres(log) : undefined
  // The JVM and Python peers' connection settings (0600, removed at the end: they hold the password).
  let clientConfig: ClientConfigFiles | undefined
  const onSignal = (sig: string): void => {
    log(`${sig}: stopping the broker and exiting`)
    if (clientConfig !== undefined) removeClientConfigFiles(clientConfig)
    void Promise.allSettled([broker.release(), postgres?.release()]).finally(() => process.exit(130))
  }
  process.once("SIGINT", () => onSignal("SIGINT"))
  process.once("SIGTERM", () => onSignal("SIGTERM"))
  log(`broker: ${broker.origin}`)
  const kafka = makeKafka(broker.brokers, "skein-bench", security)
  const admin = kafka.admin()
  await admin.connect()
  clientConfig = writeClientConfigFiles(security, workDir)

  // The enrichment job's stream keys are drawn from the table's keys.
  const seq = keySequence(enrichment === undefined ? w : { ...w, keys: enrichment.tableKeys })
  const expected = expectedCounts(w, seq)
  const windowedIn: WindowedInput | undefined = windowed === undefined ? undefined : windowedInput(windowed)
  if (windowedIn !== undefined) log(`windowed job: ${fmtInt(windowedIn.expected.size)} final results expected`)
  const results = new Map<string, RunResult[]>(selected.map((c) => [c.name, []]))

  try {
    for (let r = 1; r <= runs; r++) {
      // Alternate the order: even runs take the contenders in reverse.
      for (const c of r % 2 === 1 ? selected : [...selected].reverse()) {
        if (available.get(c.name) !== undefined) continue
        const prefix = `bench-${runId}-${c.name}-r${r}`
        log(`── ${c.name} run ${r}/${runs}`)
        await waitForQuiet(idleWaitMs)
        const res: RunResult = await (postgres !== undefined && c.kind === "process" && c.postgres !== undefined
          ? runPostgresProcess(c, r, prefix, { kafka, admin, brokers: broker.brokers, clientConfig, w, seq, expected, workDir, commitIntervalMs, timeoutMs, databaseUrl: postgres.url, pool: postgres.pool, endPhase, log })
          : enrichment !== undefined && c.kind === "process"
          ? runEnrichmentProcess(c, r, prefix, { kafka, admin, brokers: broker.brokers, clientConfig, w: enrichment, seq, workDir, commitIntervalMs, timeoutMs, endPhase, log })
          : windowed !== undefined && windowedIn !== undefined && c.kind === "process"
          ? runWindowedProcess(c, r, prefix, { kafka, admin, brokers: broker.brokers, clientConfig, w: windowed, seq, input: windowedIn, workDir, commitIntervalMs, timeoutMs, endPhase, log })
          : c.kind === "process"
          ? runProcess(c, r, prefix, { kafka, admin, brokers: broker.brokers, clientConfig, w, seq, expected, workDir, commitIntervalMs, timeoutMs, doThroughput, doLatency, doRestore, doRestart, restartKeys, restartBatch, rate, latencySeconds, warmupSeconds })
          : runCeiling(c, r, prefix, { admin, brokers: broker.brokers, clientConfig, w, workDir, rate, latencySeconds })
        ).catch((e: unknown): RunResult => ({ run: r, notes: [`run failed: ${String(e).slice(0, 300)}`] }))
        results.get(c.name)?.push(res)
        log(
          `   ${c.name} run ${r}: throughput ${res.throughput === undefined ? "–" : fmtInt(res.throughput)} rec/s, ` +
            `p50 ${res.p50?.toFixed(1) ?? "–"} ms, p99 ${res.p99?.toFixed(1) ?? "–"} ms, ` +
            `restore ${res.restoreMs === undefined ? "–" : fmtInt(res.restoreMs)} ms (${res.restoreRate === undefined ? "–" : fmtInt(res.restoreRate)} rec/s), ` +
            `peak RSS ${res.peakRssMiB?.toFixed(0) ?? "–"} MiB${res.verified === undefined ? "" : `, output ${res.verified}`}` +
            (res.restart === undefined
              ? ""
              : `, restart cold ${res.restart.cold?.firstOutputSeconds?.toFixed(2) ?? "–"} s / warm ${res.restart.warm?.firstOutputSeconds?.toFixed(2) ?? "–"} s`) +
            (res.notes.length > 0 ? `\n   notes: ${res.notes.join("; ")}` : ""),
        )
        await deleteTopics(admin, [prefix, `changelog__${prefix}`]).catch(() => undefined)
      }
    }
  } finally {
    await admin.disconnect().catch(() => undefined)
    if (clientConfig !== undefined) removeClientConfigFiles(clientConfig)
    await broker.release().catch((e: unknown) => log(`broker release failed: ${String(e)}`))
    await postgres?.release().catch((e: unknown) => log(`Postgres release failed: ${String(e)}`))
  }

  const reports: ContenderReport[] = selected.map((c) => {
    const u = available.get(c.name)
    return {
      name: c.name,
      description: windowed !== undefined && c.kind === "process"
        ? (c.windowedDescription ?? c.description)
        : enrichment !== undefined && c.kind === "process"
        ? (c.enrichmentDescription ?? c.description)
        : c.description,
      hasState: c.kind === "process" && c.hasState,
      ceiling: c.kind === "ceiling",
      ...(c.kind === "process" && c.restartPhase === true ? { restartPhase: true } : {}),
      runs: results.get(c.name) ?? [],
      ...(u !== undefined ? { unavailable: u } : {}),
    }
  })

  // Results: markdown + JSON + chart.
  mkdirSync(dirname(outMd), { recursive: true })
  const stem = outMd.replace(/\.md$/, "")
  const jsonPath = `${stem}.json`
  const meta = {
    date,
    brokerOrigin: broker.origin.replace(/at [\d.]+:\d+$/, "(local)").replace(/=[\d.:,]+$/, "=<host>") +
      (security.protocol === "PLAINTEXT" ? "" : ` (${describeSecurity(security, { detail: false })})`),
    records: w.records,
    partitions: w.partitions,
    keys: w.keys,
    valueBytes: w.valueBytes,
    runs,
    rate,
    latencySeconds,
    warmupSeconds,
    commitIntervalMs,
    machine: `${cpus().length} cores (${cpus()[0]?.model.trim() ?? "?"}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`,
    command: process.argv.length > 2 ? `npm run bench -- ${process.argv.slice(2).join(" ")}` : "npm run bench",
    phases,
    ...(postgres !== undefined ? { job, postgres: postgres.origin } : {}),
    ...(doRestart ? { restartKeys, restartBatch } : {}),
    ...(windowed !== undefined && windowedIn !== undefined
      ? {
          job,
          windowed: {
            groupKeys: windowed.groupKeys,
            recordsPerMinute: windowed.recordsPerMinute,
            graceMs: windowed.graceMs,
            jitterMs: windowed.jitterMs,
            base: windowed.base,
            results: windowedIn.expected.size,
          },
        }
      : {}),
    ...(enrichment !== undefined
      ? { job, enrichment: { tableKeys: enrichment.tableKeys, tableRecords: tableRecordCount(enrichment.tableKeys) } }
      : {}),
  }
  writeFileSync(jsonPath, `${JSON.stringify({ meta, contenders: reports }, null, 2)}\n`)
  await writeReport(outMd, meta, reports)
}

/** Writes <stem>.md and the chart (<stem>.svg/.png) from the JSON's contents. */
const writeReport = async (outMd: string, meta: ReportMeta, reports: ReadonlyArray<ContenderReport>): Promise<void> => {
  const stem = outMd.replace(/\.md$/, "")
  const jsonPath = `${stem}.json`
  let chart: string | undefined
  const py = join(root, "bench", ".venv", "bin", "python")
  if (existsSync(py)) {
    const svg = `${stem}.svg`
    const png = `${stem}.png`
    const r = await exec(py, [join(root, "bench", "peers", "chart.py"), jsonPath, svg, png])
    if (r.code === 0) chart = basename(svg)
    else log(`chart failed: ${r.out.trim().split("\n").slice(-3).join(" | ")}`)
  } else log("no bench/.venv (quix-streams setup did not run): no chart")
  const md = renderMarkdown({ ...meta, ...(chart !== undefined ? { chart } : {}) }, reports)
  writeFileSync(outMd, md)
  console.log("")
  if ((meta.phases ?? ["throughput"]).some((p) => p !== "restart")) {
    console.log(renderText(reports))
    console.log("")
  }
  const restart = renderRestart(meta, reports)
  if (restart.length > 0) console.log(`${restart.join("\n")}\n`)
  log(`results: ${relative(root, outMd)}, ${relative(root, jsonPath)}${chart !== undefined ? `, ${relative(root, join(dirname(outMd), chart))}` : ""}`)
}

/** --from-json FILE.json: re-render the markdown and chart of an earlier run. */
const rerender = async (jsonPath: string): Promise<void> => {
  const data = JSON.parse(readFileSync(jsonPath, "utf8")) as { meta: ReportMeta; contenders: ContenderReport[] }
  await writeReport(jsonPath.replace(/\.json$/, ".md"), data.meta, data.contenders)
}

interface ProcessRunCtx {
  readonly kafka: Kafka
  readonly admin: Admin
  readonly brokers: string
  readonly clientConfig: ClientConfigFiles | undefined
  readonly w: Workload
  readonly seq: Uint32Array
  readonly expected: Int32Array
  readonly workDir: string
  readonly commitIntervalMs: number
  readonly timeoutMs: number
  readonly doThroughput: boolean
  readonly doLatency: boolean
  readonly doRestore: boolean
  readonly doRestart: boolean
  readonly restartKeys: number
  readonly restartBatch: number
  readonly rate: number
  readonly latencySeconds: number
  readonly warmupSeconds: number
}

/** Ends a phase's app: a profiled run (SKEIN_BENCH_CPU_PROF) stops gracefully, so that node writes its profile. */
const endPhase = (app: AppProcess): Promise<unknown> => process.env["SKEIN_BENCH_CPU_PROF"] ? app.stop() : app.kill()

/** Runs `f` with a spawner of app processes, each killed once `f` ends (then `cleanup`, if given). */
const withSpawned = async <A>(
  f: (spawn: (cmd: Command, logFile: string) => AppProcess) => Promise<A>,
  cleanup: () => void = () => {}
): Promise<A> => {
  const spawned: AppProcess[] = []
  try {
    return await f((cmd, logFile) => {
      const p = new AppProcess(cmd, logFile)
      spawned.push(p)
      return p
    })
  } finally {
    for (const p of spawned) await p.kill()
    cleanup()
  }
}

/** Removes a job run's folder (its state directory). */
const removeRunDir = (x: { readonly workDir: string }, c: ProcessContender, run: number) => () =>
  rmSync(join(x.workDir, `${c.name}-r${run}`), { recursive: true, force: true })

const runProcess = (c: ProcessContender, run: number, prefix: string, x: ProcessRunCtx): Promise<RunResult> =>
  withSpawned((spawn) => runProcessInner(c, run, prefix, x, spawn))

/** An enrichment-job run (bench/lib/enrichmentRun.ts), its processes killed at the end. */
const runEnrichmentProcess = (c: ProcessContender, run: number, prefix: string, x: EnrichmentRunCtx): Promise<RunResult> =>
  withSpawned((spawn) => runEnrichment(c, run, prefix, x, spawn), removeRunDir(x, c, run))

/** A Postgres-job run (bench/lib/postgresRun.ts), its processes killed at the end. */
const runPostgresProcess = (c: ProcessContender, run: number, prefix: string, x: PostgresRunCtx): Promise<RunResult> =>
  withSpawned((spawn) => runPostgres(c, run, prefix, x, spawn))

/** A windowed-job run (bench/lib/windowedRun.ts), its processes killed at the end. */
const runWindowedProcess = (c: ProcessContender, run: number, prefix: string, x: WindowedRunCtx): Promise<RunResult> =>
  withSpawned((spawn) => runWindowed(c, run, prefix, x, spawn), removeRunDir(x, c, run))

const runProcessInner = async (
  c: ProcessContender,
  run: number,
  prefix: string,
  x: ProcessRunCtx,
  spawn: (cmd: Command, logFile: string) => AppProcess,
): Promise<RunResult> => {
  const notes: string[] = []
  const out: { -readonly [K in keyof RunResult]: RunResult[K] } = { run, notes }
  const input = `${prefix}.in`
  const output = `${prefix}.out`
  const stateDir = join(x.workDir, `${c.name}-r${run}`, "state")
  const logFile = join(x.workDir, `${c.name}-r${run}.log`)
  mkdirSync(stateDir, { recursive: true })
  const spec = { brokers: x.brokers, input, output, group: prefix, stateDir, commitIntervalMs: x.commitIntervalMs, clientConfig: x.clientConfig }

  // 1. Throughput, then 2. restore (restarts its killed contender).
  if (x.doThroughput) {
    await createTopics(x.admin, [input, output], x.w.partitions)
    const preloadSec = await preload(x.kafka, input, x.w, x.seq)
    log(`   preloaded ${fmtInt(x.w.records)} records in ${preloadSec.toFixed(1)} s`)
    const inputEnds = await topicEnds(x.admin, input)

    // 1. Throughput.
    const load0 = loadavg()[0] ?? 0
    const app = spawn(c.command(spec), logFile)
    const timeline = new WatermarkTimeline(x.admin, output, 50)
    const deadline = Date.now() + x.timeoutMs
    let caughtUp = false
    while (Date.now() < deadline && app.alive()) {
      if (await groupCaughtUp(x.admin, prefix, input, inputEnds).catch(() => false)) {
        caughtUp = true
        break
      }
      await sleep(250)
    }
    // The process tree's CPU seconds from its first read to the input consumed (polled every 250 ms):
    // CPU per record, which other work on the machine inflates far less than it cuts the rate.
    const cpuAtEnd = caughtUp ? app.cpuSeconds() : undefined
    await sleep(300)
    await timeline.stop()
    out.peakRssMiB = app.peakRssMiB()
    const finalHw = timeline.last()
    const end = finalHw === undefined ? undefined : timeline.reachedAt(finalHw)
    const firstRead = app.event("first-read")?.ts
    if (firstRead === undefined) notes.push("no first-read event: throughput measured from process spawn")
    const start = firstRead ?? app.spawnedAt
    if (!caughtUp) {
      notes.push(app.alive() ? `did not finish within ${x.timeoutMs / 1000} s` : `process exited early (see ${logFile})`)
    } else if (end !== undefined && end > start) {
      out.throughput = x.w.records / ((end - start) / 1000)
    }
    const cpuAtFirstRead = app.cpuAtEvent("first-read")
    if (cpuAtEnd !== undefined && cpuAtFirstRead !== undefined && cpuAtEnd > cpuAtFirstRead) {
      const cpu = cpuAtEnd - cpuAtFirstRead
      notes.push(
        `CPU ${((cpu * 1e6) / x.w.records).toFixed(2)} µs per record (${cpu.toFixed(2)} CPU s of the process tree from its ` +
          `first read to the input consumed; ${((cpu * 1e5) / x.w.records).toFixed(3)} CPU s per 100k records)`
      )
    }
    const load1 = loadavg()[0] ?? 0
    // During a run the broker, the contender and the harness load the machine themselves: flag
    // only loads well above what they cause.
    if (Math.max(load0, load1) > LOAD_BUSY_DURING_RUN) {
      notes.push(`machine busy during the throughput run: 1-min load average ${load0.toFixed(1)} → ${load1.toFixed(1)} on ${cpus().length} cores`)
    }
    await endPhase(app)
    const v = await verifyOutput(x.kafka, output, x.expected, 15_000)
    out.verified = v.exact
      ? "exact"
      : v.complete
        ? `complete (+${fmtInt(v.duplicates)} dup)`
        : `WRONG: ${v.keysWrong} keys off, ${v.gaps} gaps, ${fmtInt(v.records)} records`
    if (!v.complete) {
      notes.push(`output check failed: ${out.verified}`)
      delete out.throughput
    }

    // 2. Restore: crash (already SIGKILLed above), lose the local state, restart on the same group.
    if (x.doRestore && c.hasState && caughtUp) {
      rmSync(stateDir, { recursive: true, force: true })
      mkdirSync(stateDir, { recursive: true })
      const again = spawn(c.command(spec), logFile)
      // restore-end may come once per batch of partitions with a cumulative count: after the first
      // one that restored anything, give the rest 3 s to report, then take the last.
      const firstEnd = await again.waitFor((e) => e.event === "restore-end" && (e.records ?? 0) > 0, 600_000)
      if (firstEnd !== undefined) await sleep(3000)
      const ended = firstEnd === undefined ? undefined : again.events.filter((e) => e.event === "restore-end").pop()
      const started = again.events.find((e) => e.event === "restore-start")
      if (ended !== undefined && started !== undefined && ended.ts > started.ts) {
        // The headline: time to the restored state of this run's whole input (the same records
        // for every contender); the rate depends on how many changelog records hold that state.
        out.restoreMs = ended.ts - started.ts
        out.restoreRate = (ended.records ?? 0) / ((ended.ts - started.ts) / 1000)
        out.restoreRecords = ended.records ?? 0
        notes.push(`restored ${fmtInt(ended.records ?? 0)} changelog records in ${((ended.ts - started.ts) / 1000).toFixed(2)} s (restart→restored ${((ended.ts - again.spawnedAt) / 1000).toFixed(1)} s)`)
      } else {
        notes.push(again.alive() ? "no restore-start/restore-end events: restore not measured" : "restart exited early: restore not measured")
      }
      await endPhase(again)
    } else if (x.doRestore && c.hasState) {
      notes.push("restore not measured: the throughput run did not complete")
    }
  }

  // 3. Latency at a fixed rate, on fresh topics and a fresh group.
  if (x.doLatency) {
    const lin = `${prefix}.lat.in`
    const lout = `${prefix}.lat.out`
    await createTopics(x.admin, [lin, lout], x.w.partitions)
    const lstate = join(x.workDir, `${c.name}-r${run}`, "lat-state")
    mkdirSync(lstate, { recursive: true })
    const lapp = spawn(c.command({ ...spec, input: lin, output: lout, group: `${prefix}.lat`, stateDir: lstate }), logFile)
    try {
      const l = await measureLatency(x.kafka, lin, lout, x.w, {
        rate: x.rate,
        warmupSec: x.warmupSeconds,
        measureSec: x.latencySeconds,
        readyTimeoutMs: 180_000,
        isAlive: () => lapp.alive(),
      })
      if (l.measured > 0) {
        out.p50 = l.p50
        out.p99 = l.p99
      }
      const tput = out.throughput
      if (tput !== undefined && tput < x.rate * 1.5) {
        notes.push(`latency rate ${fmtInt(x.rate)} rec/s is close to or above this run's throughput (${fmtInt(tput)} rec/s): latency includes queueing`)
      }
      if (l.missing > 0) notes.push(`latency: ${fmtInt(l.missing)} of ${fmtInt(l.measured + l.missing)} measured records had no output in time`)
    } catch (e) {
      notes.push(`latency not measured: ${String(e)}`)
    } finally {
      await endPhase(lapp)
    }
  }
  // 4. Restart: time to the first new output with a large state, cold against warm.
  if (x.doRestart && c.restartPhase === true) {
    out.restart = await runRestartPhase(c, run, prefix, {
      kafka: x.kafka,
      admin: x.admin,
      brokers: x.brokers,
      clientConfig: x.clientConfig,
      partitions: x.w.partitions,
      valueBytes: x.w.valueBytes,
      keys: x.restartKeys,
      batch: x.restartBatch,
      commitIntervalMs: x.commitIntervalMs,
      timeoutMs: x.timeoutMs,
      workDir: x.workDir,
      log,
    }, spawn, notes)
  }
  rmSync(join(x.workDir, `${c.name}-r${run}`), { recursive: true, force: true })
  return out
}

const runCeiling = async (
  c: CeilingContender,
  run: number,
  prefix: string,
  x: { admin: Admin; brokers: string; clientConfig: ClientConfigFiles | undefined; w: Workload; workDir: string; rate: number; latencySeconds: number },
): Promise<RunResult> => {
  const r = await c.run({
    brokers: x.brokers,
    topic: prefix,
    records: x.w.records,
    valueBytes: x.w.valueBytes,
    partitions: x.w.partitions,
    rate: x.rate,
    latencySeconds: x.latencySeconds,
    logFile: join(x.workDir, `${c.name}-r${run}.log`),
    clientConfig: x.clientConfig,
    createTopic: (name) => createTopics(x.admin, [name], x.w.partitions),
  })
  return {
    run,
    notes: r.note === undefined ? [] : [r.note],
    ...(r.throughput !== undefined ? { throughput: r.throughput } : {}),
    ...(r.p50 !== undefined ? { p50: r.p50 } : {}),
    ...(r.p99 !== undefined ? { p99: r.p99 } : {}),
    ...(r.peakRssMiB !== undefined ? { peakRssMiB: r.peakRssMiB } : {}),
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e)
    process.exit(1)
  },
)
