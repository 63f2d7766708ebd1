/**
 * Records grouped by key (`KStream.groupBy`, `KStream.groupByKey`), and the
 * aggregations over them: `count`, `reduce`, `aggregate`. Each keeps one
 * value per key in the task's state (changelogged, restored after fencing,
 * kept across restarts) and emits every update as a `KTable` change, in the
 * task's transaction.
 *
 * @since 0.4.0
 */
import { Option, Schema } from "effect"
import { dual } from "effect/Function"
import * as Graph from "./internal/streams/graph.ts"
import * as grouped from "./internal/streams/grouped.ts"
import type { Record } from "./KStream.ts"
import * as SessionWindows from "./SessionWindows.ts"
import type { SlidingWindows } from "./SlidingWindows.ts"
import type { TimeWindows } from "./TimeWindows.ts"

/**
 * @since 0.4.0
 * @category symbols
 */
export const TypeId: typeof grouped.GroupedTypeId = grouped.GroupedTypeId

/**
 * Records grouped by key, ready for an aggregation.
 *
 * @since 0.4.0
 * @category models
 */
export type KGroupedStream<K, V, E = never, R = never> = grouped.KGroupedStream<K, V, E, R>

/**
 * Options of an aggregation: its name, which names its state and the
 * sub-topology that keeps it (set it: a name given from the topology's shape
 * changes when the topology does).
 *
 * @since 0.4.0
 * @category models
 */
export interface Materialized {
  readonly name?: string | undefined
}

/** The DSL's type erasure, recovered: a record reaching the aggregate was typed by the grouping. */
const typed = <K, V>(record: Graph.StreamRecord): Record<K, V> => record as Record<K, V>

/**
 * The number of records per key (records without a key are dropped, with a
 * warning, as in Kafka Streams).
 *
 * @example
 * ```ts
 * import { KGroupedStream, KStream } from "skein"
 *
 * KStream.from(Orders).pipe(KStream.groupByKey(), KGroupedStream.count({ name: "order-counts" }))
 * ```
 *
 * @since 0.4.0
 * @category aggregations
 */
export const count = (options?: Materialized) =>
<K, V, E, R>(self: KGroupedStream<K, V, E, R>): grouped.KTable<K, number, E, R> =>
  grouped.table(Graph.aggregate(self.node, "count", {
    state: Schema.Number,
    add: (total: Option.Option<number>) => Option.getOrElse(total, () => 0) + 1
  }, options?.name))

/**
 * Combines the values of each key: the first value as it is, then
 * `combine(aggregate, value)` per record. `state` is the stored form of a
 * value (JSON of its encoded side).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { KGroupedStream, KStream } from "skein"
 *
 * KStream.from(Amounts).pipe(
 *   KStream.groupByKey(),
 *   KGroupedStream.reduce((sum, amount) => sum + amount, { state: Schema.Number, name: "totals" })
 * )
 * ```
 *
 * @since 0.4.0
 * @category aggregations
 */
export const reduce: {
  <V, I>(
    combine: (aggregate: V, value: V) => V,
    options: Materialized & { readonly state: Schema.Schema<V, I> }
  ): <K, E, R>(self: KGroupedStream<K, V, E, R>) => grouped.KTable<K, V, E, R>
  <K, V, E, R, I>(
    self: KGroupedStream<K, V, E, R>,
    combine: (aggregate: V, value: V) => V,
    options: Materialized & { readonly state: Schema.Schema<V, I> }
  ): grouped.KTable<K, V, E, R>
} = dual(
  3,
  <K, V, E, R, I>(
    self: KGroupedStream<K, V, E, R>,
    combine: (aggregate: V, value: V) => V,
    options: Materialized & { readonly state: Schema.Schema<V, I> }
  ): grouped.KTable<K, V, E, R> =>
    grouped.table(Graph.aggregate(self.node, "reduce", {
      state: options.state,
      add: (current: Option.Option<V>, record) => {
        const value = typed<K, V>(record).value
        return Option.isNone(current) ? value : combine(current.value, value)
      }
    }, options.name))
)

