/**
 * The latest value per key: of a topic (`from`: a tombstone deletes its
 * key), or what an aggregation keeps (`KGroupedStream.count`, `reduce`,
 * `aggregate`). `mapValues` and `filter` keep table semantics (a filtered-out
 * update deletes); `toStream` turns its updates into a stream, one record per
 * update (Kafka Streams without a cache: every update is emitted, a deletion
 * as a tombstone); `KStream.join` and `KStream.leftJoin` look records up in it;
 * `join`, `leftJoin` and `outerJoin` join two tables on their key,
 * `foreignKeyJoin` and `foreignKeyLeftJoin` on a key of the other table that
 * each value names.
 *
 * @since 0.4.0
 */
import { Duration } from "effect"
import { dual } from "effect/Function"
import * as Graph from "./internal/streams/graph.ts"
import * as grouped from "./internal/streams/grouped.ts"
import * as TableTopic from "./internal/streams/tableTopic.ts"
import * as KStream from "./KStream.ts"
import type * as Topic from "./Topic.ts"

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

/**
 * The table of `topic`: the latest value per key, kept in the task's state
 * store (with its own changelog topic, restored and replicated to standbys as
 * any state); a record without a value (a tombstone) deletes its key, a
 * record without a key is dropped (counted in
 * `skein_streams_dropped_records_total`), a value that fails to decode is a
 * record error for the rules (the dead letter topic). Each record is an
 * update: `toStream` passes it on.
 *
 * @example
 * ```ts
 * import { KTable } from "skein"
 *
 * const customers = KTable.from(Customers)
 * ```
 *
 * @since 0.4.0
 * @category constructors
 */
export const from = <K, V>(topic: Topic.Topic<K, V>, options?: FromOptions): KTable<K, V> =>
  grouped.table(Graph.tableSource(
    topic,
    TableTopic.tableView(topic),
    TableTopic.storedValue(topic.value),
    options?.name,
    options?.versioned === undefined ? undefined : { historyMs: Duration.toMillis(options.versioned.historyRetention) },
    options?.sourceChangelog === true
  ))

/**
 * Options of `KTable.from`: its name (which names its state), and
 * `versioned` for a versioned table (Kafka Streams' versioned key-value
 * store, KIP-889): it keeps each key's earlier values for
 * `historyRetention` of its stream time (the largest timestamp it has read),
 * and a stream record joined with it (`KStream.join`, `leftJoin`) gets the
 * value the table had at the record's timestamp, or none when that is older
 * than the history kept (unless the latest value is older still). A record
 * older than the table's stream time minus `historyRetention` is dropped.
 * A versioned table can only be joined by a stream, for now.
 *
 * `sourceChangelog: true` keeps the table with its topic as its changelog
 * (Kafka Streams' source-topic changelog, `reuse.ktable.source.topics`): no
 * `-changelog` topic is written, and a task restores the table from the
 * topic up to its committed offset. The topic must be compacted; the table
 * must be the only state of its sub-topology and be read by stream-table
 * joins only (see docs/streams.md, "Source-topic changelogs"). Off by
 * default, as in Kafka Streams.
 *
 * @since 0.6.0
 * @category models
 */
export interface FromOptions extends KStream.Named {
  readonly versioned?: { readonly historyRetention: Duration.DurationInput } | undefined
  readonly sourceChangelog?: boolean | undefined
}

/** The DSL's type erasure, recovered: a table change reaching an operator was made by the operators that typed it. */
const typed = <K, V>(record: Graph.StreamRecord): KStream.Record<K, V> => record as KStream.Record<K, V>

/**
 * The table with each value mapped (a deletion stays one). A join reads the
 * mapped value: it is computed from the stored value when a record looks its
 * key up, as Kafka Streams' value getters do.
 *
 * @example
 * ```ts
 * import { KTable } from "skein"
 *
 * const regions = KTable.from(Customers).pipe(KTable.mapValues((customer) => customer.region))
 * ```
 *
 * @since 0.4.0
 * @category mapping
 */
export const mapValues: {
  <K, V, V2>(f: (value: V, record: KStream.Record<K, V>) => V2, options?: KStream.Named): <E, R>(self: KTable<K, V, E, R>) => KTable<K, V2, E, R>
  <K, V, E, R, V2>(self: KTable<K, V, E, R>, f: (value: V, record: KStream.Record<K, V>) => V2, options?: KStream.Named): KTable<K, V2, E, R>
} = dual(
  (args) => isTable(args[0]),
  <K, V, E, R, V2>(self: KTable<K, V, E, R>, f: (value: V, record: KStream.Record<K, V>) => V2, options?: KStream.Named) =>
    grouped.table<K, V2, E, R>(Graph.tableStep(self.node, "mapValues", (r) => {
      const record = typed<K, V>(r)
      return f(record.value, record)
    }, options?.name))
)

