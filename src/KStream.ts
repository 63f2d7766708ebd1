/**
 * A stream of keyed records, built from topics with operators, written to
 * topics (`to`), or grouped by key for an aggregation (`groupBy`,
 * `groupByKey`). A `KStream` is a description: `Topology.make` collects the
 * streams written to topics, and `Topology.run` runs them as Skein
 * transformers, with every guarantee of a transformer (exactly-once, rules,
 * dead letters, state kept and restored).
 *
 * Grouping by a new key writes the records to a repartition topic
 * (`{applicationId}-{name}-repartition`) keyed by it, so every record of one
 * key reaches one task, as Kafka Streams does.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { KGroupedStream, KStream, KTable, Topic, Topology } from "skein"
 *
 * const Order = Schema.Struct({ customer: Schema.String, amount: Schema.Number })
 * const Orders = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Order) })
 * const Counts = Topic.make({ name: "orders-per-customer", key: Schema.String, value: Topic.json(Schema.Number) })
 *
 * const counts = KStream.from(Orders).pipe(
 *   KStream.filter((order) => order.value.amount > 0),
 *   KStream.groupBy((order) => order.value.customer, { key: Schema.String, value: Topic.json(Order), name: "by-customer" }),
 *   KGroupedStream.count({ name: "order-counts" }),
 *   KTable.toStream,
 *   KStream.to(Counts)
 * )
 * const topology = Topology.make("orders", [counts])
 * ```
 *
 * @since 0.4.0
 */
import { Effect } from "effect"
import { dual } from "effect/Function"
import type { Pipeable } from "effect/Pipeable"
import type { GlobalKTable } from "./GlobalKTable.ts"
import * as Graph from "./internal/streams/graph.ts"
import * as KeyText from "./internal/streams/keyText.ts"
import type { Declaration as StoreDeclaration } from "./internal/stores/access.ts"
import type { JoinWindows } from "./JoinWindows.ts"
import type * as Timer from "./Timer.ts"
import * as Topic from "./Topic.ts"
import type { InputRecord } from "./Transformer.ts"
import type { KGroupedStream } from "./internal/streams/grouped.ts"
import * as grouped from "./internal/streams/grouped.ts"

/**
 * @since 0.4.0
 * @category symbols
 */
export const TypeId: unique symbol = Symbol.for("skein/KStream")

/**
 * @since 0.4.0
 * @category symbols
 */
export type TypeId = typeof TypeId

/**
 * A record in a stream: its key (`null`: none), value, timestamp (the input
 * record's, carried to every output) and headers.
 *
 * @since 0.4.0
 * @category models
 */
export interface Record<K, V> {
  readonly key: K | null
  readonly value: V
  /** Milliseconds since the epoch. */
  readonly timestamp: number
  /** The input record's headers, name and value bytes, in order. */
  readonly headers: ReadonlyArray<readonly [string, Buffer]>
}

/**
 * A key and a value, as `map` and `flatMap` return them.
 *
 * @since 0.4.0
 * @category models
 */
export interface KeyValue<K, V> {
  readonly key: K | null
  readonly value: V
}

/**
 * A stream of records with keys `K` and values `V`; its operators may fail
 * with `E` and need `R`.
 *
 * @since 0.4.0
 * @category models
 */
export interface KStream<out K, out V, out E = never, out R = never> extends Pipeable {
  readonly [TypeId]: {
    readonly _K: (_: never) => K
    readonly _V: (_: never) => V
    readonly _E: (_: never) => E
    readonly _R: (_: never) => R
  }
  /** @internal */
  readonly node: Graph.Node
}

/**
 * A stream written to a topic: what `Topology.make` runs.
 *
 * @since 0.4.0
 * @category models
 */
export interface Sink<out E = never, out R = never> {
  readonly [TypeId]: { readonly _E: (_: never) => E; readonly _R: (_: never) => R }
  /** @internal */
  readonly node: Graph.Sink
}

class StreamValue<K, V, E, R> extends grouped.NodeValue implements KStream<K, V, E, R> {
  readonly [TypeId] = grouped.variance
}

/** @internal */
export const fromNode = <K, V, E, R>(node: Graph.Node): KStream<K, V, E, R> => new StreamValue<K, V, E, R>(node)

/**
 * The records of `topic` (or of several topics with the same key and value
 * types), decoded with their codecs.
 *
 * @example
 * ```ts
 * import { KStream } from "skein"
 *
 * const orders = KStream.from(Orders)
 * const both = KStream.from(Orders, Refunds)
 * ```
 *
 * @since 0.4.0
 * @category constructors
 */
export const from = <K, V>(
  topic: Topic.Topic<K, V>,
  ...more: ReadonlyArray<Topic.Topic<K, V>>
): KStream<K, V> => fromNode(Graph.source([topic, ...more], undefined))

/**
 * Options of a source (`fromTopics`).
 *
 * @since 0.4.0
 * @category models
 */
export interface SourceOptions<K, V> {
  /**
   * The event time of a record, in milliseconds since the epoch (Kafka
   * Streams' `TimestampExtractor`); default: the record's timestamp. Every
   * output the record leads to carries it, and windows and stream time use
   * it. A negative result is an `InvalidTimestamp` record error, handled by
   * the topology's rules (`Topology.run`'s `rules`).
   */
  readonly timestamp?: ((record: InputRecord<K, V>) => number) | undefined
}

