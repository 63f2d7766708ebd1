/** The results table (markdown), the JSON next to it, and the chart. */
import { fmtInt, fmtNum, spread, type Spread } from "./stats.ts"

export interface RunResult {
  readonly run: number
  readonly throughput?: number
  readonly p50?: number
  readonly p99?: number
  readonly restoreRate?: number
  readonly restoreRecords?: number
  readonly peakRssMiB?: number
  readonly verified?: string
  readonly notes: ReadonlyArray<string>
}

export interface ContenderReport {
  readonly name: string
  readonly description: string
  readonly unavailable?: string
  readonly hasState: boolean
  readonly ceiling: boolean
  readonly runs: ReadonlyArray<RunResult>
}

export interface Summary {
  readonly name: string
  readonly throughput?: Spread
  readonly p50?: Spread
  readonly p99?: Spread
  readonly restoreRate?: Spread
  readonly peakRssMiB?: Spread
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
  const rr = s((r) => r.restoreRate)
  if (rr !== undefined) out.restoreRate = rr
  const rss = s((r) => r.peakRssMiB)
  if (rss !== undefined) out.peakRssMiB = rss
  return out
}

type Metric = "throughput" | "p50" | "p99" | "restoreRate" | "peakRssMiB"

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
}

export const baselineOf = (reports: ReadonlyArray<ContenderReport>): string | undefined => {
  const has = (n: string) => reports.some((r) => r.name === n && r.unavailable === undefined && r.runs.some((x) => x.throughput !== undefined))
  return has("skein-eos") ? "skein-eos" : has("kafkajs-loop") ? "kafkajs-loop" : undefined
}

export const renderMarkdown = (meta: ReportMeta, reports: ReadonlyArray<ContenderReport>): string => {
  const base = baselineOf(reports)
  const sums = new Map(reports.map((r) => [r.name, summarize(r)]))
  const b = base === undefined ? undefined : sums.get(base)
  const L: string[] = []
  L.push(`# Skein benchmark — ${meta.date}`)
  L.push("")
  L.push(
    `${fmtInt(meta.records)} input records (${meta.valueBytes}-byte values, ${fmtInt(meta.keys)} keys, ${meta.partitions} partitions), ` +
      `${meta.runs} run(s) per contender, alternating; figures are median (min–max). ` +
      `Ratios are to **${base ?? "nothing (no baseline ran)"}**${base === "kafkajs-loop" ? " because skein-eos is unavailable" : ""}. ` +
      `Latency: ${fmtInt(meta.rate)} records/s for ${meta.warmupSeconds} s warm-up + ${meta.latencySeconds} s measured. ` +
      `Commit interval ${meta.commitIntervalMs} ms where the contender has one.`,
  )
  L.push("")
  L.push(`Broker: ${meta.brokerOrigin}. Machine: ${meta.machine}.`)
  L.push("")
  L.push(
    "| contender | throughput rec/s | × | p50 ms | × | p99 ms | × | restore rec/s | × | peak RSS MiB | × | output check |",
  )
  L.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
  for (const r of reports) {
    if (r.unavailable !== undefined) {
      L.push(`| ${r.name} | unavailable: ${r.unavailable.replace(/\|/g, "\\|")} | | | | | | | | | | |`)
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
        ...m("restoreRate", "rec/s", restoreMissing),
        ...m("peakRssMiB", "MiB"),
      ].join(" | ")} | ${r.ceiling ? "n/a (perf tool)" : verified || "–"} |`,
    )
  }
  L.push("")
  if (meta.chart !== undefined) {
    L.push(`![throughput and p99 latency](${meta.chart})`)
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
  L.push(
    "- **throughput**: input records / (time the output's high watermark reached its final value, i.e. the last output " +
      "(and, for transactions, its commit marker) was written − the contender's first read). Completion = the group's " +
      "committed offsets at the input's end; then the output is read read_committed and each key's values must run 1..n.",
  )
  L.push(
    "- **p50/p99**: fresh topics, the harness produces at a fixed rate; latency of a record = when its output (key, count) " +
      "is read read_committed − when the record was handed to the producer. Includes the harness's own producer and consumer.",
  )
  L.push(
    "- **restore**: after the throughput run the process is SIGKILLed, its state directory deleted, and it is restarted " +
      "on the same group; changelog records applied / (restore-end − restore-start) as the contender reports them.",
  )
  L.push("- **peak RSS**: highest resident set of the processing process tree during the throughput run (sampled every 200 ms, and VmHWM).")
  L.push("- **output check**: `exact` = every key's counts 1..n, no duplicates; `complete (+d dup)` = correct final counts with at-least-once duplicates.")
  L.push("- kafka-perf rows are the machine's ceiling measured by Kafka's own tools; see bench/README.md for their latency definitions.")
  L.push("")
  L.push(`Command: \`${meta.command}\``)
  L.push("")
  return L.join("\n")
}

/** A plain-text table for the terminal. */
export const renderText = (reports: ReadonlyArray<ContenderReport>): string => {
  const base = baselineOf(reports)
  const sums = new Map(reports.map((r) => [r.name, summarize(r)]))
  const b = base === undefined ? undefined : sums.get(base)
  const rows: string[][] = [["contender", "throughput rec/s", "×", "p50 ms", "p99 ms", "×p99", "restore rec/s", "peak RSS MiB"]]
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
      cell(s.restoreRate, "rec/s", r.hasState ? "–" : "n/a"),
      cell(s.peakRssMiB, "MiB", "–"),
    ])
  }
  const widths = rows[0]?.map((_, i) => Math.max(...rows.filter((r) => r.length > 2).map((r) => (r[i] ?? "").length))) ?? []
  return rows
    .map((r) => (r.length <= 2 ? `${(r[0] ?? "").padEnd(widths[0] ?? 0)}  ${r[1] ?? ""}` : r.map((c, i) => c.padEnd(widths[i] ?? 0)).join("  ")))
    .join("\n")
}
