/**
 * One throughput run of the enrichment job (bench/lib/enrichment.ts; bench/README.md,
 * "Enrichment job"), in two starts of the contender's app on one group and state directory:
 *
 * 1. **Table load.** The table's topic (compacted) is preloaded and the stream's topic created
 *    empty; the app is started and runs until one of its consumer groups has committed the whole
 *    table topic (the table is in its store), then it is stopped gracefully (SIGTERM, waiting for
 *    it to exit: both keep their state across a clean stop).
 * 2. **Stream.** The stream's records are preloaded, and the app is started again on the same
 *    group and state directory: the table is loaded before any stream record exists, so neither
 *    contender can join a stream record before its table (Skein does not order a task's inputs by
 *    timestamp yet; Kafka Streams would). Throughput = stream records / (the moment the output's
 *    high watermark reached its final value − the contender's first read of a stream record), as
 *    in the count job; the run ends when the group has committed the whole stream topic.
 *
 * Then the contender is killed and its output, read read_committed, is checked: every stream
 * record's joined result once, with the table's final value (`checkJoined`).
 */
import { mkdirSync } from "node:fs"
import { cpus, loadavg } from "node:os"
import { join } from "node:path"
import type { Admin, Kafka } from "kafkajs"
import type { ProcessContender } from "../contenders/types.ts"
import { checkJoined, preloadStream, preloadTable, tableRecordCount, type EnrichmentWorkload } from "./enrichment.ts"
import { createTopics, topicEnds, WatermarkTimeline } from "./kafka.ts"
import type { AppProcess, Command } from "./proc.ts"
import type { RunResult } from "./report.ts"
import type { ClientConfigFiles } from "./security.ts"
import { fmtInt, sleep } from "./stats.ts"
import { inputConsumedBy } from "./windowed.ts"

export interface EnrichmentRunCtx {
  readonly kafka: Kafka
  readonly admin: Admin
  readonly brokers: string
  readonly clientConfig: ClientConfigFiles | undefined
  readonly w: EnrichmentWorkload
  /** The stream records' keys (indexes of the table's keys). */
  readonly seq: Uint32Array
  readonly workDir: string
  readonly commitIntervalMs: number
  readonly timeoutMs: number
  /** Ends the app after the run: a kill, or a graceful stop when profiling (so node writes its profile). */
  readonly endPhase: (app: AppProcess) => Promise<unknown>
  readonly log: (m: string) => void
}

/** Graceful stop after the table load: SIGTERM, then SIGKILL after this long. */
const STOP_GRACE_MS = 120_000