/**
 * The records of one or more topics with the same types, with a timestamp
 * extractor: their event time comes from the record (a field of the value,
 * say) instead of the Kafka record's timestamp.
 *
 * @example
 * ```ts
 * import { KStream } from "skein"
 *
 * // Orders carry the time they were placed
 * const orders = KStream.fromTopics([Orders], { timestamp: (record) => record.value.placedAt })
 * ```
 *
 * @since 0.4.0
 * @category constructors
 */
export const fromTopics = <K, V>(
  topics: readonly [Topic.Topic<K, V>, ...ReadonlyArray<Topic.Topic<K, V>>],
  options?: SourceOptions<K, V>
): KStream<K, V> => fromNode(Graph.source(topics, options?.timestamp))

/** The DSL's type erasure, recovered: a record reaching a step was made by the operators that typed it. */
const typed = <K, V>(record: Graph.StreamRecord): Record<K, V> => record as Record<K, V>

const step = <K, V, E, R, K2, V2, E2, R2>(
  self: KStream<K, V, E, R>,
  kind: Graph.StepKind,
  keyChanging: boolean,
  run: Graph.Step,
  name: string | undefined
): KStream<K2, V2, E | E2, R | R2> => fromNode(Graph.step(self.node, kind, keyChanging, run, name))

/**
 * Options of an operator: its name in the topology (`describe`), stable
 * while the topology is unchanged when unset.
 *
 * @since 0.4.0
 * @category models
 */
export interface Named {
  readonly name?: string | undefined
}

/**
 * Keeps the records `predicate` accepts.
 *
 * @example
 * ```ts
 * import { KStream } from "skein"
 *
 * KStream.from(Orders).pipe(KStream.filter((order) => order.value.amount > 0))
 * ```
 *
 * @since 0.4.0
 * @category filtering
 */
export const filter: {
  <K, V>(predicate: (record: Record<K, V>) => boolean, options?: Named): <E, R>(self: KStream<K, V, E, R>) => KStream<K, V, E, R>
  <K, V, E, R>(self: KStream<K, V, E, R>, predicate: (record: Record<K, V>) => boolean, options?: Named): KStream<K, V, E, R>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R>(self: KStream<K, V, E, R>, predicate: (record: Record<K, V>) => boolean, options?: Named) =>
    step<K, V, E, R, K, V, never, never>(self, "filter", false, (r) => predicate(typed<K, V>(r)) ? [r] : [], options?.name)
)

/**
 * Keeps the records an effect accepts (a lookup, a call): it may fail with
 * its typed error, which the topology's rules handle.
 *
 * @since 0.4.0
 * @category filtering
 */
export const filterEffect: {
  <K, V, E2, R2>(
    predicate: (record: Record<K, V>) => Effect.Effect<boolean, E2, R2>,
    options?: Named
  ): <E, R>(self: KStream<K, V, E, R>) => KStream<K, V, E | E2, R | R2>
  <K, V, E, R, E2, R2>(
    self: KStream<K, V, E, R>,
    predicate: (record: Record<K, V>) => Effect.Effect<boolean, E2, R2>,
    options?: Named
  ): KStream<K, V, E | E2, R | R2>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R, E2, R2>(
    self: KStream<K, V, E, R>,
    predicate: (record: Record<K, V>) => Effect.Effect<boolean, E2, R2>,
    options?: Named
  ) =>
    step<K, V, E, R, K, V, E2, R2>(
      self,
      "filter",
      false,
      (r) => Effect.map(predicate(typed<K, V>(r)), (keep) => keep ? [r] : []),
      options?.name
    )
)

/**
 * A new key and value for each record. Grouping the result by key
 * repartitions it.
 *
 * @example
 * ```ts
 * import { KStream } from "skein"
 *
 * KStream.from(Orders).pipe(KStream.map((order) => ({ key: order.value.customer, value: order.value.amount })))
 * ```
 *
 * @since 0.4.0
 * @category mapping
 */
export const map: {
  <K, V, K2, V2>(f: (record: Record<K, V>) => KeyValue<K2, V2>, options?: Named): <E, R>(self: KStream<K, V, E, R>) => KStream<K2, V2, E, R>
  <K, V, E, R, K2, V2>(self: KStream<K, V, E, R>, f: (record: Record<K, V>) => KeyValue<K2, V2>, options?: Named): KStream<K2, V2, E, R>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R, K2, V2>(self: KStream<K, V, E, R>, f: (record: Record<K, V>) => KeyValue<K2, V2>, options?: Named) =>
    step<K, V, E, R, K2, V2, never, never>(self, "map", true, (r) => {
      const { key, value } = f(typed<K, V>(r))
      return [{ ...r, key, value }]
    }, options?.name)
)

/**
 * Like `map`, with an effect (it may fail with its typed error).
 *
 * @since 0.4.0
 * @category mapping
 */
export const mapEffect: {
  <K, V, K2, V2, E2, R2>(
    f: (record: Record<K, V>) => Effect.Effect<KeyValue<K2, V2>, E2, R2>,
    options?: Named
  ): <E, R>(self: KStream<K, V, E, R>) => KStream<K2, V2, E | E2, R | R2>
  <K, V, E, R, K2, V2, E2, R2>(
    self: KStream<K, V, E, R>,
    f: (record: Record<K, V>) => Effect.Effect<KeyValue<K2, V2>, E2, R2>,
    options?: Named
  ): KStream<K2, V2, E | E2, R | R2>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R, K2, V2, E2, R2>(
    self: KStream<K, V, E, R>,
    f: (record: Record<K, V>) => Effect.Effect<KeyValue<K2, V2>, E2, R2>,
    options?: Named
  ) =>
    step<K, V, E, R, K2, V2, E2, R2>(
      self,
      "map",
      true,
      (r) => Effect.map(f(typed<K, V>(r)), ({ key, value }) => [{ ...r, key, value }]),
      options?.name
    )
)

