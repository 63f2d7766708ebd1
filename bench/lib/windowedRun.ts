/**
 * One throughput run of the windowed job (bench/lib/windowed.ts; bench/README.md, "Windowed
 * job"): preload the input stamped with event times, start the contender's windowed app, produce
 * the closers once its consumer group has committed the whole input, and wait until it has
 * emitted as many final results as expected. Throughput = input records / (the moment the
 * output's high watermark reached its final value − the contender's first read). Then the
 * contender is killed and its final results, read read_committed, are checked exactly against
 * the expected ones (each window once, with its count, nothing else).
 */
import { mkdirSync } from "node:fs"
import { cpus, loadavg } from "node:os"
import { join } from "node:path"
import type { Admin, Kafka } from "kafkajs"
import type { ProcessContender } from "../contenders/types.ts"
import { createTopics, topicEnds, WatermarkTimeline } from "./kafka.ts"
import type { AppProcess, Command } from "./proc.ts"
import type { RunResult } from "./report.ts"
import type { ClientConfigFiles } from "./security.ts"
import { fmtInt, sleep } from "./stats.ts"
import { inputConsumedBy, preloadWindowed, produceClosers, ResultsReader, type WindowedInput, type WindowedWorkload } from "./windowed.ts"

export interface WindowedRunCtx {
  readonly kafka: Kafka
  readonly admin: Admin
  readonly brokers: string
  readonly clientConfig: ClientConfigFiles | undefined
  readonly w: WindowedWorkload
  readonly seq: Uint32Array
  readonly input: WindowedInput
  readonly workDir: string
  readonly commitIntervalMs: number
  readonly timeoutMs: number
  /** Ends the app after the run: a kill, or a graceful stop when profiling (so node writes its profile). */
  readonly endPhase: (app: AppProcess) => Promise<unknown>
  readonly log: (m: string) => void
}

/** Once the closers are out: give up when no new final result arrived for this long. */
const STALL_MS = 300_000

export const runWindowed = async (
  c: ProcessContender,
  run: number,
  prefix: string,
  x: WindowedRunCtx,
  spawn: (cmd: Command, logFile: string) => AppProcess,
): Promise<RunResult> => {
  const notes: string[] = []
  const out: { -readonly [K in keyof RunResult]: RunResult[K] } = { run, notes }
  if (c.windowed === undefined) return { run, notes: [`${c.name} has no windowed app`] }
  const input = `${prefix}.in`
  const output = `${prefix}.out`
  const stateDir = join(x.workDir, `${c.name}-r${run}`, "state")
  const logFile = join(x.workDir, `${c.name}-r${run}.log`)
  mkdirSync(stateDir, { recursive: true })

  await createTopics(x.admin, [input, output], x.w.partitions)
  const preloadSec = await preloadWindowed(x.kafka, input, x.w, x.seq, x.input)
  x.log(`   preloaded ${fmtInt(x.w.records)} records in ${preloadSec.toFixed(1)} s`)
  const inputEnds = await topicEnds(x.admin, input)

  const load0 = loadavg()[0] ?? 0
  const app = spawn(
    c.windowed({
      brokers: x.brokers,
      input,
      output,
      group: prefix,
      stateDir,
      commitIntervalMs: x.commitIntervalMs,
      clientConfig: x.clientConfig,
      graceMs: x.w.graceMs,
    }),
    logFile,
  )
  const timeline = new WatermarkTimeline(x.admin, output, 50)
  const reader = await ResultsReader.start(x.kafka, output)
  try {
    return await measure(c, app, timeline, reader, { input, output, logFile, inputEnds, load0, prefix, out, notes }, x)
  } finally {
    await reader.close()
  }
}

const measure = async (
  c: ProcessContender,
  app: AppProcess,
  timeline: WatermarkTimeline,
  reader: ResultsReader,
  r: {
    readonly input: string
    readonly output: string
    readonly logFile: string
    readonly inputEnds: ReadonlyMap<number, number>
    readonly load0: number
    readonly prefix: string
    readonly out: { -readonly [K in keyof RunResult]: RunResult[K] }
    readonly notes: string[]
  },
  x: WindowedRunCtx,
): Promise<RunResult> => {
  const { input, output, logFile, inputEnds, load0, prefix, out, notes } = r
  const expected = x.input.expected.size
  const deadline = Date.now() + x.timeoutMs
  let consumer: string | undefined
  let closersAt: number | undefined
  let done = false
  let lastRecords = 0
  let lastChange = Date.now()
  try {
    while (Date.now() < deadline && app.alive()) {
      if (closersAt === undefined) {
        consumer = await inputConsumedBy(x.admin, prefix, input, inputEnds, undefined).catch(() => undefined)
        if (consumer !== undefined) {
          closersAt = Date.now()
          lastChange = closersAt
          await produceClosers(x.kafka, input, x.w, x.input)
          x.log(`   input consumed (group ${consumer}): ${fmtInt(x.w.groupKeys)} closers produced`)
        }
      } else {
        if (reader.records >= expected) {
          done = true
          break
        }
        if (reader.records !== lastRecords) {
          lastRecords = reader.records
          lastChange = Date.now()
        } else if (Date.now() - lastChange > STALL_MS) {
          notes.push(`no new final result for ${STALL_MS / 1000} s after the closers (${fmtInt(reader.records)} of ${fmtInt(expected)})`)
          break
        }
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
  if (!done) {
    if (closersAt === undefined) notes.push(app.alive() ? `did not consume its input within ${x.timeoutMs / 1000} s` : `process exited early (see ${logFile})`)
    else if (!app.alive()) notes.push(`process exited early (see ${logFile})`)
  } else if (end !== undefined && end > start) {
    out.throughput = x.w.records / ((end - start) / 1000)
    notes.push(
      `${c.name}: input consumed ${(((closersAt ?? start) - start) / 1000).toFixed(2)} s after the first read, ` +
        `the last final result committed at ${((end - start) / 1000).toFixed(2)} s`,
    )
  }
  const load1 = loadavg()[0] ?? 0
  notes.push(`1-min load ${load0.toFixed(2)} at the start, ${load1.toFixed(2)} at the end (${cpus().length} cores)`)
  await x.endPhase(app)
  const check = await reader.finish(x.admin, output, x.input.expected, x.w.base, 15_000)
  out.verified = check.summary
  out.digest = check.digest
  if (!check.exact) {
    notes.push(`output check failed: ${check.summary}`)
    delete out.throughput
  }
  return out
}