/**
 * The table of the values `predicate` accepts: an update it rejects deletes
 * the key (`toStream` emits a tombstone for it, as Kafka Streams does).
 *
 * @example
 * ```ts
 * import { KTable } from "skein"
 *
 * const active = KTable.from(Customers).pipe(KTable.filter((customer) => customer.value.active))
 * ```
 *
 * @since 0.4.0
 * @category filtering
 */
export const filter: {
  <K, V>(predicate: (record: KStream.Record<K, V>) => boolean, options?: KStream.Named): <E, R>(self: KTable<K, V, E, R>) => KTable<K, V, E, R>
  <K, V, E, R>(self: KTable<K, V, E, R>, predicate: (record: KStream.Record<K, V>) => boolean, options?: KStream.Named): KTable<K, V, E, R>
} = dual(
  (args) => isTable(args[0]),
  <K, V, E, R>(self: KTable<K, V, E, R>, predicate: (record: KStream.Record<K, V>) => boolean, options?: KStream.Named) =>
    grouped.table<K, V, E, R>(Graph.tableStep(self.node, "filter", (r) => predicate(typed<K, V>(r)) ? r.value : null, options?.name))
)

/**
 * Options of a table-table join: its name in the topology (`describe`).
 *
 * @since 0.4.0
 * @category models
 */
export type Joined = KStream.Named

const tableJoin = <K, V, E, R, VO, VR, E2, R2>(
  self: KTable<K, V, E, R>,
  other: KTable<K, VO, E2, R2>,
  kind: "inner" | "left" | "outer",
  joiner: (value: unknown, otherValue: unknown) => VR,
  options: Joined | undefined
): KTable<K, VR, E | E2, R | R2> => grouped.table(Graph.tableJoin(self.node, other.node, kind, joiner, options?.name))

/**
 * The two tables joined on their key (an inner join): a key has a value
 * while both tables have one, `joiner(value, otherValue)`. An update of
 * either table emits the key's new joined value (`toStream`), a deletion on
 * either side a tombstone, as Kafka Streams' table-table join: every update
 * emits, even one that changes nothing; an update while the other table has
 * no value emits nothing. The result's timestamp is the larger of the
 * update's and the other value's. Both tables are kept in one task per
 * partition, so their topics must be co-partitioned (equal partition counts,
 * checked by `Topology.run`).
 *
 * @example
 * ```ts
 * import { KTable } from "skein"
 *
 * const profiles = KTable.from(Customers).pipe(
 *   KTable.join(KTable.from(Addresses), (customer, address) => ({ ...customer, address }))
 * )
 * ```
 *
 * @since 0.4.0
 * @category joins
 */
export const join: {
  <K, V, VO, VR, E2, R2>(
    other: KTable<K, VO, E2, R2>,
    joiner: (value: V, otherValue: VO) => VR,
    options?: Joined
  ): <E, R>(self: KTable<K, V, E, R>) => KTable<K, VR, E | E2, R | R2>
  <K, V, E, R, VO, VR, E2, R2>(
    self: KTable<K, V, E, R>,
    other: KTable<K, VO, E2, R2>,
    joiner: (value: V, otherValue: VO) => VR,
    options?: Joined
  ): KTable<K, VR, E | E2, R | R2>
} = dual(
  (args) => isTable(args[1]),
  <K, V, E, R, VO, VR, E2, R2>(
    self: KTable<K, V, E, R>,
    other: KTable<K, VO, E2, R2>,
    joiner: (value: V, otherValue: VO) => VR,
    options?: Joined
  ): KTable<K, VR, E | E2, R | R2> =>
    // An inner join calls its joiner with both values, made by the tables' operators: a `V` and a `VO`.
    tableJoin(self, other, "inner", (value, otherValue) => joiner(value as V, otherValue as VO), options)
)

/**
 * The two tables joined on their key, keeping every key of this table (a
 * left join): `joiner(value, otherValue)`, with `null` while the other table
 * has no value. An update of this table emits; one of the other table emits
 * while this table has a value for its key (joined with `null` for a
 * deletion). Deleting a key of this table emits a tombstone, unless neither
 * table had a value for it. Otherwise as `join`.
 *
 * @example
 * ```ts
 * import { KTable } from "skein"
 *
 * KTable.from(Customers).pipe(
 *   KTable.leftJoin(KTable.from(Addresses), (customer, address) => ({ ...customer, address: address ?? "unknown" }))
 * )
 * ```
 *
 * @since 0.4.0
 * @category joins
 */