/**
 * A new value for each record; the key stays (no repartition later).
 *
 * @example
 * ```ts
 * import { KStream } from "skein"
 *
 * KStream.from(Orders).pipe(KStream.mapValues((order) => order.amount))
 * ```
 *
 * @since 0.4.0
 * @category mapping
 */
export const mapValues: {
  <K, V, V2>(f: (value: V, record: Record<K, V>) => V2, options?: Named): <E, R>(self: KStream<K, V, E, R>) => KStream<K, V2, E, R>
  <K, V, E, R, V2>(self: KStream<K, V, E, R>, f: (value: V, record: Record<K, V>) => V2, options?: Named): KStream<K, V2, E, R>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R, V2>(self: KStream<K, V, E, R>, f: (value: V, record: Record<K, V>) => V2, options?: Named) =>
    step<K, V, E, R, K, V2, never, never>(self, "mapValues", false, (r) => {
      const record = typed<K, V>(r)
      return [{ ...r, value: f(record.value, record) }]
    }, options?.name)
)

/**
 * Like `mapValues`, with an effect (it may fail with its typed error).
 *
 * @since 0.4.0
 * @category mapping
 */
export const mapValuesEffect: {
  <K, V, V2, E2, R2>(
    f: (value: V, record: Record<K, V>) => Effect.Effect<V2, E2, R2>,
    options?: Named
  ): <E, R>(self: KStream<K, V, E, R>) => KStream<K, V2, E | E2, R | R2>
  <K, V, E, R, V2, E2, R2>(
    self: KStream<K, V, E, R>,
    f: (value: V, record: Record<K, V>) => Effect.Effect<V2, E2, R2>,
    options?: Named
  ): KStream<K, V2, E | E2, R | R2>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R, V2, E2, R2>(
    self: KStream<K, V, E, R>,
    f: (value: V, record: Record<K, V>) => Effect.Effect<V2, E2, R2>,
    options?: Named
  ) =>
    step<K, V, E, R, K, V2, E2, R2>(self, "mapValues", false, (r) => {
      const record = typed<K, V>(r)
      return Effect.map(f(record.value, record), (value) => [{ ...r, value }])
    }, options?.name)
)

/**
 * Any number of records for each record, each with its own key.
 *
 * @since 0.4.0
 * @category mapping
 */
export const flatMap: {
  <K, V, K2, V2>(
    f: (record: Record<K, V>) => Iterable<KeyValue<K2, V2>>,
    options?: Named
  ): <E, R>(self: KStream<K, V, E, R>) => KStream<K2, V2, E, R>
  <K, V, E, R, K2, V2>(
    self: KStream<K, V, E, R>,
    f: (record: Record<K, V>) => Iterable<KeyValue<K2, V2>>,
    options?: Named
  ): KStream<K2, V2, E, R>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R, K2, V2>(self: KStream<K, V, E, R>, f: (record: Record<K, V>) => Iterable<KeyValue<K2, V2>>, options?: Named) =>
    step<K, V, E, R, K2, V2, never, never>(
      self,
      "flatMap",
      true,
      (r) => Array.from(f(typed<K, V>(r)), ({ key, value }) => ({ ...r, key, value })),
      options?.name
    )
)

/**
 * Any number of values for each record, each with the record's key.
 *
 * @example
 * ```ts
 * import { KStream } from "skein"
 *
 * KStream.from(Lines).pipe(KStream.flatMapValues((line) => line.split(" ")))
 * ```
 *
 * @since 0.4.0
 * @category mapping
 */
export const flatMapValues: {
  <K, V, V2>(f: (value: V, record: Record<K, V>) => Iterable<V2>, options?: Named): <E, R>(self: KStream<K, V, E, R>) => KStream<K, V2, E, R>
  <K, V, E, R, V2>(self: KStream<K, V, E, R>, f: (value: V, record: Record<K, V>) => Iterable<V2>, options?: Named): KStream<K, V2, E, R>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R, V2>(self: KStream<K, V, E, R>, f: (value: V, record: Record<K, V>) => Iterable<V2>, options?: Named) =>
    step<K, V, E, R, K, V2, never, never>(self, "flatMapValues", false, (r) => {
      const record = typed<K, V>(r)
      return Array.from(f(record.value, record), (value) => ({ ...r, value }))
    }, options?.name)
)

/**
 * A new key for each record, the value unchanged. Grouping the result by key
 * repartitions it.
 *
 * @example
 * ```ts
 * import { KStream } from "skein"
 *
 * KStream.from(Orders).pipe(KStream.selectKey((order) => order.value.customer))
 * ```
 *
 * @since 0.4.0
 * @category mapping
 */
export const selectKey: {
  <K, V, K2>(f: (record: Record<K, V>) => K2 | null, options?: Named): <E, R>(self: KStream<K, V, E, R>) => KStream<K2, V, E, R>
  <K, V, E, R, K2>(self: KStream<K, V, E, R>, f: (record: Record<K, V>) => K2 | null, options?: Named): KStream<K2, V, E, R>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R, K2>(self: KStream<K, V, E, R>, f: (record: Record<K, V>) => K2 | null, options?: Named) =>
    step<K, V, E, R, K2, V, never, never>(self, "selectKey", true, (r) => [{ ...r, key: f(typed<K, V>(r)) }], options?.name)
)

