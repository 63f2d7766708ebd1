/** The results table (markdown), the JSON next to it, and the chart. */
import type { RestartKind, RestartResult } from "./restart.ts"
import { fmtInt, fmtNum, spread, type Spread } from "./stats.ts"

export interface RunResult {
  readonly run: number
  readonly throughput?: number
  readonly p50?: number
  readonly p99?: number
  /**
   * The restore's headline: ms from restore-start to restore-end, i.e. to the restored state of
   * this run's input records (the same input for every contender). Absent in results written
   * before it (see `restoreMsOf`).
   */
  readonly restoreMs?: number
  /** Changelog records applied per second in that restore (depends on how many hold the state). */
  readonly restoreRate?: number
  /** Changelog records applied in that restore. */
  readonly restoreRecords?: number
  readonly peakRssMiB?: number
  readonly verified?: string
  /** The windowed and enrichment jobs: digest of the results read (bench/lib/windowed.ts `checkResults`, bench/lib/enrichment.ts `checkJoined`). */
  readonly digest?: string
  /** The restart phase (contenders with `restartPhase`). */
  readonly restart?: RestartResult
  readonly notes: ReadonlyArray<string>
}

export interface ContenderReport {
  readonly name: string
  readonly description: string
  readonly unavailable?: string
  readonly hasState: boolean
  readonly ceiling: boolean
  /** Measured in the restart phase. */
  readonly restartPhase?: boolean
  readonly runs: ReadonlyArray<RunResult>
}

export interface Summary {
  readonly name: string
  readonly throughput?: Spread
  readonly p50?: Spread
  readonly p99?: Spread
  readonly restoreMs?: Spread
  readonly restoreRate?: Spread
  readonly restoreRecords?: Spread
  readonly peakRssMiB?: Spread
}

/**
 * A run's restore time in ms: `restoreMs`, or for results written before it, records / rate
 * (the same interval: the rate was records over restore-end − restore-start).
 */
export const restoreMsOf = (r: RunResult): number | undefined => {
  if (r.restoreMs !== undefined) return r.restoreMs
  if (r.restoreRecords === undefined || r.restoreRate === undefined || !(r.restoreRate > 0)) return undefined
  return (r.restoreRecords / r.restoreRate) * 1000
}

export const summarize = (c: ContenderReport): Summary => {
  const s = (f: (r: RunResult) => number | undefined): Spread | undefined => spread(c.runs.map(f))
  const out: { -readonly [K in keyof Summary]: Summary[K] } = { name: c.name }
  const t = s((r) => r.throughput)
  if (t !== undefined) out.throughput = t
  const p50 = s((r) => r.p50)
  if (p50 !== undefined) out.p50 = p50
  const p99 = s((r) => r.p99)
  if (p99 !== undefined) out.p99 = p99
  const rms = s(restoreMsOf)
  if (rms !== undefined) out.restoreMs = rms
  const rr = s((r) => r.restoreRate)
  if (rr !== undefined) out.restoreRate = rr
  const rrec = s((r) => r.restoreRecords)
  if (rrec !== undefined) out.restoreRecords = rrec
  const rss = s((r) => r.peakRssMiB)
  if (rss !== undefined) out.peakRssMiB = rss
  return out
}

type Metric = "throughput" | "p50" | "p99" | "restoreMs" | "restoreRate" | "peakRssMiB"

const cell = (sp: Spread | undefined, unit: "rec/s" | "ms" | "MiB", missing: string): string => {
  if (sp === undefined) return missing
  const m = fmtNum(sp.median, unit)
  return sp.n > 1 ? `${m} (${fmtNum(sp.min, unit)}–${fmtNum(sp.max, unit)})` : m
}

const ratio = (sp: Spread | undefined, base: Spread | undefined): string => {
  if (sp === undefined || base === undefined || base.median === 0) return "–"
  const r = sp.median / base.median
  return `${r >= 10 ? r.toFixed(0) : r >= 0.1 ? r.toFixed(2) : r.toPrecision(2)}×`
}