/**
 * Folds the records of each key into an aggregate: `initial()` for a key's
 * first record, then `add(aggregate, record)`. `state` is the aggregate's
 * stored form (JSON of its encoded side).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { KGroupedStream, KStream } from "skein"
 *
 * const Stats = Schema.Struct({ count: Schema.Number, sum: Schema.Number })
 * KStream.from(Amounts).pipe(
 *   KStream.groupByKey(),
 *   KGroupedStream.aggregate(() => ({ count: 0, sum: 0 }), (s, record) => ({ count: s.count + 1, sum: s.sum + record.value }), {
 *     state: Stats,
 *     name: "amount-stats"
 *   })
 * )
 * ```
 *
 * @since 0.4.0
 * @category aggregations
 */
export const aggregate: {
  <K, V, A, I>(
    initial: () => A,
    add: (aggregate: A, record: Record<K, V>) => A,
    options: Materialized & { readonly state: Schema.Schema<A, I> }
  ): <E, R>(self: KGroupedStream<K, V, E, R>) => grouped.KTable<K, A, E, R>
  <K, V, E, R, A, I>(
    self: KGroupedStream<K, V, E, R>,
    initial: () => A,
    add: (aggregate: A, record: Record<K, V>) => A,
    options: Materialized & { readonly state: Schema.Schema<A, I> }
  ): grouped.KTable<K, A, E, R>
} = dual(
  4,
  <K, V, E, R, A, I>(
    self: KGroupedStream<K, V, E, R>,
    initial: () => A,
    add: (aggregate: A, record: Record<K, V>) => A,
    options: Materialized & { readonly state: Schema.Schema<A, I> }
  ): grouped.KTable<K, A, E, R> =>
    grouped.table(Graph.aggregate(self.node, "aggregate", {
      state: options.state,
      add: (current: Option.Option<A>, record) => add(Option.getOrElse(current, initial), typed<K, V>(record))
    }, options.name))
)

/**
 * Groups each key's records further by window of event time
 * (`TimeWindows`: tumbling or hopping; `SlidingWindows`; `SessionWindows`, for a
 * `SessionWindowedKStream`), for a windowed aggregation
 * (`TimeWindowedKStream.count`, `reduce`, `aggregate`).
 *
 * @example
 * ```ts
 * import { KGroupedStream, KStream, TimeWindowedKStream, TimeWindows } from "skein"
 *
 * KStream.from(Orders).pipe(
 *   KStream.groupByKey(),
 *   KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace("1 minute", "10 seconds")),
 *   TimeWindowedKStream.count({ name: "orders-per-minute" })
 * )
 * ```
 *
 * @since 0.4.0
 * @category windowing
 */
export const windowedBy: {
  (windows: SessionWindows.SessionWindows): <K, V, E, R>(self: KGroupedStream<K, V, E, R>) => grouped.SessionWindowedKStream<K, V, E, R>
  (windows: TimeWindows | SlidingWindows): <K, V, E, R>(self: KGroupedStream<K, V, E, R>) => grouped.TimeWindowedKStream<K, V, E, R>
  <K, V, E, R>(self: KGroupedStream<K, V, E, R>, windows: SessionWindows.SessionWindows): grouped.SessionWindowedKStream<K, V, E, R>
  <K, V, E, R>(self: KGroupedStream<K, V, E, R>, windows: TimeWindows | SlidingWindows): grouped.TimeWindowedKStream<K, V, E, R>
} = dual(
  2,
  <K, V, E, R>(
    self: KGroupedStream<K, V, E, R>,
    windows: TimeWindows | SlidingWindows | SessionWindows.SessionWindows
  ): grouped.TimeWindowedKStream<K, V, E, R> | grouped.SessionWindowedKStream<K, V, E, R> =>
    SessionWindows.isSessionWindows(windows) ? grouped.sessions(self.node, windows) : grouped.windowed(self.node, windows)
)