/**
 * The records of both streams, as one.
 *
 * @since 0.4.0
 * @category combining
 */
export const merge: {
  <K, V, E2, R2>(that: KStream<K, V, E2, R2>, options?: Named): <E, R>(self: KStream<K, V, E, R>) => KStream<K, V, E | E2, R | R2>
  <K, V, E, R, E2, R2>(self: KStream<K, V, E, R>, that: KStream<K, V, E2, R2>, options?: Named): KStream<K, V, E | E2, R | R2>
} = dual(
  (args) => isStream(args[0]) && isStream(args[1]),
  <K, V, E, R, E2, R2>(self: KStream<K, V, E, R>, that: KStream<K, V, E2, R2>, options?: Named): KStream<K, V, E | E2, R | R2> =>
    fromNode(Graph.merge([self.node, that.node], options?.name))
)

/**
 * The stream as a join reads it: with codecs (`Repartitioned`), repartitioned
 * by its key first when an operator above may have changed it
 * (`{applicationId}-{name}-left-repartition`, Kafka Streams' automatic
 * repartition before a join), else as it is.
 */
const joinInput = <K, V, E, R>(self: KStream<K, V, E, R>, options: Named | Repartitioned<K, V> | undefined): Graph.Node =>
  options !== undefined && "key" in options
    ? Graph.grouping(
      self.node,
      Graph.codecs(options.key, options.value),
      options.partitions,
      options.name === undefined ? undefined : `${options.name}-left`
    )
    : self.node

/**
 * Each record joined with its key's value in `table` (an inner join): a
 * record whose key the table does not have is dropped; `joiner` makes the
 * output value, which keeps the record's key and timestamp. Only stream
 * records trigger output (a table update joins nothing). The stream and the
 * table's topic must be co-partitioned (equal partition counts, checked by
 * `Topology.run`). A stream whose key an operator may have changed
 * (`selectKey`, `map`, `flatMap`) is repartitioned by it first, as Kafka
 * Streams does, with `options`' codecs (`{ key, value }`; without them
 * `Topology.run` fails at startup with the fix). A table may be read from a
 * topic or be an aggregation's (`KGroupedStream.count`, `reduce`,
 * `aggregate`). A record without a key or a
 * value is dropped, counted in `skein_streams_dropped_records_total` and
 * logged, as Kafka Streams drops it.
 *
 * @example
 * ```ts
 * import { KStream, KTable } from "skein"
 *
 * const customers = KTable.from(Customers)
 * KStream.from(Orders).pipe(KStream.join(customers, (order, customer) => ({ ...order, region: customer.region })))
 * ```
 *
 * @since 0.4.0
 * @category joins
 */
export const join: {
  <K, V, VT, VR, E2, R2>(
    table: grouped.KTable<K, VT, E2, R2>,
    joiner: (value: V, tableValue: VT, record: Record<K, V>) => VR,
    options?: Named | Repartitioned<K, V>
  ): <E, R>(self: KStream<K, V, E, R>) => KStream<K, VR, E | E2, R | R2>
  <K, V, E, R, VT, VR, E2, R2>(
    self: KStream<K, V, E, R>,
    table: grouped.KTable<K, VT, E2, R2>,
    joiner: (value: V, tableValue: VT, record: Record<K, V>) => VR,
    options?: Named | Repartitioned<K, V>
  ): KStream<K, VR, E | E2, R | R2>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R, VT, VR, E2, R2>(
    self: KStream<K, V, E, R>,
    table: grouped.KTable<K, VT, E2, R2>,
    joiner: (value: V, tableValue: VT, record: Record<K, V>) => VR,
    options?: Named | Repartitioned<K, V>
  ): KStream<K, VR, E | E2, R | R2> =>
    fromNode(Graph.join(joinInput(self, options), table.node, "inner", (r, tableValue) => {
      const record = typed<K, V>(r)
      // An inner join calls its joiner only with a table value, made by the table's operators: a `VT`.
      return joiner(record.value, tableValue as VT, record)
    }, options?.name))
)

/**
 * Each record joined with its key's value in `table`, or with `null` when
 * the table has none (a left join): every record with a value is joined,
 * a record without a key too (with `null`, as Kafka Streams does since
 * KIP-962). Otherwise as `join`.
 *
 * @example
 * ```ts
 * import { KStream, KTable } from "skein"
 *
 * KStream.from(Orders).pipe(
 *   KStream.leftJoin(KTable.from(Customers), (order, customer) => ({ ...order, region: customer?.region ?? "unknown" }))
 * )
 * ```
 *
 * @since 0.4.0
 * @category joins
 */
export const leftJoin: {
  <K, V, VT, VR, E2, R2>(
    table: grouped.KTable<K, VT, E2, R2>,
    joiner: (value: V, tableValue: VT | null, record: Record<K, V>) => VR,
    options?: Named | Repartitioned<K, V>
  ): <E, R>(self: KStream<K, V, E, R>) => KStream<K, VR, E | E2, R | R2>
  <K, V, E, R, VT, VR, E2, R2>(
    self: KStream<K, V, E, R>,
    table: grouped.KTable<K, VT, E2, R2>,
    joiner: (value: V, tableValue: VT | null, record: Record<K, V>) => VR,
    options?: Named | Repartitioned<K, V>
  ): KStream<K, VR, E | E2, R | R2>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R, VT, VR, E2, R2>(
    self: KStream<K, V, E, R>,
    table: grouped.KTable<K, VT, E2, R2>,
    joiner: (value: V, tableValue: VT | null, record: Record<K, V>) => VR,
    options?: Named | Repartitioned<K, V>
  ): KStream<K, VR, E | E2, R | R2> =>
    fromNode(Graph.join(joinInput(self, options), table.node, "left", (r, tableValue) => {
      const record = typed<K, V>(r)
      // The table's operators made the value (a `VT`), or there is none (`null`).
      return joiner(record.value, tableValue as VT | null, record)
    }, options?.name))
)