export interface ReportMeta {
  readonly date: string
  readonly brokerOrigin: string
  readonly records: number
  readonly partitions: number
  readonly keys: number
  readonly valueBytes: number
  readonly runs: number
  readonly rate: number
  readonly latencySeconds: number
  readonly warmupSeconds: number
  readonly commitIntervalMs: number
  readonly machine: string
  readonly command: string
  readonly chart?: string
  /** Which phases ran (absent in older results: all but restart). */
  readonly phases?: ReadonlyArray<"throughput" | "restore" | "latency" | "restart">
  /** Restart phase: keys of the state, and new records per restart. */
  readonly restartKeys?: number
  readonly restartBatch?: number
  /** The job (absent in older results: the count job). */
  readonly job?: "count" | "windowed" | "enrichment" | "postgres"
  /** The Postgres job's database (DATABASE_URL or the embedded server), without credentials. */
  readonly postgres?: string
  /** The windowed job's workload (bench/lib/windowed.ts). */
  readonly windowed?: {
    readonly groupKeys: number
    readonly recordsPerMinute: number
    readonly graceMs: number
    readonly jitterMs: number
    readonly base: number
    /** Final results expected. */
    readonly results: number
  }
  /** The enrichment job's table (bench/lib/enrichment.ts). */
  readonly enrichment?: {
    readonly tableKeys: number
    /** Records of the table's topic (keys, updates and tombstones). */
    readonly tableRecords: number
  }
}

/**
 * The windowed and enrichment jobs' comparison of the contenders' outputs: the digests of every
 * run's results (bench/lib/windowed.ts `checkResults`, bench/lib/enrichment.ts `checkJoined`),
 * equal or not.
 */
export const renderDigests = (reports: ReadonlyArray<ContenderReport>, job: "windowed" | "enrichment" = "windowed"): ReadonlyArray<string> => {
  const runs = reports.flatMap((r) => r.runs.filter((x) => x.digest !== undefined).map((x) => ({ name: r.name, run: x.run, digest: x.digest ?? "" })))
  if (runs.length === 0) return []
  const distinct = [...new Set(runs.map((x) => x.digest))]
  const list = runs.map((x) => `${x.name} run ${x.run}: ${x.digest}`).join("; ")
  return [
    distinct.length === 1
      ? job === "windowed"
        ? `**Outputs equal**: the final results of all ${runs.length} runs have one digest, ${distinct[0]} (sorted \`<second key>@<window start − base>=<count>\` lines, sha256).`
        : `**Outputs equal**: the joined results of all ${runs.length} runs have one digest, ${distinct[0]} (\`<key>=<value>\` lines in the stream's order, sha256).`
      : `**Outputs differ**: ${distinct.length} different digests of the ${job === "windowed" ? "final" : "joined"} results (${list}).`,
    "",
  ]
}

export const baselineOf = (reports: ReadonlyArray<ContenderReport>): string | undefined => {
  const has = (n: string) => reports.some((r) => r.name === n && r.unavailable === undefined && r.runs.some((x) => x.throughput !== undefined))
  // The Postgres job's ratios are to its at-least-once loop (the issue's target: >= 0.8x of it).
  if (has("kafkajs-pg-loop")) return "kafkajs-pg-loop"
  return has("skein-eos") ? "skein-eos" : has("kafkajs-loop") ? "kafkajs-loop" : undefined
}

/** The throughput / latency / restore / RSS table. */
const renderMainTable = (meta: ReportMeta, reports: ReadonlyArray<ContenderReport>): ReadonlyArray<string> => {
  const base = baselineOf(reports)
  const sums = new Map(reports.map((r) => [r.name, summarize(r)]))
  const b = base === undefined ? undefined : sums.get(base)
  const L: string[] = []
  L.push(
    `| contender | throughput rec/s | × | p50 ms | × | p99 ms | × | restore ms (state of ${fmtInt(meta.records)} inputs) | × | ` +
      "restore rec/s | changelog records restored | peak RSS MiB | × | output check |",
  )
  L.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
  for (const r of reports) {
    if (r.unavailable !== undefined) {
      L.push(`| ${r.name} | unavailable: ${r.unavailable.replace(/\|/g, "\\|")} | | | | | | | | | | | | |`)
      continue
    }
    const s = sums.get(r.name) ?? { name: r.name }
    const restoreMissing = r.ceiling ? "n/a" : r.hasState ? "–" : "n/a (no state)"
    const m = (k: Metric, unit: "rec/s" | "ms" | "MiB", missing = "–"): [string, string] => [
      cell(s[k], unit, missing),
      ratio(s[k], b?.[k]),
    ]
    const verified = [...new Set(r.runs.map((x) => x.verified).filter((v): v is string => v !== undefined))].join("; ")
    L.push(
      `| ${r.name} | ${[
        ...m("throughput", "rec/s"),
        ...m("p50", "ms"),
        ...m("p99", "ms"),
        ...m("restoreMs", "ms", restoreMissing),
        cell(s.restoreRate, "rec/s", restoreMissing),
        fmtRecords(s.restoreRecords, restoreMissing),
        ...m("peakRssMiB", "MiB"),
      ].join(" | ")} | ${r.ceiling ? "n/a (perf tool)" : verified || "–"} |`,
    )
  }
  L.push("")
  return L
}

