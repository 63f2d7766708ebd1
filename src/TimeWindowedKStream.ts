/**
 * Records grouped by key and by window of event time
 * (`KGroupedStream.windowedBy`), and the windowed aggregations over them:
 * `count`, `reduce`, `aggregate`. Each keeps one aggregate per key and
 * window in its task's state (changelogged, restored after fencing, kept
 * across restarts) and emits, keyed by `Windowed<K>`, either every update
 * (`emit: "onWindowUpdate"`, the default) or each window's final result once
 * (`emit: "onWindowClose"`), when the task's stream time reaches the window's
 * end plus its grace, whichever key's record moved it there.
 *
 * A record that arrives once every window it belongs to has closed is late:
 * dropped, logged and counted in `skein_streams_late_records_total` (as
 * Kafka Streams drops it with its `dropped-records` metric), or, with
 * `late: "error"`, a `LateRecord` error for the topology's rules (the dead
 * letter topic with the reason in its `skein.error` header).
 *
 * @since 0.4.0
 */
import { Option, Schema } from "effect"
import { dual } from "effect/Function"
import * as Graph from "./internal/streams/graph.ts"
import * as grouped from "./internal/streams/grouped.ts"
import type { Record } from "./KStream.ts"
import type { Windowed } from "./Windowed.ts"

/**
 * @since 0.4.0
 * @category symbols
 */
export const TypeId: typeof grouped.WindowedTypeId = grouped.WindowedTypeId

/**
 * Records grouped by key and window, ready for a windowed aggregation.
 *
 * @since 0.4.0
 * @category models
 */
export type TimeWindowedKStream<K, V, E = never, R = never> = grouped.TimeWindowedKStream<K, V, E, R>

/**
 * Options of a windowed aggregation.
 *
 * @since 0.4.0
 * @category models
 */
export interface WindowedOptions {
  /** Names its state and sub-topology; set it (a generated name changes with the topology). */
  readonly name?: string | undefined
  /**
   * `"onWindowUpdate"` (default): every update of a window, as Kafka Streams
   * without a cache. `"onWindowClose"`: each window's final result, once, when
   * stream time reaches its end plus grace (Kafka Streams'
   * `suppress(untilWindowCloses(...))`).
   */
  readonly emit?: "onWindowUpdate" | "onWindowClose" | undefined
  /**
   * A record no open window accepts: `"drop"` (default: logged and counted in
   * `skein_streams_late_records_total`) or `"error"` (a `LateRecord` error for
   * the topology's rules, e.g. to the dead letter topic).
   */
  readonly late?: "drop" | "error" | undefined
}

const windowing = (self: grouped.TimeWindowedKStream<unknown, unknown, unknown, unknown>, options: WindowedOptions | undefined): Graph.Windowing => ({
  windows: self.windows,
  emit: options?.emit ?? "onWindowUpdate",
  late: options?.late ?? "drop"
})

/** The DSL's type erasure, recovered: a record reaching the aggregate was typed by the grouping. */
const typed = <K, V>(record: Graph.StreamRecord): Record<K, V> => record as Record<K, V>

/**
 * The number of records per key and window (records without a key are
 * dropped, with a warning; a null value counts, as in Kafka Streams).
 *
 * @example
 * ```ts
 * import { KGroupedStream, KStream, KTable, TimeWindowedKStream, TimeWindows } from "skein"
 *
 * KStream.from(Orders).pipe(
 *   KStream.groupByKey(),
 *   KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace("1 minute", "10 seconds")),
 *   TimeWindowedKStream.count({ name: "orders-per-minute", emit: "onWindowClose" }),
 *   KTable.toStream,
 *   KStream.to(OrdersPerMinute) // keyed by Windowed.json(Schema.String)
 * )
 * ```
 *
 * @since 0.4.0
 * @category aggregations
 */