/**
 * Each record joined with the value of a global table (`GlobalKTable.from`)
 * for the key `keyMapper` maps it to (an inner join, Kafka Streams'
 * `KStream.join(globalTable, keyMapper, joiner)`): a record whose key the
 * global table does not have is dropped; `joiner` makes the output value,
 * which keeps the record's key and timestamp. The global table holds every
 * partition of its topic on every instance, loaded before any record is
 * joined, so the stream needs no co-partitioning or repartitioning, even
 * after `selectKey`. A record without a value, or whose key maps to `null`,
 * is dropped (counted in `skein_streams_dropped_records_total` and logged).
 *
 * @example
 * ```ts
 * import { GlobalKTable, KStream } from "skein"
 *
 * const regions = GlobalKTable.from(Regions)
 * KStream.from(Orders).pipe(KStream.globalJoin(regions, (order) => order.value.region, (order, region) => ({ ...order, region })))
 * ```
 *
 * @since 0.6.0
 * @category joins
 */
export const globalJoin: {
  <K, V, KG, VG, VR>(
    table: GlobalKTable<KG, VG>,
    keyMapper: (record: Record<K, V>) => KG | null,
    joiner: (value: V, globalValue: VG, record: Record<K, V>) => VR,
    options?: Named
  ): <E, R>(self: KStream<K, V, E, R>) => KStream<K, VR, E, R>
  <K, V, E, R, KG, VG, VR>(
    self: KStream<K, V, E, R>,
    table: GlobalKTable<KG, VG>,
    keyMapper: (record: Record<K, V>) => KG | null,
    joiner: (value: V, globalValue: VG, record: Record<K, V>) => VR,
    options?: Named
  ): KStream<K, VR, E, R>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R, KG, VG, VR>(
    self: KStream<K, V, E, R>,
    table: GlobalKTable<KG, VG>,
    keyMapper: (record: Record<K, V>) => KG | null,
    joiner: (value: V, globalValue: VG, record: Record<K, V>) => VR,
    options?: Named
  ): KStream<K, VR, E, R> =>
    fromNode(Graph.globalJoin(self.node, table.node, "inner", (r) => keyMapper(typed<K, V>(r)), (r, globalValue) => {
      const record = typed<K, V>(r)
      // An inner join calls its joiner only with a value of the global table, decoded by its topic's codec: a `VG`.
      return joiner(record.value, globalValue as VG, record)
    }, options?.name))
)

/**
 * Each record joined with the value of a global table for the key
 * `keyMapper` maps it to, or with `null` when the table has none (a left
 * join, Kafka Streams' `KStream.leftJoin(globalTable, keyMapper, joiner)`).
 * A record whose key maps to `null` is joined with `null`, as Kafka Streams
 * 4.4 does; one without a value is dropped and counted. Otherwise as
 * `globalJoin`.
 *
 * @example
 * ```ts
 * import { GlobalKTable, KStream } from "skein"
 *
 * KStream.from(Orders).pipe(
 *   KStream.globalLeftJoin(GlobalKTable.from(Regions), (order) => order.value.region, (order, region) => ({ ...order, region }))
 * )
 * ```
 *
 * @since 0.6.0
 * @category joins
 */
export const globalLeftJoin: {
  <K, V, KG, VG, VR>(
    table: GlobalKTable<KG, VG>,
    keyMapper: (record: Record<K, V>) => KG | null,
    joiner: (value: V, globalValue: VG | null, record: Record<K, V>) => VR,
    options?: Named
  ): <E, R>(self: KStream<K, V, E, R>) => KStream<K, VR, E, R>
  <K, V, E, R, KG, VG, VR>(
    self: KStream<K, V, E, R>,
    table: GlobalKTable<KG, VG>,
    keyMapper: (record: Record<K, V>) => KG | null,
    joiner: (value: V, globalValue: VG | null, record: Record<K, V>) => VR,
    options?: Named
  ): KStream<K, VR, E, R>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R, KG, VG, VR>(
    self: KStream<K, V, E, R>,
    table: GlobalKTable<KG, VG>,
    keyMapper: (record: Record<K, V>) => KG | null,
    joiner: (value: V, globalValue: VG | null, record: Record<K, V>) => VR,
    options?: Named
  ): KStream<K, VR, E, R> =>
    fromNode(Graph.globalJoin(self.node, table.node, "left", (r) => keyMapper(typed<K, V>(r)), (r, globalValue) => {
      const record = typed<K, V>(r)
      // The global table's topic codec decoded the value (a `VG`), or there is none (`null`).
      return joiner(record.value, globalValue as VG | null, record)
    }, options?.name))
)

/**
 * A record a process node forwards to its downstream operators: its key and
 * value, and optionally its timestamp (default: the record's event time, or
 * a timer's `time`) and headers (default: the record's, none for a timer's).
 *
 * @since 0.6.0
 * @category models
 */
export interface Output<K, V> {
  readonly key: K | null
  readonly value: V
  /** Milliseconds since the epoch, 0 or more. */
  readonly timestamp?: number | undefined
  readonly headers?: ReadonlyArray<readonly [string, Buffer]> | undefined
}