export const renderMarkdown = (meta: ReportMeta, reports: ReadonlyArray<ContenderReport>): string => {
  const base = baselineOf(reports)
  const L: string[] = []
  const phases = meta.phases ?? ["throughput", "restore", "latency"]
  const mainTable = phases.includes("throughput") || phases.includes("latency")
  L.push(`# Skein benchmark — ${meta.date}`)
  L.push("")
  const w = meta.windowed
  if (meta.job === "windowed" && w !== undefined) {
    L.push(
      `**Windowed job**: ${fmtInt(meta.records)} input records (${meta.valueBytes}-byte values, ${meta.partitions} partitions) grouped by ` +
        `a second key from the value (${fmtInt(w.groupKeys)} keys, through a repartition topic), counted in tumbling 1-minute windows ` +
        `of event time with ${w.graceMs / 1000} s grace, final results only (${fmtInt(w.results)} expected). Event time advances one minute ` +
        `per ${fmtInt(w.recordsPerMinute)} records, up to ${w.jitterMs / 1000} s out of order; one closer per second key once the input ` +
        `is consumed. ${meta.runs} run(s) per contender, alternating; figures are median (min–max), ratios to **${base ?? "nothing"}**. ` +
        `Commit interval ${meta.commitIntervalMs} ms where the contender has one.`,
    )
  } else if (meta.job === "enrichment" && meta.enrichment !== undefined) {
    const e = meta.enrichment
    L.push(
      `**Enrichment job**: ${fmtInt(meta.records)} stream records (${meta.valueBytes}-byte values, ${meta.partitions} partitions) left-joined ` +
        `to a table of ${fmtInt(e.tableKeys)} keys (a compacted topic of ${fmtInt(e.tableRecords)} records: every key, an update of ` +
        `every 10th, a tombstone of every 1,000th), co-partitioned; the table loaded by a first start of the contender before the ` +
        `stream records are written, the throughput measured on a second start. ${meta.runs} run(s) per contender, alternating; ` +
        `figures are median (min–max), ratios to **${base ?? "nothing"}**. Commit interval ${meta.commitIntervalMs} ms.`,
    )
  } else if (meta.job === "postgres") {
    L.push(
      `**Postgres job**: ${fmtInt(meta.records)} input records (${meta.valueBytes}-byte values, ${fmtInt(meta.keys)} keys, ${meta.partitions} partitions) ` +
        `into a Postgres table without a unique constraint, one row (key, value, partition, offset) per record, in batch inserts; ` +
        `skein-eos runs its count job (Kafka to Kafka, exactly-once) on the same input for reference. Database: ${meta.postgres ?? "?"}. ` +
        `${meta.runs} run(s) per contender, alternating; figures are median (min–max), ratios to **${base ?? "nothing"}**.`,
    )
  } else if (mainTable) {
    L.push(
      `${fmtInt(meta.records)} input records (${meta.valueBytes}-byte values, ${fmtInt(meta.keys)} keys, ${meta.partitions} partitions), ` +
        `${meta.runs} run(s) per contender, alternating; figures are median (min–max). ` +
        `Ratios are to **${base ?? "nothing (no baseline ran)"}**${base === "kafkajs-loop" ? " because skein-eos is unavailable" : ""}. ` +
        `Latency: ${fmtInt(meta.rate)} records/s for ${meta.warmupSeconds} s warm-up + ${meta.latencySeconds} s measured. ` +
        `Commit interval ${meta.commitIntervalMs} ms where the contender has one.`,
    )
  } else {
    L.push(
      `Restart phase only: ${meta.partitions} partitions, ${meta.valueBytes}-byte values, ${meta.runs} run(s) per contender, ` +
        `alternating (contender order and warm/cold order swap every run); figures are median (min–max). ` +
        `Commit interval ${meta.commitIntervalMs} ms where the contender has one.`,
    )
  }
  L.push("")
  L.push(`Broker: ${meta.brokerOrigin}. Machine: ${meta.machine}.`)
  L.push("")
  if (mainTable) L.push(...renderMainTable(meta, reports))
  if (meta.job === "windowed" || meta.job === "enrichment") L.push(...renderDigests(reports, meta.job))
  L.push(...renderRestart(meta, reports))
  if (meta.chart !== undefined) {
    L.push(`![throughput, p99 latency and restore time](${meta.chart})`)
    L.push("")
  }
  L.push("## Contenders")
  L.push("")
  for (const r of reports) L.push(`- **${r.name}**: ${r.description}`)
  L.push("")
  const notes = reports.flatMap((r) => r.runs.flatMap((x) => x.notes.map((n) => `- ${r.name} run ${x.run}: ${n}`)))
  if (notes.length > 0) {
    L.push("## Notes from the runs")
    L.push("")
    L.push(...notes)
    L.push("")
  }
  L.push("## How the figures are taken")
  L.push("")
  if (meta.job === "windowed") L.push(
    "- **throughput** (windowed job): input records / (time the output's high watermark reached its final value, i.e. the " +
      "last final result and its commit marker were written − the contender's first read). The closers are produced once a " +
      "consumer group of the contender has committed the whole input; the run ends when as many final results as expected " +
      "were read read_committed. Then the output is read to its end and checked: every expected (second key, window start) " +
      "once with its count, nothing else (`exact`).",
  )
  else if (meta.job === "enrichment") L.push(
    "- **throughput** (enrichment job): stream records / (time the output's high watermark reached its final value, i.e. the " +
      "last joined result and its commit marker were written − the contender's first read of a stream record). First start: " +
      "the table topic alone has records; once a consumer group of the contender has committed it to its end, the contender " +
      "is stopped gracefully (SIGTERM). Then the stream records are written and the contender started again on the same group " +
      "and state directory; the run ends when its group has committed the whole stream topic. Then the output is read " +
      "read_committed to its end and checked: every stream record's joined result once, with its key and its key's final " +
      "table value (`exact`).",
  )
  else if (meta.job === "postgres") L.push(
    "- **throughput** (Postgres job): input records / (the moment the contender's committed positions reached the input's end − " +
      "its first read). Skein's positions are in its skein_offsets table, committed in the rows' transaction; the at-least-once " +
      "loop's are the group's Kafka offsets, committed after its inserts; both polled every 100 ms. skein-eos: as in the count job. " +
      "Then the contender is SIGKILLed and the table checked: every input (partition, offset) present, each key with as many " +
      "distinct records as the input has; `exact` = no row twice, `complete (+d dup)` = at-least-once duplicates.",
  )
  else if (phases.includes("throughput")) L.push(
    "- **throughput**: input records / (time the output's high watermark reached its final value, i.e. the last output " +
      "(and, for transactions, its commit marker) was written − the contender's first read). Completion = the group's " +
      "committed offsets at the input's end; then the output is read read_committed and each key's values must run 1..n.",
  )
  if (phases.includes("latency")) L.push(
    "- **p50/p99**: fresh topics, the harness produces at a fixed rate; latency of a record = when its output (key, count) " +
      "is read read_committed − when the record was handed to the producer. Includes the harness's own producer and consumer.",
  )
  if (phases.includes("restore")) L.push(
    "- **restore**: after the throughput run the process is SIGKILLed, its state directory deleted, and it is restarted " +
      "on the same group. **restore ms** = restore-end − restore-start as the contender reports them: the time to the " +
      `restored state of the same ${fmtInt(meta.records)} input records for every contender (× = its ratio to the baseline's, ` +
      "lower is better). Beside it, changelog records applied and their rate: the changelogs differ in size (Skein writes " +
      "one record per key per transaction, Kafka Streams with its cache off one per input record), so a rate compares " +
      "unlike work (bench/README.md).",
  )
  if (phases.includes("restart")) {
    L.push(
      "- **restart**: a state of one record per key is built, the contender stopped gracefully (SIGTERM, waiting for it to exit) " +
        "and its output checked; then a batch of new records to known keys is produced and the contender restarted on the same " +
        "group, warm (state directory kept) or cold (wiped), alternating which comes first; the figure is spawn → first new output " +
        "read read_committed. Every new output must continue its key's count. Restored records = the contender's last restore-end.",
    )
  }
  if (phases.includes("throughput")) {
    L.push("- **peak RSS**: highest resident set of the processing process tree during the throughput run (sampled every 200 ms, and VmHWM).")
    if (meta.job !== "postgres" && meta.job !== "windowed" && meta.job !== "enrichment") L.push("- **output check**: `exact` = every key's counts 1..n, no duplicates; `complete (+d dup)` = correct final counts with at-least-once duplicates.")
  }
  if (reports.some((r) => r.ceiling)) L.push("- kafka-perf rows are the machine's ceiling measured by Kafka's own tools; see bench/README.md for their latency definitions.")
  L.push("")
  L.push(`Command: \`${meta.command}\``)
  L.push("")
  return L.join("\n")
}

