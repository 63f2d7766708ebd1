/**
 * The table join cases of the differential tests (issue 32): table-table
 * joins (inner, left, outer; plain, and through a filter and a mapValues on
 * each side), an aggregation's table as a join input (stream-table and
 * table-table), a re-keyed stream joined with a table through the
 * repartition Skein inserts itself, foreign-key joins (inner, left; plain
 * and filtered: each `left` value "l" + n names the `right` key
 * "k" + (n % 14), none when n % 10 is 0), and the stream `left` joined with
 * the global table of `right` on that key (inner, left). Each names the oracle's topology
 * (test/oracle, `Topologies.java`: value `l + "+" + r`, `null` for a missing
 * side) and builds the same join in Skein.
 *
 * The input interleaves `left` and `right` records of 12 keys: updates that
 * change a key's value, tombstones (where the topic is a table), records
 * without a key (dropped by tables and aggregations; a stream's, joined with
 * `null` by a left stream-table join), and out-of-order timestamps (15% of
 * the records are up to 300 ms behind the largest so far: a table takes the
 * update anyway, and a join's timestamp is the larger of its sides').
 */
import { Schema } from "effect"
import { GlobalKTable, KGroupedStream, KStream, KTable, Topic, Topology } from "../../src/index.ts"
import { prng } from "../oracle/inputs.ts"
import type { InputRecord } from "../oracle/kafkaStreams.ts"

export const seeds: ReadonlyArray<number> = [11, 23, 47]
export const count = 1_500

export const Left = Topic.make({ name: "left", key: Schema.String, value: Schema.String })
export const Right = Topic.make({ name: "right", key: Schema.String, value: Schema.String })
export const Output = Topic.make({ name: "output", key: Schema.String, value: Schema.String })

export interface TableJoinCase {
  /** The oracle's topology. */
  readonly topology: string
  /** Tombstones in `left` and `right`: only where the topic is read as a table. */
  readonly tombstones: { readonly left: boolean; readonly right: boolean }
  /** How many sub-topologies Skein compiles it to. */
  readonly subTopologies: number
  /** The oracle topology's params (`Topologies.java`). */
  readonly params?: Readonly<Record<string, number>>
  /** The seeds it runs on (default `seeds`): a foreign-key join pipes three batches per record, so one each. */
  readonly seeds?: ReadonlyArray<number>
  /** The join in Skein, writing `output`. */
  readonly build: () => Topology.Topology<never, never>
}

const num = (value: string): number => Number(value.slice(1))
const joiner = (l: string | null, r: string | null): string => `${l ?? "null"}+${r ?? "null"}`

const leftTable = () => KTable.from(Left, { name: "left-table" })
const rightTable = () => KTable.from(Right, { name: "right-table" })
const filteredLeft = () => leftTable().pipe(KTable.filter((record) => num(record.value) % 3 !== 0))
const filteredRight = () =>
  rightTable().pipe(KTable.filter((record) => num(record.value) % 4 !== 0), KTable.mapValues((value) => value.toUpperCase()))
/** The largest value per key of the stream `right` (by number): Kafka Streams' groupByKey().reduce. */
const maxTable = () =>
  KStream.from(Right).pipe(
    KStream.groupByKey(),
    KGroupedStream.reduce((a: string, b: string) => num(a) >= num(b) ? a : b, { state: Schema.String, name: "right-max" })
  )

const toOutput = (name: string, table: KTable.KTable<string, string>) =>
  Topology.make(name, [KStream.to(KTable.toStream(table), Output)])
const streamToOutput = (name: string, stream: KStream.KStream<string, string>) => Topology.make(name, [KStream.to(stream, Output)])

/** The new key of a re-keyed stream record, as the oracle's `Topologies.rekey`: `k` + (n % 20) for the value `l` + n. */
const rekey = (value: string): string => `k${num(value) % 20}`

/** The foreign key a `left` value names in `right`, as the oracle's `Topologies.foreignKey`. */
const foreignKey = (value: string): string | null => num(value) % 10 === 0 ? null : `k${num(value) % 14}`

const tables = { left: true, right: true }
const rightStream = { left: true, right: false }
const streams = { left: false, right: false }