/**
 * What a process node's `process` (or `onTimer`) returns: the records it
 * forwards, in order, and changes to its timers (`Timer.streamTime`,
 * `Timer.wallClock`, `Timer.cancel`) for the key of the record (or timer).
 *
 * @since 0.6.0
 * @category models
 */
export interface Processed<K, V> {
  readonly outputs?: ReadonlyArray<Output<K, V>> | undefined
  readonly timers?: ReadonlyArray<Timer.Change> | undefined
}

/**
 * Where the record a process node runs on came from: its sub-topology's
 * input record (Kafka Streams' `RecordMetadata`).
 *
 * @since 0.6.0
 * @category models
 */
export interface ProcessContext {
  readonly topic: string
  readonly partition: number
  readonly offset: number
}

/**
 * A processor (`KStream.process`): its function on each record, the named
 * stores it uses, and what it does when one of its timers is due.
 *
 * @since 0.6.0
 * @category models
 */
export interface Processor<K, V, K2, V2, E, R, ET = E, RT = R> extends Named {
  /**
   * The stores `process` and `onTimer` read and write (`KeyValueStore.make`,
   * `WindowStore.make`, `SessionStore.make`): kept in the task's state with
   * their sub-topology's, committed in its transaction. A store's name is
   * its own in the topology; process nodes of one sub-topology may list the
   * same store to share it.
   */
  readonly stores?: ReadonlyArray<StoreDeclaration> | undefined
  /** Runs on each record: the records it forwards and its timer changes for the record's key. */
  readonly process: (record: Record<K, V>, context: ProcessContext) => Effect.Effect<Processed<K2, V2>, E, R>
  /**
   * Runs when a timer `process` (or `onTimer`) scheduled is due: the timer
   * (`key`: the record key as text, `""` for none; `name` as scheduled;
   * `time`: its clock's time when it fired). What it forwards continues
   * through the operators after the process node, and commits in the
   * task's transaction.
   */
  readonly onTimer?: ((timer: Timer.Fired) => Effect.Effect<Processed<K2, V2>, ET, RT>) | undefined
}

/**
 * Runs a processor on each record (Kafka Streams' `KStream#process`): an
 * effect that may read and write named stores (`stores`), forward any
 * number of records with new keys and values, and schedule per-key timers
 * (`Timer.streamTime`, `Timer.wallClock`, `Timer.cancel`) that its `onTimer`
 * runs when due. It compiles into its sub-topology's transformer: the stores
 * are that transformer's (committed in the task's transaction, changelogged,
 * restored, kept, served by standbys), the timers are too (named per process
 * node, so two nodes never collide), and what `onTimer` forwards flows
 * through the operators after the node, exactly once.
 *
 * A timer belongs to the key the sub-topology read the record with, so a
 * process node with `onTimer` must follow no operator that may change the key
 * (`KStream.repartition` first). Like `map`, its outputs may have any key:
 * grouping or joining them repartitions. A function that throws fails its
 * record (or timer) with `OperatorFailed`, for the topology's rules.
 *
 * @example
 * ```ts
 * import { Effect, Option, Schema } from "effect"
 * import { KeyValueStore, KStream } from "skein"
 *
 * const Seen = KeyValueStore.make({ name: "seen-orders", key: Schema.String, value: Schema.Number })
 *
 * // each order id once
 * KStream.from(Orders).pipe(
 *   KStream.process({
 *     name: "dedup",
 *     stores: [Seen],
 *     process: (order) =>
 *       Effect.gen(function*() {
 *         if (Option.isSome(yield* Seen.get(order.value.id))) return {}
 *         yield* Seen.put(order.value.id, order.timestamp)
 *         return { outputs: [{ key: order.key, value: order.value }] }
 *       })
 *   })
 * )
 * ```
 *
 * @since 0.6.0
 * @category processing
 */
export const process: {
  <K, V, K2, V2, E2 = never, R2 = never, E3 = never, R3 = never>(
    processor: Processor<K, V, K2, V2, E2, R2, E3, R3>
  ): <E, R>(self: KStream<K, V, E, R>) => KStream<K2, V2, E | E2 | E3, R | R2 | R3>
  <K, V, E, R, K2, V2, E2 = never, R2 = never, E3 = never, R3 = never>(
    self: KStream<K, V, E, R>,
    processor: Processor<K, V, K2, V2, E2, R2, E3, R3>
  ): KStream<K2, V2, E | E2 | E3, R | R2 | R3>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R, K2, V2, E2, R2, E3, R3>(
    self: KStream<K, V, E, R>,
    processor: Processor<K, V, K2, V2, E2, R2, E3, R3>
  ): KStream<K2, V2, E | E2 | E3, R | R2 | R3> => {
    const onTimer = processor.onTimer
    return fromNode(Graph.process(
      self.node,
      processor.stores ?? [],
      (record, context) => processor.process(typed<K, V>(record), context),
      onTimer === undefined ? undefined : (timer) => onTimer(timer),
      processor.name
    ))
  }
)

/**
 * Codecs for records written to an internal topic (a repartition topic):
 * the same codecs a `Topic.make` takes.
 *
 * @since 0.4.0
 * @category models
 */
export interface Repartitioned<K, V> extends Named {
  readonly key: Topic.AnyCodec<K>
  readonly value: Topic.AnyCodec<V>
  /** The repartition topic's partition count; unset: the largest of the upstream source topics'. */
  readonly partitions?: number | undefined
}

