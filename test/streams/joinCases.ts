/**
 * The stream-table join cases of the differential tests: the oracle's
 * `stream-table-join` and `stream-table-left-join` (test/oracle, Kafka
 * Streams' `left` stream joined with the `right` table, value `l+r`, `null`
 * for a missing table value) and the same joins in Skein, with the seeded
 * input both run on.
 *
 * The input interleaves both topics in timestamp order (Kafka Streams and
 * Skein pick a task's next record by timestamp: `taskOrder.ts`):
 * table updates that change a key's value, tombstones, table records without
 * a key (dropped by both), stream records of keys the table has, had and
 * never had, and stream records without a key (an inner join drops them, a
 * left join joins them with `null`). The re-keyed cases give each stream
 * record a new key from its value before the join (through a repartition
 * topic), so its key and its partition change.
 */
import { Schema } from "effect"
import { KStream, KTable, Topic, Topology } from "../../src/index.ts"
import { prng } from "../oracle/inputs.ts"
import type { InputRecord } from "../oracle/kafkaStreams.ts"

export const seeds: ReadonlyArray<number> = [7, 19, 31]
export const count = 1_500

export interface JoinCase {
  /** The oracle's topology. */
  readonly topology: string
  readonly kind: "inner" | "left"
  /**
   * The stream is re-keyed by its value first (`rekey`) and repartitioned (`{applicationId}-rekeyed-repartition`)
   * before the join: two sub-topologies. Kafka Streams repartitions it automatically.
   */
  readonly rekeyed: boolean
}

export const cases: ReadonlyArray<JoinCase> = [
  { topology: "stream-table-join", kind: "inner", rekeyed: false },
  { topology: "stream-table-left-join", kind: "left", rekeyed: false },
  { topology: "stream-rekeyed-table-join", kind: "inner", rekeyed: true },
  { topology: "stream-rekeyed-table-left-join", kind: "left", rekeyed: true }
]

/** The new key of a re-keyed case's stream record, as the oracle's `Topologies.rekey`: `k` + (n % 20) for the value `l` + n. */
export const rekey = (value: string): string => `k${Number(value.slice(1)) % 20}`

/** The input for a seed: `count` records of `left` (60%) and `right` (40%), timestamps never decreasing. */
export const inputsOf = (seed: number): ReadonlyArray<InputRecord> => {
  const random = prng(seed)
  const keys = 20
  const records: Array<InputRecord> = []
  let timestamp = 1_000_000
  for (let i = 0; i < count; i++) {
    timestamp += random.int(40) // 0 included: records of both topics with one timestamp
    const table = random.next() < 0.4
    const key = random.next() < 0.03 ? null : `k${random.int(keys)}`
    if (table) {
      const value = random.next() < 0.15 ? null : `r${random.int(1_000)}`
      records.push({ topic: "right", key, value, timestamp })
    } else {
      records.push({ topic: "left", key, value: `l${random.int(1_000)}`, timestamp })
    }
  }
  return records
}

export const Left = Topic.make({ name: "left", key: Schema.String, value: Schema.String })
export const Right = Topic.make({ name: "right", key: Schema.String, value: Schema.String })
export const Output = Topic.make({ name: "output", key: Schema.String, value: Schema.String })

/** The case's join in Skein: `left` joined with the table of `right`, written to `output`. */
export const topologyOf = (c: JoinCase): Topology.Topology<never, never> => {
  const table = KTable.from(Right)
  const stream = c.rekeyed
    ? KStream.from(Left).pipe(
      KStream.selectKey((record) => rekey(record.value)),
      KStream.repartition({ key: Schema.String, value: Schema.String, name: "rekeyed" })
    )
    : KStream.from(Left)
  const joined = c.kind === "inner"
    ? KStream.join(stream, table, (l, r) => `${l}+${r}`)
    : KStream.leftJoin(stream, table, (l, r) => `${l}+${r ?? "null"}`)
  return Topology.make(c.topology, [KStream.to(joined, Output)])
}