const fmtSeconds = (sp: Spread | undefined): string => {
  if (sp === undefined) return "–"
  const f = (n: number): string => n.toFixed(n >= 100 ? 0 : n >= 10 ? 1 : 2)
  return sp.n > 1 ? `${f(sp.median)} (${f(sp.min)}–${f(sp.max)})` : f(sp.median)
}

const fmtRecords = (sp: Spread | undefined, missing = "–"): string =>
  sp === undefined ? missing : sp.n > 1 && sp.min !== sp.max ? `${fmtInt(sp.median)} (${fmtInt(sp.min)}–${fmtInt(sp.max)})` : fmtInt(sp.median)

const restartSpread = (r: ContenderReport, kind: RestartKind, f: "firstOutputSeconds" | "allOutputsSeconds" | "restoredRecords"): Spread | undefined =>
  spread(r.runs.map((x) => x.restart?.[kind]?.[f]))

const ratioOf = (a: number | undefined, b: number | undefined): string =>
  a === undefined || b === undefined || b === 0 ? "–" : `${(a / b).toFixed(2)}×`

/** The restart phase's table (empty when no run has one). */
export const renderRestart = (meta: ReportMeta, reports: ReadonlyArray<ContenderReport>): ReadonlyArray<string> => {
  const rows = reports.filter((r) => r.unavailable === undefined && r.runs.some((x) => x.restart !== undefined))
  if (rows.length === 0) return []
  const L: string[] = []
  L.push("## Restart: time to the first new output")
  L.push("")
  L.push(
    `State of ${fmtInt(meta.restartKeys ?? 0)} keys (one record each), then ${fmtInt(meta.restartBatch ?? 0)} new records to known keys per restart; ` +
      "seconds from the process spawn to the first new output read read_committed (and to the last of the batch), after a " +
      "graceful stop: **warm** = the state directory kept, **cold** = wiped. Restored = changelog records the contender " +
      "reported restoring.",
  )
  L.push("")
  L.push(
    "| contender | restart: cold s | restart: warm s | warm/cold | all new outputs: cold s | warm s | restored records cold | " +
      "restored records warm | new outputs | 1-min load at the restarts |",
  )
  L.push("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
  for (const r of rows) {
    const cold = restartSpread(r, "cold", "firstOutputSeconds")
    const warm = restartSpread(r, "warm", "firstOutputSeconds")
    const measures = r.runs.flatMap((x) => [x.restart?.cold, x.restart?.warm]).filter((m) => m !== undefined)
    const checks = [...new Set(measures.map((m) => m.check))].join("; ")
    const loads = measures.map((m) => m.loadAtSpawn)
    const load = loads.length === 0 ? "–" : `${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)}`
    L.push(
      `| ${r.name} | ${fmtSeconds(cold)} | ${fmtSeconds(warm)} | ${ratioOf(warm?.median, cold?.median)} | ` +
        `${fmtSeconds(restartSpread(r, "cold", "allOutputsSeconds"))} | ${fmtSeconds(restartSpread(r, "warm", "allOutputsSeconds"))} | ` +
        `${fmtRecords(restartSpread(r, "cold", "restoredRecords"))} | ${fmtRecords(restartSpread(r, "warm", "restoredRecords"))} | ` +
        `${checks === "" ? "–" : `${checks} (${measures.length} × ${fmtInt(meta.restartBatch ?? 0)})`} | ${load} |`,
    )
  }
  L.push("")
  // Skein against Kafka Streams: of the medians, and per run (measured side by side).
  const skein = rows.find((r) => r.name === "skein-eos")
  const ks = rows.find((r) => r.name === "kafka-streams-eos")
  if (skein !== undefined && ks !== undefined) {
    const med = (r: ContenderReport, k: RestartKind, f: "firstOutputSeconds" | "allOutputsSeconds" = "firstOutputSeconds") =>
      restartSpread(r, k, f)?.median
    const perRun = skein.runs
      .map((sr) => {
        const kr = ks.runs.find((x) => x.run === sr.run)
        return `run ${sr.run}: cold ${ratioOf(sr.restart?.cold?.firstOutputSeconds, kr?.restart?.cold?.firstOutputSeconds)}, ` +
          `warm ${ratioOf(sr.restart?.warm?.firstOutputSeconds, kr?.restart?.warm?.firstOutputSeconds)}`
      })
      .join("; ")
    L.push(
      `skein-eos / kafka-streams-eos (restart seconds; below 1 = Skein first): cold ${ratioOf(med(skein, "cold"), med(ks, "cold"))}, ` +
        `warm ${ratioOf(med(skein, "warm"), med(ks, "warm"))} (medians; to all new outputs: cold ` +
        `${ratioOf(med(skein, "cold", "allOutputsSeconds"), med(ks, "cold", "allOutputsSeconds"))}, warm ` +
        `${ratioOf(med(skein, "warm", "allOutputsSeconds"), med(ks, "warm", "allOutputsSeconds"))}); per run, to the first: ${perRun}.`,
    )
    L.push("")
  }
  return L
}

/** A plain-text table for the terminal. */
export const renderText = (reports: ReadonlyArray<ContenderReport>): string => {
  const base = baselineOf(reports)
  const sums = new Map(reports.map((r) => [r.name, summarize(r)]))
  const b = base === undefined ? undefined : sums.get(base)
  const rows: string[][] = [["contender", "throughput rec/s", "×", "p50 ms", "p99 ms", "×p99", "restore ms", "×", "restore rec/s", "peak RSS MiB"]]
  for (const r of reports) {
    if (r.unavailable !== undefined) {
      rows.push([r.name, `unavailable: ${r.unavailable}`])
      continue
    }
    const s = sums.get(r.name) ?? { name: r.name }
    rows.push([
      r.name,
      cell(s.throughput, "rec/s", "–"),
      ratio(s.throughput, b?.throughput),
      cell(s.p50, "ms", "–"),
      cell(s.p99, "ms", "–"),
      ratio(s.p99, b?.p99),
      cell(s.restoreMs, "ms", r.hasState ? "–" : "n/a"),
      ratio(s.restoreMs, b?.restoreMs),
      cell(s.restoreRate, "rec/s", r.hasState ? "–" : "n/a"),
      cell(s.peakRssMiB, "MiB", "–"),
    ])
  }
  const widths = rows[0]?.map((_, i) => Math.max(...rows.filter((r) => r.length > 2).map((r) => (r[i] ?? "").length))) ?? []
  return rows
    .map((r) => (r.length <= 2 ? `${(r[0] ?? "").padEnd(widths[0] ?? 0)}  ${r[1] ?? ""}` : r.map((c, i) => c.padEnd(widths[i] ?? 0)).join("  ")))
    .join("\n")
}
