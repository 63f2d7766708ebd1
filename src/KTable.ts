/**
 * The latest value per key: here, what an aggregation keeps
 * (`KGroupedStream.count`, `reduce`, `aggregate`). `toStream` turns its
 * updates into a stream, one record per update (Kafka Streams without a
 * cache: every update is emitted).
 *
 * @since 0.4.0
 */
import * as Graph from "./internal/streams/graph.ts"
import * as grouped from "./internal/streams/grouped.ts"
import * as KStream from "./KStream.ts"

/**
 * @since 0.4.0
 * @category symbols
 */
export const TypeId: typeof grouped.TableTypeId = grouped.TableTypeId

/**
 * The latest value per key.
 *
 * @since 0.4.0
 * @category models
 */
export type KTable<K, V, E = never, R = never> = grouped.KTable<K, V, E, R>

/**
 * The table's updates as a stream: one record per update, keyed by the
 * table's key, with the update's value and the timestamp of the record that
 * made it.
 *
 * @example
 * ```ts
 * import { KGroupedStream, KStream, KTable } from "skein"
 *
 * KStream.from(Orders).pipe(KStream.groupByKey(), KGroupedStream.count(), KTable.toStream, KStream.to(Counts))
 * ```
 *
 * @since 0.4.0
 * @category conversions
 */
export const toStream = <K, V, E, R>(self: KTable<K, V, E, R>): KStream.KStream<K, V, E, R> =>
  KStream.fromNode(Graph.step(self.node, "toStream", false, (record) => [record], undefined))