/**
 * Writes the records to a repartition topic keyed by their key and reads
 * them back: every record of one key then reaches the same task.
 *
 * @since 0.4.0
 * @category grouping
 */
export const repartition: {
  <K, V>(options: Repartitioned<K, V>): <E, R>(self: KStream<K, V, E, R>) => KStream<K, V, E, R>
  <K, V, E, R>(self: KStream<K, V, E, R>, options: Repartitioned<K, V>): KStream<K, V, E, R>
} = dual(
  2,
  <K, V, E, R>(self: KStream<K, V, E, R>, options: Repartitioned<K, V>): KStream<K, V, E, R> =>
    fromNode(Graph.repartition(self.node, Graph.codecs(options.key, options.value), options.partitions, options.name))
)

/**
 * Groups the records by their key for an aggregation (`KGroupedStream`). A
 * stream whose key an operator may have changed (`map`, `selectKey`,
 * `flatMap`) is repartitioned first, with `options`' codecs: without them
 * `Topology.run` fails at startup naming the operator.
 *
 * @since 0.4.0
 * @category grouping
 */
export const groupByKey: {
  <K, V>(options?: Repartitioned<K, V>): <E, R>(self: KStream<K, V, E, R>) => KGroupedStream<K, V, E, R>
  <K, V, E, R>(self: KStream<K, V, E, R>, options?: Repartitioned<K, V>): KGroupedStream<K, V, E, R>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R>(self: KStream<K, V, E, R>, options?: Repartitioned<K, V>): KGroupedStream<K, V, E, R> =>
    grouped.make(Graph.grouping(
      self.node,
      options === undefined ? undefined : Graph.codecs(options.key, options.value),
      options?.partitions,
      options?.name
    ))
)

/**
 * Groups the records by a new key: they are written to a repartition topic
 * keyed by it (`options`' codecs), so that all records of one key reach the
 * same task.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { KStream, Topic } from "skein"
 *
 * KStream.from(Orders).pipe(
 *   KStream.groupBy((order) => order.value.customer, { key: Schema.String, value: Topic.json(Order), name: "by-customer" })
 * )
 * ```
 *
 * @since 0.4.0
 * @category grouping
 */
export const groupBy: {
  <K, V, K2>(
    f: (record: Record<K, V>) => K2 | null,
    options: Repartitioned<K2, V>
  ): <E, R>(self: KStream<K, V, E, R>) => KGroupedStream<K2, V, E, R>
  <K, V, E, R, K2>(
    self: KStream<K, V, E, R>,
    f: (record: Record<K, V>) => K2 | null,
    options: Repartitioned<K2, V>
  ): KGroupedStream<K2, V, E, R>
} = dual(
  3,
  <K, V, E, R, K2>(self: KStream<K, V, E, R>, f: (record: Record<K, V>) => K2 | null, options: Repartitioned<K2, V>) => {
    const rekeyed = step<K, V, E, R, K2, V, never, never>(self, "selectKey", true, (r) => [{ ...r, key: f(typed<K, V>(r)) }], undefined)
    return grouped.make<K2, V, E, R>(Graph.repartition(
      rekeyed.node,
      Graph.codecs(options.key, options.value),
      options.partitions,
      options.name
    ))
  }
)

/**
 * Writes the records to `topic`, encoded with its codecs, in the task's
 * transaction.
 *
 * @since 0.4.0
 * @category sinks
 */
export const to: {
  <K, V>(topic: Topic.Topic<K, V>, options?: Named): <E, R>(self: KStream<K, V, E, R>) => Sink<E, R>
  <K, V, E, R>(self: KStream<K, V, E, R>, topic: Topic.Topic<K, V>, options?: Named): Sink<E, R>
} = dual(
  (args) => isStream(args[0]),
  <K, V, E, R>(self: KStream<K, V, E, R>, topic: Topic.Topic<K, V>, options?: Named): Sink<E, R> => ({
    [TypeId]: grouped.variance,
    node: Graph.sink(self.node, topic.name, (r) => {
      const record = typed<K, V>(r)
      return Topic.record(topic, record.key, record.value, record.headers, { timestamp: record.timestamp })
    }, options?.name)
  })
)

/**
 * The codecs a stream-stream join keeps each side's values with (Kafka
 * Streams' `StreamJoined`): `value` this stream's, `otherValue` the other's.
 *
 * @since 0.4.0
 * @category models
 */
export interface StreamJoined<V, VO> extends Named {
  readonly value: Topic.AnyCodec<V>
  readonly otherValue: Topic.AnyCodec<VO>
}

const windowedJoinOf = <K, V, E, R, VO, VR, E2, R2>(
  kind: Graph.StreamJoin["kind"],
  self: KStream<K, V, E, R>,
  other: KStream<K, VO, E2, R2>,
  joiner: (value: V | null, otherValue: VO | null, key: K | null) => VR,
  windows: JoinWindows,
  options: StreamJoined<V, VO>
): KStream<K, VR, E | E2, R | R2> =>
  fromNode(Graph.streamJoin(
    self.node,
    other.node,
    kind,
    windows,
    // The join hands each side the values its stream carried (`V`, `VO`), or `null` where the kind allows none.
    (left, right, key) => joiner(left as V | null, right as VO | null, key as K | null),
    { left: KeyText.make(options.value), right: KeyText.make(options.otherValue) },
    options.name
  ))