export const count = (options?: WindowedOptions) =>
<K, V, E, R>(self: TimeWindowedKStream<K, V, E, R>): grouped.KTable<Windowed<K>, number, E, R> =>
  grouped.table(Graph.aggregate(self.node, "count", {
    state: Schema.Number,
    add: (total: Option.Option<number>) => Option.getOrElse(total, () => 0) + 1
  }, options?.name, windowing(self, options)))

/**
 * Combines the values of each key and window: the first value as it is,
 * then `combine(aggregate, value)` per record. `state` is the stored form
 * of a value.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { KGroupedStream, KStream, TimeWindowedKStream, TimeWindows } from "skein"
 *
 * KStream.from(Amounts).pipe(
 *   KStream.groupByKey(),
 *   KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace("5 minutes", 0).pipe(TimeWindows.advanceBy("1 minute"))),
 *   TimeWindowedKStream.reduce((sum, amount) => sum + amount, { state: Schema.Number, name: "sums" })
 * )
 * ```
 *
 * @since 0.4.0
 * @category aggregations
 */
export const reduce: {
  <V, I>(
    combine: (aggregate: V, value: V) => V,
    options: WindowedOptions & { readonly state: Schema.Schema<V, I> }
  ): <K, E, R>(self: TimeWindowedKStream<K, V, E, R>) => grouped.KTable<Windowed<K>, V, E, R>
  <K, V, E, R, I>(
    self: TimeWindowedKStream<K, V, E, R>,
    combine: (aggregate: V, value: V) => V,
    options: WindowedOptions & { readonly state: Schema.Schema<V, I> }
  ): grouped.KTable<Windowed<K>, V, E, R>
} = dual(
  3,
  <K, V, E, R, I>(
    self: TimeWindowedKStream<K, V, E, R>,
    combine: (aggregate: V, value: V) => V,
    options: WindowedOptions & { readonly state: Schema.Schema<V, I> }
  ): grouped.KTable<Windowed<K>, V, E, R> =>
    grouped.table(Graph.aggregate(self.node, "reduce", {
      state: options.state,
      add: (current: Option.Option<V>, record) => {
        const value = typed<K, V>(record).value
        return Option.isNone(current) ? value : combine(current.value, value)
      }
    }, options.name, windowing(self, options)))
)

/**
 * Folds the records of each key and window into an aggregate: `initial()`
 * for a window's first record, then `add(aggregate, record)`.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { KGroupedStream, KStream, TimeWindowedKStream, TimeWindows } from "skein"
 *
 * const Stats = Schema.Struct({ count: Schema.Number, sum: Schema.Number })
 * KStream.from(Amounts).pipe(
 *   KStream.groupByKey(),
 *   KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace("1 minute", 0)),
 *   TimeWindowedKStream.aggregate(() => ({ count: 0, sum: 0 }), (s, r) => ({ count: s.count + 1, sum: s.sum + r.value }), {
 *     state: Stats,
 *     name: "stats-per-minute"
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
    options: WindowedOptions & { readonly state: Schema.Schema<A, I> }
  ): <E, R>(self: TimeWindowedKStream<K, V, E, R>) => grouped.KTable<Windowed<K>, A, E, R>
  <K, V, E, R, A, I>(
    self: TimeWindowedKStream<K, V, E, R>,
    initial: () => A,
    add: (aggregate: A, record: Record<K, V>) => A,
    options: WindowedOptions & { readonly state: Schema.Schema<A, I> }
  ): grouped.KTable<Windowed<K>, A, E, R>
} = dual(
  4,
  <K, V, E, R, A, I>(
    self: TimeWindowedKStream<K, V, E, R>,
    initial: () => A,
    add: (aggregate: A, record: Record<K, V>) => A,
    options: WindowedOptions & { readonly state: Schema.Schema<A, I> }
  ): grouped.KTable<Windowed<K>, A, E, R> =>
    grouped.table(Graph.aggregate(self.node, "aggregate", {
      state: options.state,
      add: (current: Option.Option<A>, record) => add(Option.getOrElse(current, initial), typed<K, V>(record))
    }, options.name, windowing(self, options)))
)
