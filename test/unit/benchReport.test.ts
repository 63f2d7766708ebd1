/**
 * The benchmark's report (bench/lib/report.ts) and contender selection (bench/lib/select.ts),
 * issue 36: the restore's headline is the time to the restored state of the same input, with the
 * changelog records and their rate beside it; `--only skein-eos` is the Node row alone.
 */
import { assert, describe, it } from "@effect/vitest"
import { renderMarkdown, renderText, restoreMsOf, summarize, type ContenderReport, type ReportMeta, type RunResult } from "../../bench/lib/report.ts"
import { selectContenders } from "../../bench/lib/select.ts"

const meta: ReportMeta = {
  date: "2026-12-04",
  brokerOrigin: "test",
  records: 1_000_000,
  partitions: 48,
  keys: 20_000,
  valueBytes: 100,
  runs: 2,
  rate: 1000,
  latencySeconds: 20,
  warmupSeconds: 5,
  commitIntervalMs: 100,
  machine: "test",
  command: "npm run bench",
  phases: ["throughput", "restore"],
}

const contender = (name: string, runs: ReadonlyArray<RunResult>, extra: Partial<ContenderReport> = {}): ContenderReport => ({
  name,
  description: name,
  hasState: true,
  ceiling: false,
  runs,
  ...extra,
})

// Issue 36's figures: Skein restored 106k changelog records in 1.37 s, Kafka Streams 1M in 2.3-3.5 s.
const skein = contender("skein-eos", [
  { run: 1, throughput: 100_000, restoreMs: 1370, restoreRecords: 106_000, restoreRate: 106_000 / 1.37, notes: [] },
  { run: 2, throughput: 110_000, restoreMs: 1470, restoreRecords: 106_000, restoreRate: 106_000 / 1.47, notes: [] },
])
const streams = contender("kafka-streams-eos", [
  { run: 1, throughput: 70_000, restoreMs: 2300, restoreRecords: 1_000_000, restoreRate: 1_000_000 / 2.3, notes: [] },
  { run: 2, throughput: 72_000, restoreMs: 3500, restoreRecords: 1_000_000, restoreRate: 1_000_000 / 3.5, notes: [] },
])

/** The cells of the markdown table row of `name`. */
const row = (md: string, name: string): ReadonlyArray<string> => {
  const line = md.split("\n").find((l) => l.startsWith(`| ${name} |`))
  assert.isDefined(line, `no row for ${name}`)
  return (line ?? "").split("|").slice(1, -1).map((c) => c.trim())
}

const header = (md: string): ReadonlyArray<string> => row(md, "contender")

describe("bench report: restore time", () => {
  it("takes restoreMs, or records / rate from results written before it", () => {
    assert.strictEqual(restoreMsOf({ run: 1, restoreMs: 1370, restoreRecords: 1, restoreRate: 1, notes: [] }), 1370)
    const old = restoreMsOf({ run: 1, restoreRecords: 106_000, restoreRate: 106_000 / 1.37, notes: [] })
    assert.isDefined(old)
    assert.closeTo(old ?? 0, 1370, 1e-6)
    assert.isUndefined(restoreMsOf({ run: 1, restoreRecords: 106_000, restoreRate: 0, notes: [] }))
    assert.isUndefined(restoreMsOf({ run: 1, notes: [] }))
  })

  it("summarizes the restore time, rate and records as medians", () => {
    const s = summarize(streams)
    assert.strictEqual(s.restoreMs?.median, 2900)
    assert.strictEqual(s.restoreMs?.min, 2300)
    assert.strictEqual(s.restoreMs?.max, 3500)
    assert.strictEqual(s.restoreRecords?.median, 1_000_000)
  })

  it("puts the time to the same input's state first, its ratio to skein-eos, then the rate and records", () => {
    const md = renderMarkdown(meta, [skein, streams])
    const h = header(md)
    const col = h.indexOf("restore ms (state of 1,000,000 inputs)")
    assert.isAbove(col, 0, h.join(" | "))
    assert.strictEqual(h[col + 1], "×")
    assert.strictEqual(h[col + 2], "restore rec/s")
    assert.strictEqual(h[col + 3], "changelog records restored")
    const k = row(md, "kafka-streams-eos")
    assert.strictEqual(k.length, h.length)
    assert.strictEqual(k[col], "2,900 (2,300–3,500)")
    // 2,900 ms against skein-eos's 1,420: the ratio of the times.
    assert.strictEqual(k[col + 1], "2.04×")
    assert.strictEqual(k[col + 2], "360,248 (285,714–434,783)")
    assert.strictEqual(k[col + 3], "1,000,000")
    const s = row(md, "skein-eos")
    assert.strictEqual(s[col], "1,420 (1,370–1,470)")
    assert.strictEqual(s[col + 1], "1.00×")
    assert.strictEqual(s[col + 3], "106,000")
    assert.include(md, "the time to the restored state of the same 1,000,000 input records")
  })

  it("renders results written before restoreMs with the time from records / rate", () => {
    const old = contender("skein-eos", [{ run: 1, throughput: 1, restoreRecords: 106_000, restoreRate: 106_000 / 1.37, notes: [] }])
    const md = renderMarkdown({ ...meta, runs: 1 }, [old])
    const h = header(md)
    assert.strictEqual(row(md, "skein-eos")[h.indexOf("restore ms (state of 1,000,000 inputs)")], "1,370")
  })

  it("keeps the columns of unavailable and stateless rows, saying why a cell is empty", () => {
    const md = renderMarkdown(meta, [
      skein,
      contender("skein-eos-deno", [], { unavailable: "node_modules/.bin/deno is missing" }),
      contender("kafkajs-loop", [{ run: 1, throughput: 1, notes: [] }], { hasState: false }),
    ])
    const h = header(md)
    assert.strictEqual(row(md, "skein-eos-deno").length, h.length)
    const loop = row(md, "kafkajs-loop")
    assert.strictEqual(loop.length, h.length)
    assert.strictEqual(loop[h.indexOf("restore ms (state of 1,000,000 inputs)")], "n/a (no state)")
  })

  it("shows the restore time and its ratio in the terminal table", () => {
    const text = renderText([skein, streams]).split("\n")
    assert.include(text[0] ?? "", "restore ms")
    assert.include(text[2] ?? "", "2,900 (2,300–3,500)")
    assert.include(text[2] ?? "", "2.04×")
  })
})

describe("bench --only", () => {
  const all = ["skein-eos", "skein-eos-bun", "skein-eos-deno", "skein-alos", "kafkajs-loop", "kafka-perf-produce", "kafka-perf-consume"].map(
    (name) => ({ name }),
  )
  const names = (only: ReadonlyArray<string> | undefined) => selectContenders(all, only).map((c) => c.name)

  it("selects a contender by its exact name, not the others it prefixes", () => {
    assert.deepStrictEqual(names(["skein-eos"]), ["skein-eos"])
    assert.deepStrictEqual(names(["skein-eos", "skein-eos-deno"]), ["skein-eos", "skein-eos-deno"])
  })

  it("selects by prefix when no contender has that name, in the harness's order", () => {
    assert.deepStrictEqual(names(["kafka-perf", "skein"]), ["skein-eos", "skein-eos-bun", "skein-eos-deno", "skein-alos", "kafka-perf-produce", "kafka-perf-consume"])
    assert.deepStrictEqual(names(["skein-eos-"]), ["skein-eos-bun", "skein-eos-deno"])
    assert.deepStrictEqual(names(["nothing"]), [])
    assert.strictEqual(names(undefined).length, all.length)
  })
})
