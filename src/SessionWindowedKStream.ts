/**
 * Records grouped by key and by session of event time
 * (`KGroupedStream.windowedBy(SessionWindows...)`), and the session
 * aggregations over them: `count`, `reduce`, `aggregate`. A record joins the
 * sessions of its key within the inactivity gap of it; when it bridges
 * several, they merge into one (their aggregates combined by `merge`). The
 * results are keyed by `Windowed<K>` (the session's first and last event
 * time), in the task's state like every windowed aggregation.
 *
 * Emitting updates (the default), a merge first emits `null` (a tombstone)
 * for each session it replaces, then the merged session. Emitting final
 * results (`emit: "onWindowClose"`), each session is emitted once, when
 * stream time reaches its end plus the gap plus the grace.
 *
 * @since 0.4.0
 */
import { Option, Schema } from "effect"
import { dual } from "effect/Function"
import * as Graph from "./internal/streams/graph.ts"
import * as grouped from "./internal/streams/grouped.ts"
import type { Record } from "./KStream.ts"
import type { WindowedOptions } from "./TimeWindowedKStream.ts"
import type { Windowed } from "./Windowed.ts"

/**
 * @since 0.4.0
 * @category symbols
 */
export const TypeId: typeof grouped.SessionTypeId = grouped.SessionTypeId

/**
 * Records grouped by key and session, ready for a session aggregation.
 *
 * @since 0.4.0
 * @category models
 */
export type SessionWindowedKStream<K, V, E = never, R = never> = grouped.SessionWindowedKStream<K, V, E, R>

const windowing = (self: grouped.SessionWindowedKStream<unknown, unknown, unknown, unknown>, options: WindowedOptions | undefined): Graph.Windowing => ({
  windows: self.windows,
  emit: options?.emit ?? "onWindowUpdate",
  late: options?.late ?? "drop"
})

/** The DSL's type erasure, recovered: a record reaching the aggregate was typed by the grouping. */
const typed = <K, V>(record: Graph.StreamRecord): Record<K, V> => record as Record<K, V>

/**
 * The number of records per key and session (a `null` value counts, as in
 * Kafka Streams). Updates are `null` for a session merged into another.
 *
 * @example
 * ```ts
 * import { KGroupedStream, KStream, KTable, SessionWindowedKStream, SessionWindows } from "skein"
 *
 * KStream.from(Clicks).pipe(
 *   KStream.groupByKey(),
 *   KGroupedStream.windowedBy(SessionWindows.ofInactivityGapAndGrace("5 minutes", "30 seconds")),
 *   SessionWindowedKStream.count({ name: "clicks-per-visit", emit: "onWindowClose" }),
 *   KTable.toStream,
 *   KStream.to(ClicksPerVisit) // keyed by Windowed.json(Schema.String), values number | null
 * )
 * ```
 *
 * @since 0.4.0
 * @category aggregations
 */
export const count = (options?: WindowedOptions) =>
<K, V, E, R>(self: SessionWindowedKStream<K, V, E, R>): grouped.KTable<Windowed<K>, number | null, E, R> =>
  grouped.table(Graph.aggregate(self.node, "count", {
    state: Schema.Number,
    add: (total: Option.Option<number>) => Option.getOrElse(total, () => 0) + 1,
    session: {
      initial: () => Option.some(0),
      merge: (total, session) => Option.some(Option.getOrElse(total, () => 0) + session)
    }
  }, options?.name, windowing(self, options)))

/**
 * Combines the values of each key and session: the first value as it is,
 * then `combine(aggregate, value)` per record; merged sessions are combined
 * with `combine` too.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { KGroupedStream, KStream, SessionWindowedKStream, SessionWindows } from "skein"
 *
 * KStream.from(Amounts).pipe(
 *   KStream.groupByKey(),
 *   KGroupedStream.windowedBy(SessionWindows.ofInactivityGapAndGrace("5 minutes", 0)),
 *   SessionWindowedKStream.reduce((sum, amount) => sum + amount, { state: Schema.Number, name: "spent-per-visit" })
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
  ): <K, E, R>(self: SessionWindowedKStream<K, V, E, R>) => grouped.KTable<Windowed<K>, V | null, E, R>
  <K, V, E, R, I>(
    self: SessionWindowedKStream<K, V, E, R>,
    combine: (aggregate: V, value: V) => V,
    options: WindowedOptions & { readonly state: Schema.Schema<V, I> }
  ): grouped.KTable<Windowed<K>, V | null, E, R>
} = dual(
  3,
  <K, V, E, R, I>(
    self: SessionWindowedKStream<K, V, E, R>,
    combine: (aggregate: V, value: V) => V,
    options: WindowedOptions & { readonly state: Schema.Schema<V, I> }
  ): grouped.KTable<Windowed<K>, V | null, E, R> =>
    grouped.table(Graph.aggregate(self.node, "reduce", {
      state: options.state,
      add: (current: Option.Option<V>, record) => {
        const value = typed<K, V>(record).value
        return Option.isNone(current) ? value : combine(current.value, value)
      },
      session: {
        initial: () => Option.none(),
        merge: (current, session) => Option.some(Option.isNone(current) ? session : combine(current.value, session))
      }
    }, options.name, windowing(self, options)))
)

/**
 * Folds the records of each key and session into an aggregate: `initial()`
 * for a new session, `add(aggregate, record)` per record, and
 * `merge(aggregate, other)` when a record merges sessions.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { KGroupedStream, KStream, SessionWindowedKStream, SessionWindows } from "skein"
 *
 * KStream.from(Clicks).pipe(
 *   KStream.groupByKey(),
 *   KGroupedStream.windowedBy(SessionWindows.ofInactivityGapAndGrace("5 minutes", 0)),
 *   SessionWindowedKStream.aggregate(() => 0, (n, _click) => n + 1, (a, b) => a + b, { state: Schema.Number, name: "clicks" })
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
    merge: (aggregate: A, other: A) => A,
    options: WindowedOptions & { readonly state: Schema.Schema<A, I> }
  ): <E, R>(self: SessionWindowedKStream<K, V, E, R>) => grouped.KTable<Windowed<K>, A | null, E, R>
  <K, V, E, R, A, I>(
    self: SessionWindowedKStream<K, V, E, R>,
    initial: () => A,
    add: (aggregate: A, record: Record<K, V>) => A,
    merge: (aggregate: A, other: A) => A,
    options: WindowedOptions & { readonly state: Schema.Schema<A, I> }
  ): grouped.KTable<Windowed<K>, A | null, E, R>
} = dual(
  5,
  <K, V, E, R, A, I>(
    self: SessionWindowedKStream<K, V, E, R>,
    initial: () => A,
    add: (aggregate: A, record: Record<K, V>) => A,
    merge: (aggregate: A, other: A) => A,
    options: WindowedOptions & { readonly state: Schema.Schema<A, I> }
  ): grouped.KTable<Windowed<K>, A | null, E, R> =>
    grouped.table(Graph.aggregate(self.node, "aggregate", {
      state: options.state,
      add: (current: Option.Option<A>, record) => add(Option.getOrElse(current, initial), typed<K, V>(record)),
      session: {
        initial: () => Option.some(initial()),
        merge: (current, session) => Option.some(merge(Option.getOrElse(current, initial), session))
      }
    }, options.name, windowing(self, options)))
)
