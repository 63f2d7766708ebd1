/**
 * The windowed cases of the differential tests: each a Kafka Streams
 * topology of the oracle (test/oracle) and the same topology in Skein, with
 * the seeded input both run on. Shared by the in-process run (TestDriver) and
 * the real-broker run.
 *
 * Outputs are compared per record key, in order: the record key's results
 * (window start and end, value, timestamp) as each side emitted them. Kafka
 * Streams orders final results of different keys by window end then key
 * bytes, Skein by window end then by the order the windows opened: the same
 * per key.
 */
import { Schema } from "effect"
import {
  KGroupedStream,
  KStream,
  KTable,
  SessionWindowedKStream,
  SessionWindows,
  SlidingWindows,
  TimeWindowedKStream,
  TimeWindows,
  Topic,
  Topology,
  Windowed
} from "../../src/index.ts"
import { generateInputs } from "../oracle/inputs.ts"
import type { InputRecord, OutputRecord } from "../oracle/kafkaStreams.ts"

export const seeds: ReadonlyArray<number> = [11, 29]
export const count = 1_000

export interface DeviationContext {
  readonly inputs: ReadonlyArray<InputRecord>
  readonly updates: ReadonlyArray<OutputRecord> | undefined
}

export interface WindowCase {
  /** The oracle's topology (`-suppressed`: final results). */
  readonly topology: string
  readonly params: Readonly<Record<string, number>>
  /** Fixed-size windows: the oracle's key is `key@start`; unset (sliding): `key@start/end`. */
  readonly sizeMs: number | undefined
  readonly values: "string" | "number"
  /** The first event time of the input (default 1,000,000; 0 exercises sliding windows' records before the time difference). */
  readonly startMs?: number
  /**
   * A deliberate deviation from Kafka Streams, applied to its output before the comparison
   * (docs/streams.md lists each): given its results in order, the inputs and (for final results)
   * its results emitting updates on the same input, what Skein emits.
   */
  readonly deviation?: (records: ReadonlyArray<OutputRecord>, context: DeviationContext) => ReadonlyArray<OutputRecord>
  /** For final results: the oracle topology emitting updates on the same input (`DeviationContext.updates`). */
  readonly updatesTopology?: string
  /**
   * The name of the repartition the stream re-keys through before its windowed aggregation
   * (`{applicationId}-{name}-repartition`): its topology has two sub-topologies. Unset: one.
   */
  readonly repartition?: string
  /** The same stream in Skein, reading `input` and writing `output` (keyed by `Windowed.json(Schema.String)`). */
  readonly stream: (input: Topic.Topic<string, string> | Topic.Topic<string, number>, output: string) => KStream.Sink
}

/** The case's stream as a topology of its own. */
export const topologyOf = (c: WindowCase, input: Topic.Topic<string, string> | Topic.Topic<string, number>, output: string) =>
  Topology.make(c.topology, [c.stream(input, output)])

/**
 * The input of a case for a seed: keys `s{seed}-k{n}`, so seeds can share a topic (on their own
 * partitions); timestamps rounded down to 50 ms, so that records land exactly on window bounds and
 * on close times (`end + grace == stream time`), where an off-by-one shows.
 */
export const inputsOf = (c: WindowCase, seed: number): ReadonlyArray<InputRecord> =>
  generateInputs({ seed, count, startMs: c.startMs ?? 1_000_000, values: c.values, valueCardinality: 100 }).map((r) => ({
    ...r,
    key: r.key === null ? null : `s${seed}-${r.key}`,
    timestamp: Math.floor(r.timestamp / 50) * 50
  }))

export const outputTopic = (name: string) =>
  Topic.make({ name, key: Windowed.json(Schema.String), value: Topic.json(Schema.Number) })

/** Session results: `null` (a tombstone) for a session merged into another. */
export const nullableOutputTopic = (name: string) =>
  Topic.make({ name, key: Windowed.json(Schema.String), value: Topic.json(Schema.NullOr(Schema.Number)) })

const tumbling = { sizeMs: 1_000, graceMs: 500 }
const hopping = { sizeMs: 1_000, advanceMs: 250, graceMs: 300 }

const countCase = (emit: "onWindowUpdate" | "onWindowClose"): WindowCase => ({
  topology: emit === "onWindowClose" ? "tumbling-count-suppressed" : "tumbling-count",
  params: tumbling,
  sizeMs: tumbling.sizeMs,
  values: "string",
  stream: (input, output) =>
    KStream.from(input as Topic.Topic<string, string>).pipe(
      KStream.groupByKey(),
      KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace(tumbling.sizeMs, tumbling.graceMs)),
      TimeWindowedKStream.count({ name: `counts-${emit}`, emit }),
      KTable.toStream,
      KStream.to(outputTopic(output))
    )
})