/**
 * Each record joined with the `other` stream's records of its key whose
 * timestamps are in its window (`JoinWindows`: at most `before` earlier and
 * `after` later; Kafka Streams' stream-stream `join`): one output per pair,
 * at once, with the larger timestamp of the two. Records of both streams
 * are kept in the task's state for the window plus grace (`options`'
 * codecs). The streams must be co-partitioned (equal partition counts,
 * checked by `Topology.run`), their keys unchanged since their sources
 * (`KStream.repartition` after a `selectKey`), and both key codecs must
 * write a key the same way. A record without a key or a value is dropped,
 * counted in `skein_streams_dropped_records_total` and logged.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { JoinWindows, KStream, Topic } from "skein"
 *
 * const paid = KStream.from(Orders).pipe(
 *   KStream.windowedJoin(KStream.from(Payments), (order, payment) => ({ order, payment }),
 *     JoinWindows.ofTimeDifferenceAndGrace("10 minutes", "1 minute"),
 *     { value: Topic.json(Order), otherValue: Topic.json(Payment), name: "paid" })
 * )
 * ```
 *
 * @since 0.4.0
 * @category joins
 */
export const windowedJoin: {
  <K, V, VO, VR, E2, R2>(
    other: KStream<K, VO, E2, R2>,
    joiner: (value: V, otherValue: VO, key: K) => VR,
    windows: JoinWindows,
    options: StreamJoined<V, VO>
  ): <E, R>(self: KStream<K, V, E, R>) => KStream<K, VR, E | E2, R | R2>
  <K, V, E, R, VO, VR, E2, R2>(
    self: KStream<K, V, E, R>,
    other: KStream<K, VO, E2, R2>,
    joiner: (value: V, otherValue: VO, key: K) => VR,
    windows: JoinWindows,
    options: StreamJoined<V, VO>
  ): KStream<K, VR, E | E2, R | R2>
} = dual(5, <K, V, E, R, VO, VR, E2, R2>(
  self: KStream<K, V, E, R>,
  other: KStream<K, VO, E2, R2>,
  joiner: (value: V, otherValue: VO, key: K) => VR,
  windows: JoinWindows,
  options: StreamJoined<V, VO>
): KStream<K, VR, E | E2, R | R2> =>
  // An inner join calls its joiner only with both values and a key.
  windowedJoinOf("inner", self, other, (v, o, k) => joiner(v as V, o as VO, k as K), windows, options))

/**
 * As `windowedJoin`, and each record of this stream without a partner is
 * joined with `null` (`l + null`) once its window plus grace has closed
 * (never before, and never in addition to a join: Kafka Streams since 3.1,
 * without its deviations listed in docs/streams.md). A record without a key
 * is joined with `null` at once (Kafka Streams since KIP-962).
 *
 * @since 0.4.0
 * @category joins
 */
export const windowedLeftJoin: {
  <K, V, VO, VR, E2, R2>(
    other: KStream<K, VO, E2, R2>,
    joiner: (value: V, otherValue: VO | null, key: K | null) => VR,
    windows: JoinWindows,
    options: StreamJoined<V, VO>
  ): <E, R>(self: KStream<K, V, E, R>) => KStream<K, VR, E | E2, R | R2>
  <K, V, E, R, VO, VR, E2, R2>(
    self: KStream<K, V, E, R>,
    other: KStream<K, VO, E2, R2>,
    joiner: (value: V, otherValue: VO | null, key: K | null) => VR,
    windows: JoinWindows,
    options: StreamJoined<V, VO>
  ): KStream<K, VR, E | E2, R | R2>
} = dual(5, <K, V, E, R, VO, VR, E2, R2>(
  self: KStream<K, V, E, R>,
  other: KStream<K, VO, E2, R2>,
  joiner: (value: V, otherValue: VO | null, key: K | null) => VR,
  windows: JoinWindows,
  options: StreamJoined<V, VO>
): KStream<K, VR, E | E2, R | R2> =>
  // A left join always has this stream's value.
  windowedJoinOf("left", self, other, (v, o, k) => joiner(v as V, o, k), windows, options))

/**
 * As `windowedLeftJoin`, for the records of both streams: a record of either
 * without a partner is joined with `null` for the other side once its window
 * plus grace has closed (`l + null`, `null + r`).
 *
 * @since 0.4.0
 * @category joins
 */
export const windowedOuterJoin: {
  <K, V, VO, VR, E2, R2>(
    other: KStream<K, VO, E2, R2>,
    joiner: (value: V | null, otherValue: VO | null, key: K | null) => VR,
    windows: JoinWindows,
    options: StreamJoined<V, VO>
  ): <E, R>(self: KStream<K, V, E, R>) => KStream<K, VR, E | E2, R | R2>
  <K, V, E, R, VO, VR, E2, R2>(
    self: KStream<K, V, E, R>,
    other: KStream<K, VO, E2, R2>,
    joiner: (value: V | null, otherValue: VO | null, key: K | null) => VR,
    windows: JoinWindows,
    options: StreamJoined<V, VO>
  ): KStream<K, VR, E | E2, R | R2>
} = dual(5, <K, V, E, R, VO, VR, E2, R2>(
  self: KStream<K, V, E, R>,
  other: KStream<K, VO, E2, R2>,
  joiner: (value: V | null, otherValue: VO | null, key: K | null) => VR,
  windows: JoinWindows,
  options: StreamJoined<V, VO>
): KStream<K, VR, E | E2, R | R2> => windowedJoinOf("outer", self, other, joiner, windows, options))

/**
 * True for a `KStream`.
 *
 * @since 0.4.0
 * @category guards
 */
export const isStream = (u: unknown): u is KStream<unknown, unknown, unknown, unknown> =>
  typeof u === "object" && u !== null && TypeId in u
