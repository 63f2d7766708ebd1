/**
 * The windowed app's verifier (`test/apps/windowedTopology.ts`: groupBy to a second key, tumbling
 * count, final results only). Like `verifier.ts`, it shares no code path with the runtime: the
 * input and the output are read with the raw reader (`wire.ts`, transactions resolved from the
 * log's markers), and the expected final results are recomputed from the input topic (the record
 * of truth) with the timestamps it holds (the records' event times).
 *
 * Expected: per second key (`windowGroup` of the value) and tumbling window `[start, start +
 * size)` of the input's records, one final result whose value is the number of input records
 * in it (a record the driver wrote twice counts twice, as the app reads it twice), whose window
 * end is `start + size`, and whose timestamp is the largest event time of those records. The
 * closers (records the harness sends after the input, late in event time, to close the last
 * windows) are not input: their own windows never close, so they must emit nothing.
 *
 * - `duplicates`: results beyond the first of a window (emitted twice: stream time or a
 *   window's state went back, or a transaction committed twice);
 * - `lost`: expected windows without a result;
 * - `stateMismatches`: wrong counts, ends or timestamps, windows not in the input, unreadable
 *   records, records in the dead letter topic (late: dropped from a window that had closed,
 *   so stream time ran ahead of the grace the harness gives), open transactions.
 */
import { windowGroup } from "../apps/model.ts"
import type { Check } from "./verifier.ts"
import type { PartitionLog } from "./wire.ts"

/** A final result as the input says it must be. */
export interface ExpectedWindow {
  readonly group: string
  readonly start: number
  count: number
  maxTimestamp: number
}

/** The expected final results, by `<group>@<window start>`. */
export type Expected = ReadonlyMap<string, ExpectedWindow>

const windowId = (group: string, start: number) => `${group}@${start}`

