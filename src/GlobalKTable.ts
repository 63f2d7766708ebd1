/**
 * A table of every partition of a topic on every instance (Kafka Streams'
 * `GlobalKTable`): the latest value per key, a tombstone deleting it. Each
 * instance loads the whole topic before its sub-topologies process a record,
 * then keeps it up to date as the topic grows, read committed; a stream joins
 * it with `KStream.globalJoin` and `KStream.globalLeftJoin` on a key it maps
 * each record to, so the topic needs no co-partitioning with the stream
 * (reference data: regions, currencies, product catalogs).
 *
 * As in Kafka Streams, a global table is read apart from the tasks'
 * transactions: a stream record is joined with the value this instance has
 * read by then, and the table's topic is its only copy (no changelog).
 *
 * @since 0.6.0
 */
import * as Pipeable from "effect/Pipeable"
import * as Graph from "./internal/streams/graph.ts"
import * as TableTopic from "./internal/streams/tableTopic.ts"
import type * as KStream from "./KStream.ts"
import type * as Topic from "./Topic.ts"

/**
 * @since 0.6.0
 * @category symbols
 */
export const TypeId: unique symbol = Symbol.for("skein/GlobalKTable")

/**
 * @since 0.6.0
 * @category symbols
 */
export type TypeId = typeof TypeId

/**
 * A global table with keys `K` and values `V`.
 *
 * @since 0.6.0
 * @category models
 */
export interface GlobalKTable<out K, out V> extends Pipeable.Pipeable {
  readonly [TypeId]: {
    readonly _K: (_: never) => K
    readonly _V: (_: never) => V
  }
  /** @internal */
  readonly node: Graph.GlobalTableSource
}

const variance = { _K: (_: never) => _, _V: (_: never) => _ }

class GlobalTableValue<K, V> extends Pipeable.Class() implements GlobalKTable<K, V> {
  readonly [TypeId] = variance
  constructor(readonly node: Graph.GlobalTableSource) {
    super()
  }
}

/**
 * The global table of `topic`: every partition, on every instance. A record
 * without a key is skipped; a value that fails to decode is skipped with a
 * warning (a global table is read apart from any task, so it has no dead
 * letter topic).
 *
 * @example
 * ```ts
 * import { GlobalKTable } from "skein"
 *
 * const regions = GlobalKTable.from(Regions)
 * ```
 *
 * @since 0.6.0
 * @category constructors
 */
export const from = <K, V>(topic: Topic.Topic<K, V>, options?: KStream.Named): GlobalKTable<K, V> =>
  new GlobalTableValue<K, V>(Graph.globalTableSource(topic, TableTopic.tableView(topic), options?.name))

/**
 * True for a `GlobalKTable`.
 *
 * @since 0.6.0
 * @category guards
 */
export const isGlobalTable = (u: unknown): u is GlobalKTable<unknown, unknown> =>
  typeof u === "object" && u !== null && TypeId in u