export const cases: ReadonlyArray<TableJoinCase> = [
  {
    topology: "table-table-join",
    tombstones: tables,
    subTopologies: 1,
    build: () => toOutput("table-table-join", KTable.join(leftTable(), rightTable(), joiner))
  },
  {
    topology: "table-table-left-join",
    tombstones: tables,
    subTopologies: 1,
    build: () => toOutput("table-table-left-join", KTable.leftJoin(leftTable(), rightTable(), joiner))
  },
  {
    topology: "table-table-outer-join",
    tombstones: tables,
    subTopologies: 1,
    build: () => toOutput("table-table-outer-join", KTable.outerJoin(leftTable(), rightTable(), joiner))
  },
  {
    topology: "table-table-filtered-join",
    tombstones: tables,
    subTopologies: 1,
    build: () => toOutput("table-table-filtered-join", KTable.join(filteredLeft(), filteredRight(), joiner))
  },
  {
    topology: "table-table-filtered-left-join",
    tombstones: tables,
    subTopologies: 1,
    build: () => toOutput("table-table-filtered-left-join", KTable.leftJoin(filteredLeft(), filteredRight(), joiner))
  },
  {
    topology: "table-table-filtered-outer-join",
    tombstones: tables,
    subTopologies: 1,
    build: () => toOutput("table-table-filtered-outer-join", KTable.outerJoin(filteredLeft(), filteredRight(), joiner))
  },
  {
    topology: "stream-aggregate-table-join",
    tombstones: streams,
    subTopologies: 1,
    build: () => streamToOutput("stream-aggregate-table-join", KStream.join(KStream.from(Left), maxTable(), joiner))
  },
  {
    topology: "stream-aggregate-table-left-join",
    tombstones: streams,
    subTopologies: 1,
    build: () => streamToOutput("stream-aggregate-table-left-join", KStream.leftJoin(KStream.from(Left), maxTable(), joiner))
  },
  {
    topology: "table-aggregate-table-outer-join",
    tombstones: rightStream,
    subTopologies: 1,
    build: () => toOutput("table-aggregate-table-outer-join", KTable.outerJoin(leftTable(), maxTable(), joiner))
  },
  {
    topology: "aggregate-table-left-join",
    tombstones: rightStream,
    subTopologies: 1,
    build: () => toOutput("aggregate-table-left-join", KTable.leftJoin(maxTable(), leftTable(), joiner))
  },
  {
    topology: "stream-rekeyed-table-join",
    tombstones: { left: false, right: true },
    subTopologies: 2,
    build: () =>
      streamToOutput(
        "stream-rekeyed-table-join",
        KStream.from(Left).pipe(
          KStream.selectKey((record) => rekey(record.value)),
          KStream.join(rightTable(), joiner, { key: Schema.String, value: Schema.String, name: "rekeyed" })
        )
      )
  },
  {
    topology: "stream-rekeyed-table-left-join",
    tombstones: { left: false, right: true },
    subTopologies: 2,
    build: () =>
      streamToOutput(
        "stream-rekeyed-table-left-join",
        KStream.from(Left).pipe(
          KStream.selectKey((record) => rekey(record.value)),
          KStream.leftJoin(rightTable(), joiner, { key: Schema.String, value: Schema.String, name: "rekeyed" })
        )
      )
  },
  {
    topology: "stream-versioned-table-join",
    params: { historyRetentionMs: 100 },
    tombstones: { left: false, right: true },
    subTopologies: 1,
    build: () =>
      streamToOutput(
        "stream-versioned-table-join",
        KStream.from(Left).pipe(
          KStream.join(KTable.from(Right, { name: "right-versioned", versioned: { historyRetention: 100 } }), joiner)
        )
      )
  },
  {
    topology: "stream-versioned-table-left-join",
    params: { historyRetentionMs: 1000 },
    tombstones: { left: false, right: true },
    subTopologies: 1,
    build: () =>
      streamToOutput(
        "stream-versioned-table-left-join",
        KStream.from(Left).pipe(
          KStream.leftJoin(KTable.from(Right, { name: "right-versioned", versioned: { historyRetention: 1000 } }), joiner)
        )
      )
  },
  {
    topology: "stream-global-table-join",
    tombstones: { left: false, right: true },
    subTopologies: 1,
    build: () =>
      streamToOutput(
        "stream-global-table-join",
        KStream.from(Left).pipe(
          KStream.globalJoin(GlobalKTable.from(Right, { name: "right-global" }), (record) => record.value === null ? null : foreignKey(record.value), joiner)
        )
      )
  },
  {
    topology: "stream-global-table-left-join",
    tombstones: { left: false, right: true },
    subTopologies: 1,
    build: () =>
      streamToOutput(
        "stream-global-table-left-join",
        KStream.from(Left).pipe(
          KStream.globalLeftJoin(GlobalKTable.from(Right, { name: "right-global" }), (record) => record.value === null ? null : foreignKey(record.value), joiner)
        )
      )
  },
  {
    topology: "fk-join",
    tombstones: tables,
    subTopologies: 2,
    seeds: [11],
    build: () => toOutput("fk-join", KTable.foreignKeyJoin(leftTable(), rightTable(), foreignKey, joiner))
  },
  {
    topology: "fk-left-join",
    tombstones: tables,
    subTopologies: 2,
    seeds: [23],
    build: () => toOutput("fk-left-join", KTable.foreignKeyLeftJoin(leftTable(), rightTable(), foreignKey, joiner))
  },
  {
    topology: "fk-filtered-join",
    tombstones: tables,
    subTopologies: 2,
    seeds: [47],
    build: () => toOutput("fk-filtered-join", KTable.foreignKeyJoin(filteredLeft(), filteredRight(), foreignKey, joiner))
  },
  {
    topology: "fk-filtered-left-join",
    tombstones: tables,
    subTopologies: 2,
    seeds: [11],
    build: () => toOutput("fk-filtered-left-join", KTable.foreignKeyLeftJoin(filteredLeft(), filteredRight(), foreignKey, joiner))
  }
]

/**
 * The input of a case for a seed: `count` records, half `left`, half `right`, 12 keys, 3% without
 * a key, 15% tombstones on a topic read as a table, 15% out of order.
 */
export const inputsOf = (seed: number, tombstones: TableJoinCase["tombstones"]): ReadonlyArray<InputRecord> => {
  const random = prng(seed)
  const records: Array<InputRecord> = []
  let latest = 1_000_000
  for (let i = 0; i < count; i++) {
    const outOfOrder = random.next() < 0.15
    if (!outOfOrder) latest += random.int(40) // 0 included: records of both topics with one timestamp
    const timestamp = outOfOrder ? latest - 1 - random.int(300) : latest
    const topic = random.next() < 0.5 ? "left" : "right"
    const key = random.next() < 0.03 ? null : `k${random.int(12)}`
    const deletes = random.next() < 0.15 && tombstones[topic]
    const value = deletes ? null : `${topic === "left" ? "l" : "r"}${random.int(1_000)}`
    records.push({ topic, key, value, timestamp })
  }
  return records
}