const parse = (text: string | null): unknown => {
  if (text === null) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

/** The expected final results of the input topic's records (unreadable ones are the input check's problem). */
export const expectedWindows = (input: ReadonlyArray<PartitionLog>, windowMs: number, groups: number): Expected => {
  const expected = new Map<string, ExpectedWindow>()
  for (const log of input) {
    for (const r of log.records) {
      const value = parse(r.value)
      if (!isObject(value) || typeof value["v"] !== "number") continue
      const group = windowGroup(value["v"], groups)
      const start = Math.floor(r.timestamp / windowMs) * windowMs
      const id = windowId(group, start)
      const window = expected.get(id)
      if (window === undefined) expected.set(id, { group, start, count: 1, maxTimestamp: r.timestamp })
      else {
        window.count++
        window.maxTimestamp = Math.max(window.maxTimestamp, r.timestamp)
      }
    }
  }
  return expected
}

/** A final result as the output holds it. */
interface Result {
  readonly group: string
  readonly start: number
  readonly end: number
  readonly count: number
  readonly timestamp: number
  readonly partition: number
  readonly offset: number
}

const decodeResult = (partition: number, r: PartitionLog["records"][number]): Result | undefined => {
  const key = parse(r.key)
  const count = parse(r.value)
  if (!isObject(key) || typeof key["key"] !== "string" || !isObject(key["window"]) || typeof count !== "number") return undefined
  const { start, end } = key["window"]
  if (typeof start !== "number" || typeof end !== "number") return undefined
  return { group: key["key"], start, end, count, timestamp: r.timestamp, partition, offset: r.offset }
}

const logProblems = (name: string, logs: ReadonlyArray<PartitionLog>): Array<string> =>
  logs.flatMap((l) => [
    ...(l.openTransactions > 0 ? [`${name}-${l.partition}: ${l.openTransactions} open transaction(s)`] : []),
    ...(l.lastStableOffset !== l.highWatermark
      ? [`${name}-${l.partition}: last stable offset ${l.lastStableOffset} != high watermark ${l.highWatermark}`]
      : [])
  ])

/**
 * Checks the windowed app's output (and dead letter topic) against `expected`. `closersAt`: the
 * output's high watermark per partition when the closers were sent, to tell the results emitted
 * while the input ran (and the faults with it) from those the closers brought out.
 */
export const checkWindowed = (params: {
  readonly name: string
  readonly expected: Expected
  readonly windowMs: number
  readonly output: ReadonlyArray<PartitionLog>
  readonly deadLetters: ReadonlyArray<PartitionLog>
  readonly closersAt: ReadonlyMap<number, number>
}): Check => {
  const { expected, windowMs } = params
  const seen = new Map<string, number>()
  let records = 0
  let unreadable = 0
  let duplicates = 0
  let wrongCounts = 0
  let wrongWindows = 0
  let wrongTimestamps = 0
  let unexpected = 0
  let beforeClosers = 0
  const examples: Array<string> = []
  const example = (line: string) => {
    if (examples.length < 5) examples.push(`${params.name}: ${line}`)
  }
  for (const log of params.output) {
    for (const r of log.records) {
      records++
      const result = decodeResult(log.partition, r)
      if (result === undefined) {
        unreadable++
        example(`unreadable record ${log.partition}@${r.offset}: key ${r.key} value ${r.value}`)
        continue
      }
      if (r.offset < (params.closersAt.get(log.partition) ?? 0)) beforeClosers++
      const id = windowId(result.group, result.start)
      const times = (seen.get(id) ?? 0) + 1
      seen.set(id, times)
      if (times > 1) {
        duplicates++
        example(`window ${id} emitted ${times} times (this one ${result.partition}@${result.offset}, count ${result.count})`)
        continue
      }
      const want = expected.get(id)
      if (want === undefined) {
        unexpected++
        example(`window ${id} (count ${result.count}) is not a window of the input`)
        continue
      }
      if (result.end !== result.start + windowMs || result.start % windowMs !== 0) {
        wrongWindows++
        example(`window ${id} has end ${result.end}, expected ${result.start + windowMs}`)
      }
      if (result.count !== want.count) {
        wrongCounts++
        example(`window ${id}: count ${result.count}, expected ${want.count}`)
      }
      if (result.timestamp !== want.maxTimestamp) {
        wrongTimestamps++
        example(`window ${id}: timestamp ${result.timestamp}, expected ${want.maxTimestamp} (its latest record's)`)
      }
    }
  }
  let lost = 0
  for (const [id, want] of expected) {
    if (seen.has(id)) continue
    lost++
    example(`window ${id} (count ${want.count}) has no final result`)
  }
  const late = params.deadLetters.reduce((n, l) => n + l.records.length, 0)
  const problems = [...logProblems(params.name, params.output), ...logProblems(`${params.name} dead letters`, params.deadLetters)]
  const committed = params.output.reduce((n, l) => n + l.committedTransactions, 0)
  const aborted = params.output.reduce((n, l) => n + l.abortedTransactions, 0)
  const abortedRecords = params.output.reduce((n, l) => n + l.abortedRecords, 0)
  const details = [
    `${params.name}: ${expected.size} windows expected, ${seen.size} emitted (${beforeClosers} of ${records} results before the closers, while the input and the faults ran)`,
    `${params.name}: ${committed} committed and ${aborted} aborted transactions (${abortedRecords} aborted records)`,
    ...(late > 0
      ? [`${params.name}: ${late} record(s) in the dead letter topic (late past the grace: raise --grace, or stream time ran ahead)`]
      : []),
    ...(wrongCounts + wrongWindows + wrongTimestamps + unexpected + unreadable > 0
      ? [
        `${params.name}: ${wrongCounts} wrong counts, ${wrongWindows} wrong window ends, ${wrongTimestamps} wrong timestamps, ` +
        `${unexpected} windows not in the input, ${unreadable} unreadable records`
      ]
      : []),
    ...problems,
    ...examples
  ]
  return {
    name: params.name,
    records,
    duplicates,
    lost,
    stateMismatches: wrongCounts + wrongWindows + wrongTimestamps + unexpected + unreadable + late + problems.length,
    details
  }
}