const sumCase = (emit: "onWindowUpdate" | "onWindowClose"): WindowCase => ({
  topology: emit === "onWindowClose" ? "hopping-sum-suppressed" : "hopping-sum",
  params: hopping,
  sizeMs: hopping.sizeMs,
  values: "number",
  stream: (input, output) =>
    KStream.from(input as Topic.Topic<string, number>).pipe(
      KStream.groupByKey(),
      KGroupedStream.windowedBy(
        TimeWindows.ofSizeAndGrace(hopping.sizeMs, hopping.graceMs).pipe(TimeWindows.advanceBy(hopping.advanceMs))
      ),
      TimeWindowedKStream.reduce((sum: number, value: number) => sum + value, { state: Schema.Number, name: `sums-${emit}`, emit }),
      KTable.toStream,
      KStream.to(outputTopic(output))
    )
})

/**
 * The new key of a re-keyed record (`groupBy`): its seed's prefix and its value's parity (`s11-m1`
 * for `v17`), as the oracle's `groupBy-tumbling-count` computes it (`Topologies.java`). Each seed's
 * two new keys hash to one partition of a two-partition repartition topic, the seed's own (seed 11's
 * to partition 0, seed 29's to 1: the broker test checks it), so each seed keeps a stream time of
 * its own downstream, as in Kafka Streams' TopologyTestDriver, which runs one seed at a time.
 */
export const parityKey = (key: string | null, value: string | null): string | null =>
  key === null || value === null ? null : `${key.slice(0, key.indexOf("-"))}-m${Number(value.slice(1)) % 2}`

/** Shorter windows than `tumbling`: two keys per seed after the re-key, and more windows. */
const regrouped = { sizeMs: 300, graceMs: 200 }

const groupByCountCase = (emit: "onWindowUpdate" | "onWindowClose"): WindowCase => ({
  topology: emit === "onWindowClose" ? "groupBy-tumbling-count-suppressed" : "groupBy-tumbling-count",
  params: regrouped,
  sizeMs: regrouped.sizeMs,
  values: "string",
  repartition: `by-parity-${emit}`,
  stream: (input, output) =>
    KStream.from(input as Topic.Topic<string, string>).pipe(
      KStream.groupBy((record) => parityKey(record.key, record.value), {
        key: Schema.String,
        value: Schema.String,
        name: `by-parity-${emit}`,
        partitions: seeds.length
      }),
      KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace(regrouped.sizeMs, regrouped.graceMs)),
      TimeWindowedKStream.count({ name: `parity-counts-${emit}`, emit }),
      KTable.toStream,
      KStream.to(outputTopic(output))
    )
})

const sliding = { timeDifferenceMs: 500, graceMs: 200 }

/**
 * Kafka Streams' sliding windows accept records up to and including stream time `end + grace`
 * (their end is inclusive), but its suppression emits a window once stream time reaches
 * `end + grace`: a record at that stream time updates a window already emitted, and the window is
 * emitted again. Skein emits each window once, when stream time passes `end + grace`, with its
 * final value: Kafka Streams' last emission of the window. A window whose `end + grace` is the
 * last stream time of the input has not closed in Skein.
 */
export const slidingFinalResults = (records: ReadonlyArray<OutputRecord>, context: DeviationContext): ReadonlyArray<OutputRecord> => {
  const streamTime = Math.max(...context.inputs.filter((r) => r.key !== null && r.value !== null).map((r) => r.timestamp))
  const end = (r: OutputRecord) => Number(String(r.key).split("/")[1])
  return records.filter((r, i) =>
    !records.slice(i + 1).some((later) => later.key === r.key) && end(r) + sliding.graceMs < streamTime
  )
}

const slidingCase = (emit: "onWindowUpdate" | "onWindowClose", startMs?: number): WindowCase => ({
  topology: emit === "onWindowClose" ? "sliding-count-suppressed" : "sliding-count",
  params: sliding,
  sizeMs: undefined,
  values: "string",
  ...(startMs === undefined ? {} : { startMs }),
  ...(emit === "onWindowClose" ? { deviation: slidingFinalResults } : {}),
  stream: (input, output) =>
    KStream.from(input as Topic.Topic<string, string>).pipe(
      KStream.groupByKey(),
      KGroupedStream.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(sliding.timeDifferenceMs, sliding.graceMs)),
      TimeWindowedKStream.count({ name: `sliding-counts-${emit}${startMs === undefined ? "" : `-${startMs}`}`, emit }),
      KTable.toStream,
      KStream.to(outputTopic(output))
    )
})

const session = { gapMs: 300, graceMs: 200 }

/**
 * Kafka Streams accepts a record whose session (merged with nothing) ends exactly at
 * `stream time - gap - grace`, but its session store (retention gap + grace, off by one) does not
 * keep that session: it emits an update for a session it forgets at once and, suppressed, a final
 * result for it (twice when that window had one already). Skein counts the record as late. Such an
 * update is a one-record session whose end plus gap plus grace is at most the stream time (the
 * largest timestamp Kafka Streams emitted before it).
 */