export const leftJoin: {
  <K, V, VO, VR, E2, R2>(
    other: KTable<K, VO, E2, R2>,
    joiner: (value: V, otherValue: VO | null) => VR,
    options?: Joined
  ): <E, R>(self: KTable<K, V, E, R>) => KTable<K, VR, E | E2, R | R2>
  <K, V, E, R, VO, VR, E2, R2>(
    self: KTable<K, V, E, R>,
    other: KTable<K, VO, E2, R2>,
    joiner: (value: V, otherValue: VO | null) => VR,
    options?: Joined
  ): KTable<K, VR, E | E2, R | R2>
} = dual(
  (args) => isTable(args[1]),
  <K, V, E, R, VO, VR, E2, R2>(
    self: KTable<K, V, E, R>,
    other: KTable<K, VO, E2, R2>,
    joiner: (value: V, otherValue: VO | null) => VR,
    options?: Joined
  ): KTable<K, VR, E | E2, R | R2> =>
    // The tables' operators made the values: this table's (a `V`, always there), the other's (a `VO`, or none).
    tableJoin(self, other, "left", (value, otherValue) => joiner(value as V, otherValue as VO | null), options)
)

/**
 * The two tables joined on their key, keeping every key of either (an outer
 * join): `joiner(value, otherValue)`, either `null` while its table has no
 * value for the key (never both). An update of either table emits; a
 * deletion emits the other side's value joined with `null`, or a tombstone
 * once neither table has a value (nothing when neither had one). Otherwise
 * as `join`.
 *
 * @example
 * ```ts
 * import { KTable } from "skein"
 *
 * KTable.from(Customers).pipe(
 *   KTable.outerJoin(KTable.from(Addresses), (customer, address) => ({ customer, address }))
 * )
 * ```
 *
 * @since 0.4.0
 * @category joins
 */
export const outerJoin: {
  <K, V, VO, VR, E2, R2>(
    other: KTable<K, VO, E2, R2>,
    joiner: (value: V | null, otherValue: VO | null) => VR,
    options?: Joined
  ): <E, R>(self: KTable<K, V, E, R>) => KTable<K, VR, E | E2, R | R2>
  <K, V, E, R, VO, VR, E2, R2>(
    self: KTable<K, V, E, R>,
    other: KTable<K, VO, E2, R2>,
    joiner: (value: V | null, otherValue: VO | null) => VR,
    options?: Joined
  ): KTable<K, VR, E | E2, R | R2>
} = dual(
  (args) => isTable(args[1]),
  <K, V, E, R, VO, VR, E2, R2>(
    self: KTable<K, V, E, R>,
    other: KTable<K, VO, E2, R2>,
    joiner: (value: V | null, otherValue: VO | null) => VR,
    options?: Joined
  ): KTable<K, VR, E | E2, R | R2> =>
    // The tables' operators made the values (a `V`, a `VO`), or the side has none.
    tableJoin(self, other, "outer", (value, otherValue) => joiner(value as V | null, otherValue as VO | null), options)
)

/**
 * Options of a foreign-key join: its name in the topology (`describe`),
 * which also names its internal topics
 * (`{applicationId}-{name}-subscription-registration-topic` and
 * `{applicationId}-{name}-subscription-response-topic`) and its subscription
 * store: name a join whose topology may change, so that they stay.
 *
 * @since 0.6.0
 * @category models
 */
export type ForeignKeyJoined = KStream.Named

const onForeignKey = <K, V, E, R, KO, VO, VR, E2, R2>(
  self: KTable<K, V, E, R>,
  other: KTable<KO, VO, E2, R2>,
  kind: "inner" | "left",
  foreignKey: (value: V, key: K) => KO | null,
  joiner: (value: unknown, otherValue: unknown) => VR,
  options: ForeignKeyJoined | undefined
): KTable<K, VR, E | E2, R | R2> =>
  grouped.table(Graph.foreignKeyJoin({
    kind,
    left: self.node,
    right: other.node,
    // The left table's operators made the value (a `V`) of a key of its topic (a `K`).
    foreignKey: (value, key) => foreignKey(value as V, key as K),
    joiner
  }, options?.name))

