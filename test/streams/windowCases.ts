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
import { KGroupedStream, KStream, KTable, TimeWindowedKStream, TimeWindows, Topic, Topology, Windowed } from "../../src/index.ts"
import { generateInputs } from "../oracle/inputs.ts"
import type { InputRecord, OutputRecord } from "../oracle/kafkaStreams.ts"

export const seeds: ReadonlyArray<number> = [11, 29]
export const count = 1_000

export interface WindowCase {
  /** The oracle's topology (`-suppressed`: final results). */
  readonly topology: string
  readonly params: Readonly<Record<string, number>>
  readonly sizeMs: number
  readonly values: "string" | "number"
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
  generateInputs({ seed, count, startMs: 1_000_000, values: c.values, valueCardinality: 100 }).map((r) => ({
    ...r,
    key: r.key === null ? null : `s${seed}-${r.key}`,
    timestamp: Math.floor(r.timestamp / 50) * 50
  }))

export const outputTopic = (name: string) =>
  Topic.make({ name, key: Windowed.json(Schema.String), value: Topic.json(Schema.Number) })

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

export const cases: ReadonlyArray<WindowCase> = [
  countCase("onWindowUpdate"),
  countCase("onWindowClose"),
  sumCase("onWindowUpdate"),
  sumCase("onWindowClose")
]

/** The input topic of a case: string or long values, as the oracle reads them. */
export const inputTopic = (c: WindowCase, name: string): Topic.Topic<string, string> | Topic.Topic<string, number> =>
  c.values === "number"
    ? Topic.make({ name, key: Schema.String, value: Topic.json(Schema.Number) })
    : Topic.make({ name, key: Schema.String, value: Schema.String })

/** One result as compared: `key@start/end=value@timestamp`. */
export type Line = string

/** Kafka Streams' results per record key (its output key is `key@start`; the end is start + size). */
export const expectedPerKey = (c: WindowCase, records: ReadonlyArray<OutputRecord>): Map<string, Array<Line>> => {
  const perKey = new Map<string, Array<Line>>()
  for (const r of records) {
    const [key, start] = String(r.key).split("@") as [string, string]
    const line = `${key}@${start}/${Number(start) + c.sizeMs}=${r.value}@${r.timestamp}`
    perKey.set(key, [...(perKey.get(key) ?? []), line])
  }
  return perKey
}

/** Skein's results per record key. */
export const actualPerKey = (
  records: ReadonlyArray<{ readonly key: Windowed.Windowed<string> | null; readonly value: number | null; readonly timestamp: number | undefined }>
): Map<string, Array<Line>> => {
  const perKey = new Map<string, Array<Line>>()
  for (const r of records) {
    const key = r.key?.key ?? "null"
    const line = `${key}@${r.key?.window.start}/${r.key?.window.end}=${r.value}@${r.timestamp}`
    perKey.set(key, [...(perKey.get(key) ?? []), line])
  }
  return perKey
}

/** Both sides' results, per key, sorted by key: equal when the outputs agree per key. */
export const sortedEntries = (perKey: Map<string, Array<Line>>): Array<[string, Array<Line>]> =>
  [...perKey].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