export const sessionPhantoms = (records: ReadonlyArray<OutputRecord>): Set<number> => {
  const phantoms = new Set<number>()
  let streamTime = -1
  records.forEach((r, i) => {
    const [start, end] = String(r.key).split("@")[1]!.split("/").map(Number) as [number, number]
    if (r.value !== null && start === end && end + session.gapMs + session.graceMs <= streamTime) phantoms.add(i)
    streamTime = Math.max(streamTime, r.timestamp)
  })
  return phantoms
}

const sessionUpdates = (records: ReadonlyArray<OutputRecord>): ReadonlyArray<OutputRecord> => {
  const phantoms = sessionPhantoms(records)
  return records.filter((_, i) => !phantoms.has(i))
}

/** Final results: for each phantom session of the updates run, its (last) final result is dropped. */
const sessionFinalResults = (records: ReadonlyArray<OutputRecord>, context: DeviationContext): ReadonlyArray<OutputRecord> => {
  const updates = context.updates ?? []
  const drop = [...sessionPhantoms(updates)].map((i) => String(updates[i]!.key))
  const kept = [...records]
  for (const window of drop) {
    let last = kept.length - 1
    while (last >= 0 && String(kept[last]!.key) !== window) last--
    if (last !== -1) kept.splice(last, 1)
  }
  return kept
}

const sessionCase = (emit: "onWindowUpdate" | "onWindowClose"): WindowCase => ({
  topology: emit === "onWindowClose" ? "session-count-suppressed" : "session-count",
  params: session,
  sizeMs: undefined,
  values: "string",
  ...(emit === "onWindowClose" ? { deviation: sessionFinalResults, updatesTopology: "session-count" } : { deviation: sessionUpdates }),
  stream: (input, output) =>
    KStream.from(input as Topic.Topic<string, string>).pipe(
      KStream.groupByKey(),
      KGroupedStream.windowedBy(SessionWindows.ofInactivityGapAndGrace(session.gapMs, session.graceMs)),
      SessionWindowedKStream.count({ name: `session-counts-${emit}`, emit }),
      KTable.toStream,
      KStream.to(nullableOutputTopic(output))
    )
})

export const cases: ReadonlyArray<WindowCase> = [
  countCase("onWindowUpdate"),
  countCase("onWindowClose"),
  sumCase("onWindowUpdate"),
  sumCase("onWindowClose"),
  slidingCase("onWindowUpdate"),
  slidingCase("onWindowClose"),
  // From the epoch: records before the time difference share the window [0, d] (Kafka Streams' processEarly).
  slidingCase("onWindowUpdate", 0),
  sessionCase("onWindowUpdate"),
  sessionCase("onWindowClose"),
  // Re-keyed through a repartition topic, then counted per window (final results: stream time crosses the repartition).
  groupByCountCase("onWindowClose")
]

/** The input topic of a case: string or long values, as the oracle reads them. */
export const inputTopic = (c: WindowCase, name: string): Topic.Topic<string, string> | Topic.Topic<string, number> =>
  c.values === "number"
    ? Topic.make({ name, key: Schema.String, value: Topic.json(Schema.Number) })
    : Topic.make({ name, key: Schema.String, value: Schema.String })

/** One result as compared: `key@start/end=value@timestamp`. */
export type Line = string

/**
 * Kafka Streams' results per record key (its output key is `key@start`, the end start + size, or
 * `key@start/end`), with the case's deviation applied.
 */
export const expectedPerKey = (
  c: WindowCase,
  oracle: ReadonlyArray<OutputRecord>,
  context: DeviationContext
): Map<string, Array<Line>> => {
  const records = c.deviation === undefined ? oracle : c.deviation(oracle, context)
  const perKey = new Map<string, Array<Line>>()
  for (const r of records) {
    const [key, window] = String(r.key).split("@") as [string, string]
    const bounds = c.sizeMs === undefined ? window : `${window}/${Number(window) + c.sizeMs}`
    const line = `${key}@${bounds}=${r.value}@${r.timestamp}`
    perKey.set(key, [...(perKey.get(key) ?? []), line])
  }
  return perKey
}

const WindowedKey = Schema.parseJson(Windowed.schema(Schema.String))
const decodeKey = Schema.decodeUnknownSync(WindowedKey)

/** Skein's results per record key, from the records as written (key JSON, value JSON or a tombstone). */
export const actualPerKey = (
  records: ReadonlyArray<{ readonly key: string | null; readonly value: string | null; readonly timestamp: number | undefined }>
): Map<string, Array<Line>> => {
  const perKey = new Map<string, Array<Line>>()
  for (const r of records) {
    const key = decodeKey(r.key)
    const value = r.value === null ? null : Number(r.value)
    const line = `${key.key}@${key.window.start}/${key.window.end}=${value}@${r.timestamp}`
    perKey.set(key.key, [...(perKey.get(key.key) ?? []), line])
  }
  return perKey
}

/** Both sides' results, per key, sorted by key: equal when the outputs agree per key. */
export const sortedEntries = (perKey: Map<string, Array<Line>>): Array<[string, Array<Line>]> =>
  [...perKey].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