export const runEnrichment = async (
  c: ProcessContender,
  run: number,
  prefix: string,
  x: EnrichmentRunCtx,
  spawn: (cmd: Command, logFile: string) => AppProcess,
): Promise<RunResult> => {
  const notes: string[] = []
  const out: { -readonly [K in keyof RunResult]: RunResult[K] } = { run, notes }
  if (c.enrichment === undefined) return { run, notes: [`${c.name} has no enrichment app`] }
  const input = `${prefix}.in`
  const table = `${prefix}.table`
  const output = `${prefix}.out`
  const stateDir = join(x.workDir, `${c.name}-r${run}`, "state")
  const logFile = join(x.workDir, `${c.name}-r${run}.log`)
  mkdirSync(stateDir, { recursive: true })
  const command = c.enrichment({
    brokers: x.brokers,
    input,
    output,
    group: prefix,
    stateDir,
    commitIntervalMs: x.commitIntervalMs,
    clientConfig: x.clientConfig,
    table,
  })

  // 1. The table, loaded before any stream record exists.
  await createTopics(x.admin, [input, output], x.w.partitions)
  await createTopics(x.admin, [table], x.w.partitions, { "cleanup.policy": "compact" })
  const tableSec = await preloadTable(x.kafka, table, x.w)
  const tableEnds = await topicEnds(x.admin, table)
  const tableRecords = [...tableEnds.values()].reduce((s, e) => s + e, 0)
  x.log(`   preloaded the table: ${fmtInt(tableRecords)} records (${fmtInt(x.w.tableKeys)} keys) in ${tableSec.toFixed(1)} s`)
  if (tableRecords !== tableRecordCount(x.w.tableKeys)) notes.push(`the table topic has ${fmtInt(tableRecords)} records, not ${fmtInt(tableRecordCount(x.w.tableKeys))}`)
  const loader = spawn(command, logFile)
  const deadline = Date.now() + x.timeoutMs
  let group: string | undefined
  while (Date.now() < deadline && loader.alive() && group === undefined) {
    group = await inputConsumedBy(x.admin, prefix, table, tableEnds, undefined).catch(() => undefined)
    if (group === undefined) await sleep(250)
  }
  if (group === undefined) {
    notes.push(loader.alive() ? `the table was not loaded within ${x.timeoutMs / 1000} s` : `process exited while loading the table (see ${logFile})`)
    return out
  }
  const loadedAt = Date.now()
  const byItself = await loader.stop(STOP_GRACE_MS)
  notes.push(
    `table loaded ${((loadedAt - loader.spawnedAt) / 1000).toFixed(1)} s after the spawn (group ${group}); ` +
      `graceful stop ${((Date.now() - loadedAt) / 1000).toFixed(1)} s${byItself ? "" : ` (NOT clean: SIGKILLed after ${STOP_GRACE_MS / 1000} s)`}`,
  )

  // 2. The stream, joined to the loaded table.
  const streamSec = await preloadStream(x.kafka, input, x.w, x.seq)
  x.log(`   preloaded ${fmtInt(x.w.records)} stream records in ${streamSec.toFixed(1)} s`)
  const inputEnds = await topicEnds(x.admin, input)
  const load0 = loadavg()[0] ?? 0
  const app = spawn(command, logFile)
  const timeline = new WatermarkTimeline(x.admin, output, 50)
  let caughtUp = false
  let cpuAtEnd: number | undefined
  const streamDeadline = Date.now() + x.timeoutMs
  try {
    while (Date.now() < streamDeadline && app.alive()) {
      if ((await inputConsumedBy(x.admin, prefix, input, inputEnds, group).catch(() => undefined)) !== undefined) {
        caughtUp = true
        cpuAtEnd = app.cpuSeconds()
        break
      }
      await sleep(250)
    }
    await sleep(300)
  } finally {
    await timeline.stop()
  }
  out.peakRssMiB = app.peakRssMiB()
  const finalHw = timeline.last()
  const end = finalHw === undefined ? undefined : timeline.reachedAt(finalHw)
  const firstRead = app.event("first-read")?.ts
  if (firstRead === undefined) notes.push("no first-read event: throughput measured from process spawn")
  const start = firstRead ?? app.spawnedAt
  if (!caughtUp) {
    notes.push(app.alive() ? `did not consume the stream within ${x.timeoutMs / 1000} s` : `process exited early (see ${logFile})`)
  } else if (end !== undefined && end > start) {
    out.throughput = x.w.records / ((end - start) / 1000)
    // CPU per record, which other work on the machine inflates less than it cuts the rate: the process
    // tree's CPU seconds from its first read to the check that found the stream consumed.
    const cpuAtFirstRead = app.cpuAtEvent("first-read")
    if (cpuAtFirstRead !== undefined && cpuAtEnd !== undefined && cpuAtEnd > cpuAtFirstRead) {
      notes.push(
        `CPU ${(((cpuAtEnd - cpuAtFirstRead) * 1e6) / x.w.records).toFixed(1)} µs per stream record ` +
          `(${(cpuAtEnd - cpuAtFirstRead).toFixed(1)} CPU s of the process tree from its first read to the stream consumed)`,
      )
    }
    notes.push(
      `restart → first stream record read ${((start - app.spawnedAt) / 1000).toFixed(2)} s; ` +
        `the last output committed ${((end - start) / 1000).toFixed(2)} s after the first read`,
    )
  }
  const restored = app.events.filter((e) => e.event === "restore-end").pop()
  if (restored !== undefined) notes.push(`restored ${fmtInt(restored.records ?? 0)} changelog records on the restart`)
  const load1 = loadavg()[0] ?? 0
  notes.push(`1-min load ${load0.toFixed(2)} at the start, ${load1.toFixed(2)} at the end (${cpus().length} cores)`)
  await x.endPhase(app)
  const check = await checkJoined(x.kafka, x.admin, output, x.w, x.seq, 15_000)
  out.verified = check.summary
  out.digest = check.digest
  if (!check.exact) {
    notes.push(`output check failed: ${check.summary}`)
    delete out.throughput
  }
  return out
}