/**
 * This table joined with `other` on the key of `other` that each of its
 * values names (a foreign-key join, inner: Kafka Streams'
 * `KTable.join(other, foreignKeyExtractor, joiner)`, KIP-213): a key of this
 * table has a value while its value names a key of `other` (`foreignKey`,
 * `null`: none) and `other` has a value for it, `joiner(value, otherValue)`.
 * The result is keyed by this table's key.
 *
 * An update of this table emits the joined value once `other` answers, or a
 * deletion when its new foreign key has no value there (if the key was
 * joined before, or may have been); an update of `other` emits for every key
 * of this table that names it. As in Kafka Streams, each update travels
 * through two internal topics: subscriptions keyed by the foreign key (with
 * `other`'s partition count) and responses keyed by this table's key (with
 * this table's), so that neither table needs to be co-partitioned with the
 * other; a response for a value this table no longer has is dropped (counted
 * in `skein_streams_dropped_records_total`). Both tables must be read from
 * topics (`KTable.from`, with `filter` and `mapValues`), and be two tables.
 * Exactly-once as every sub-topology: the subscriptions, the responses and
 * the right side's subscription store commit in their tasks' transactions.
 *
 * @example
 * ```ts
 * import { KTable } from "skein"
 *
 * const orders = KTable.from(Orders).pipe(
 *   KTable.foreignKeyJoin(KTable.from(Customers), (order) => order.customer, (order, customer) => ({ ...order, customer }))
 * )
 * ```
 *
 * @since 0.6.0
 * @category joins
 */
export const foreignKeyJoin: {
  <K, V, KO, VO, VR, E2, R2>(
    other: KTable<KO, VO, E2, R2>,
    foreignKey: (value: V, key: K) => KO | null,
    joiner: (value: V, otherValue: VO) => VR,
    options?: ForeignKeyJoined
  ): <E, R>(self: KTable<K, V, E, R>) => KTable<K, VR, E | E2, R | R2>
  <K, V, E, R, KO, VO, VR, E2, R2>(
    self: KTable<K, V, E, R>,
    other: KTable<KO, VO, E2, R2>,
    foreignKey: (value: V, key: K) => KO | null,
    joiner: (value: V, otherValue: VO) => VR,
    options?: ForeignKeyJoined
  ): KTable<K, VR, E | E2, R | R2>
} = dual(
  (args) => isTable(args[1]),
  <K, V, E, R, KO, VO, VR, E2, R2>(
    self: KTable<K, V, E, R>,
    other: KTable<KO, VO, E2, R2>,
    foreignKey: (value: V, key: K) => KO | null,
    joiner: (value: V, otherValue: VO) => VR,
    options?: ForeignKeyJoined
  ): KTable<K, VR, E | E2, R | R2> =>
    // An inner join calls its joiner with both values, made by the tables' operators: a `V` and a `VO`.
    onForeignKey(self, other, "inner", foreignKey, (value, otherValue) => joiner(value as V, otherValue as VO), options)
)

/**
 * This table joined with `other` on the key of `other` each of its values
 * names, keeping every key of this table (a foreign-key left join: Kafka
 * Streams' `KTable.leftJoin(other, foreignKeyExtractor, joiner)`):
 * `joiner(value, otherValue)`, with `null` while the value names no key of
 * `other` or `other` has no value for it. Every update of this table emits
 * (a deletion a tombstone) once its answer comes back; otherwise as
 * `foreignKeyJoin`.
 *
 * @example
 * ```ts
 * import { KTable } from "skein"
 *
 * KTable.from(Orders).pipe(
 *   KTable.foreignKeyLeftJoin(KTable.from(Customers), (order) => order.customer, (order, customer) => ({ ...order, customer }))
 * )
 * ```
 *
 * @since 0.6.0
 * @category joins
 */
export const foreignKeyLeftJoin: {
  <K, V, KO, VO, VR, E2, R2>(
    other: KTable<KO, VO, E2, R2>,
    foreignKey: (value: V, key: K) => KO | null,
    joiner: (value: V, otherValue: VO | null) => VR,
    options?: ForeignKeyJoined
  ): <E, R>(self: KTable<K, V, E, R>) => KTable<K, VR, E | E2, R | R2>
  <K, V, E, R, KO, VO, VR, E2, R2>(
    self: KTable<K, V, E, R>,
    other: KTable<KO, VO, E2, R2>,
    foreignKey: (value: V, key: K) => KO | null,
    joiner: (value: V, otherValue: VO | null) => VR,
    options?: ForeignKeyJoined
  ): KTable<K, VR, E | E2, R | R2>
} = dual(
  (args) => isTable(args[1]),
  <K, V, E, R, KO, VO, VR, E2, R2>(
    self: KTable<K, V, E, R>,
    other: KTable<KO, VO, E2, R2>,
    foreignKey: (value: V, key: K) => KO | null,
    joiner: (value: V, otherValue: VO | null) => VR,
    options?: ForeignKeyJoined
  ): KTable<K, VR, E | E2, R | R2> =>
    // The tables' operators made the values: this table's (a `V`, always there), the other's (a `VO`, or none).
    onForeignKey(self, other, "left", foreignKey, (value, otherValue) => joiner(value as V, otherValue as VO | null), options)
)

/**
 * True for a `KTable`.
 *
 * @since 0.4.0
 * @category guards
 */
export const isTable = (u: unknown): u is KTable<unknown, unknown, unknown, unknown> =>
  typeof u === "object" && u !== null && TypeId in u
