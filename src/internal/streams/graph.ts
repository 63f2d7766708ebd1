/**
 * The stream DSL's graph: what `KStream`, `KGroupedStream` and `KTable`
 * build, and what `compile.ts` turns into transformers.
 *
 * Nodes point to their parents (a DSL value is immutable: a later operator
 * never changes an earlier one). Each node has a creation number: children
 * run in the order they were declared, as in Kafka Streams. A node's name is
 * its explicit `name`, else one given at compile time from its kind and its
 * place in the topology (Kafka Streams' `KSTREAM-FILTER-0000000001`), stable
 * while the topology is unchanged: name what owns state or an internal topic.
 *
 * Types are erased here: values are `unknown`, and what needs a record's
 * types (a sink's encoding, an internal topic's codecs, an aggregate's
 * state) is a closure made where the types were known.
 *
 * @internal
 */
import type { Effect, Option, Schema } from "effect"
import type { JoinWindows } from "../../JoinWindows.ts"
import type * as Timer from "../../Timer.ts"
import type { Declaration as StoreDeclaration } from "../stores/access.ts"
import type { SessionWindows } from "../../SessionWindows.ts"
import type { SlidingWindows } from "../../SlidingWindows.ts"
import type { TimeWindows } from "../../TimeWindows.ts"
import * as Topic from "../../Topic.ts"
import type { InputRecord } from "../../Transformer.ts"
import * as KeyText from "./keyText.ts"
import * as VersionedTable from "./versionedTable.ts"

/** A record as it flows through the DSL's operators. */
export interface StreamRecord {
  readonly key: unknown
  readonly value: unknown
  /** Milliseconds since the epoch: the input record's, carried to every output (as in Kafka Streams). */
  readonly timestamp: number
  readonly headers: ReadonlyArray<readonly [string, Buffer]>
  /**
   * A table change's previous value (`null`: none), set where a table-table
   * join needs it (Kafka Streams' `sendOldValues`: its inputs and the table
   * operators between).
   */
  readonly previous?: unknown
}

/** What one operator does with a record: the records it passes on, at once or from an effect. */
export type Step = (
  record: StreamRecord
) => ReadonlyArray<StreamRecord> | Effect.Effect<ReadonlyArray<StreamRecord>, unknown, unknown>

/** The kind of a step, for names and `describe`. */
export type StepKind = "filter" | "map" | "mapValues" | "flatMap" | "flatMapValues" | "selectKey" | "toStream"

/** An internal topic's typed side: its topic (for inputs) and how a record is written to it. */
export interface InternalTopic {
  readonly topic: Topic.Any
  readonly write: (record: StreamRecord) => Topic.OutputRecord
  /** Its keys as text and back (a windowed aggregation keeps its open windows' keys). */
  readonly keyText: KeyText.KeyText
}

/** The event time of an input record (`KStream.fromTopics`' `timestamp`), in milliseconds since the epoch. */
export type TimestampExtractor = (record: InputRecord<unknown, unknown>) => number

/** How an aggregation is windowed (`KGroupedStream.windowedBy`). */
export interface Windowing {
  readonly windows: TimeWindows | SlidingWindows | SessionWindows
  /** Every update of a window, or its final result once it closes. */
  readonly emit: "onWindowUpdate" | "onWindowClose"
  /** A record no window accepts: dropped (logged and counted), or a `LateRecord` error for the rules. */
  readonly late: "drop" | "error"
}

/** Codecs of an internal topic, whatever their types: the topic is made once its name is known. */
export interface Codecs {
  readonly topic: (name: string) => InternalTopic
}

/** How an aggregate is kept: its stored form and how a record updates it. */
export interface AggregateSpec<A, I> {
  /** The aggregate's stored form (JSON of its encoded side). */
  readonly state: Schema.Schema<A, I>
  /** The key's aggregate after `record` (`None`: the key's first record). */
  readonly add: (aggregate: Option.Option<A>, record: StreamRecord) => A
  /**
   * Session windows: the aggregate a record starts from (Kafka Streams' initializer: `None` for a
   * reduce) and how the aggregates of the sessions it merges are folded into it.
   */
  readonly session?: {
    readonly initial: () => Option.Option<A>
    readonly merge: (aggregate: Option.Option<A>, session: A) => Option.Option<A>
  }
}

export type Node =
  | Source
  | StepNode
  | Merge
  | Repartition
  | Grouping
  | Aggregate
  | Sink
  | TableSource
  | TableStep
  | Join
  | TableJoin
  | StreamJoin
  | FkSubscribe
  | FkRespond
  | FkResponse
  | FkJoin
  | GlobalTableSource
  | GlobalJoin
  | Process

interface Base {
  /** Creation order: children run in the order they were declared. */
  readonly seq: number
  /** Set by the user (`{ name }`), else given at compile time. */
  readonly name: string | undefined
}

/**
 * A foreign-key table-table join (`KTable.foreignKeyJoin`, Kafka Streams'
 * `KTable.join(other, foreignKeyExtractor, joiner)`, KIP-213), shared by its
 * four nodes: the left table's changes subscribe to the right table's key
 * their value names (`FkSubscribe`, a topic keyed by that key, co-partitioned
 * with the right table), the right side keeps the subscriptions and answers
 * them and its own changes (`FkRespond`) on a topic keyed by the left key
 * (`FkResponse`, co-partitioned with the left table), and the left side joins
 * each answer still current with its value (`FkJoin`): `foreignKeyJoin.ts`.
 */
export interface ForeignKeyJoin {
  readonly kind: "inner" | "left"
  /** The left table, and the right table whose key its values name. */
  readonly left: Node
  readonly right: Node
  /** The right table's key a left value names (`null`: none). */
  readonly foreignKey: (value: unknown, key: unknown) => unknown
  /** The joined value of a left value and a right value (`null`: none, a left join's). */
  readonly joiner: (left: unknown, right: unknown) => unknown
}

/** A foreign-key join's subscriptions: written by the left table's sub-topology, read by the right table's. */
export interface FkSubscribe extends Base {
  readonly _tag: "FkSubscribe"
  readonly join: ForeignKeyJoin
  /** The left table. */
  readonly parent: Node
}

/** A foreign-key join's right side: keeps the subscriptions and answers them and the right table's changes. */
export interface FkRespond extends Base {
  readonly _tag: "FkRespond"
  readonly join: ForeignKeyJoin
  readonly subscriptions: FkSubscribe
  /** The right table. */
  readonly table: Node
}

/** A foreign-key join's responses: written by the right table's sub-topology, read by the left table's. */
export interface FkResponse extends Base {
  readonly _tag: "FkResponse"
  readonly join: ForeignKeyJoin
  readonly parent: FkRespond
}

/** A foreign-key join's result: each current response joined with the left table's value, as a table change. */
export interface FkJoin extends Base {
  readonly _tag: "FkJoin"
  readonly join: ForeignKeyJoin
  readonly responses: FkResponse
  /** The left table. */
  readonly table: Node
}

/**
 * A global table (`GlobalKTable.from`): every partition of its topic on
 * every instance, kept up to date apart from any task (`globalTable.ts`). It
 * is no sub-topology's input: a join reads it when a stream record looks a
 * key up.
 */
export interface GlobalTableSource extends Base {
  readonly _tag: "GlobalTableSource"
  /** The topic's table view: a tombstone decodes to a `null` value. */
  readonly topic: Topic.Any
  readonly keyText: KeyText.KeyText
}

/**
 * A stream joined with a global table (`KStream.globalJoin`,
 * `globalLeftJoin`): each stream record looks up the key its `keyMapper`
 * gives; the global table is not a parent (it is in no sub-topology).
 */
export interface GlobalJoin extends Base {
  readonly _tag: "GlobalJoin"
  readonly kind: "inner" | "left"
  readonly stream: Node
  readonly table: GlobalTableSource
  /** The global table's key of a stream record (`null`: none); throws what the user's mapper throws. */
  readonly keyMapper: (record: StreamRecord) => unknown
  /** The joined value of a stream record and the global table's value (`null`: none, a left join's). */
  readonly joiner: (record: StreamRecord, globalValue: unknown) => unknown
}

/** Records of one or more topics. */
export interface Source extends Base {
  readonly _tag: "Source"
  readonly topics: ReadonlyArray<Topic.Any>
  /** Per topic (same order), its keys as text and back. */
  readonly keyTexts: ReadonlyArray<KeyText.KeyText>
  /** Unset: the record's own timestamp. */
  readonly timestamp: TimestampExtractor | undefined
}

/** A stateless operator. */
export interface StepNode extends Base {
  readonly _tag: "Step"
  readonly kind: StepKind
  readonly parent: Node
  /** True when the operator may change the key: a later grouping repartitions. */
  readonly keyChanging: boolean
  readonly step: Step
}

/** Several streams as one. */
export interface Merge extends Base {
  readonly _tag: "Merge"
  readonly parents: ReadonlyArray<Node>
}

/**
 * Records written to an internal topic keyed by their key, and read back
 * from it (`{applicationId}-{name}-repartition`): every record of one key
 * then reaches the same task.
 */
export interface Repartition extends Base {
  readonly _tag: "Repartition"
  readonly parent: Node
  readonly codecs: Codecs
  /** The internal topic's partition count; unset: the upstream source topics' largest. */
  readonly partitions: number | undefined
}

/**
 * A grouping by the records' own key (`groupByKey`): a repartition when an
 * operator above may have changed the key (with `codecs`, which must then be
 * given), else nothing.
 */
export interface Grouping extends Base {
  readonly _tag: "Grouping"
  readonly parent: Node
  readonly codecs: Codecs | undefined
  readonly partitions: number | undefined
}

/** A running aggregate per key (count, reduce, aggregate): its updates flow on as a table's changes. */
export interface Aggregate extends Base {
  readonly _tag: "Aggregate"
  readonly kind: "count" | "reduce" | "aggregate"
  /** A repartition, a grouping or a source: records keyed by the aggregate's key. */
  readonly parent: Node
  /** The spec, whatever its aggregate's type: `use` hands it to a function generic in it. */
  readonly use: <X>(f: <A, I>(spec: AggregateSpec<A, I>) => X) => X
  /** Set for a windowed aggregation: one aggregate per key and window. */
  readonly windowing: Windowing | undefined
}

/**
 * A table read from topics (`KTable.from`): the latest value per key, kept
 * in the sub-topology's state (its changelog); a tombstone (`null` value)
 * deletes. Each update flows on as a table change: the key, the new value or
 * `null`, the record's timestamp.
 */
export interface TableSource extends Base {
  readonly _tag: "TableSource"
  /** The topics' table views: a tombstone decodes to a `null` value. */
  readonly topics: ReadonlyArray<Topic.Any>
  readonly keyTexts: ReadonlyArray<KeyText.KeyText>
  /** How a value is stored, whatever its type: the state's Schema is made where it was known. */
  readonly use: <X>(f: <V, I>(value: Schema.Schema<V, I>) => X) => X
  /** The topic's key codec, whatever its type (a foreign-key join's internal topics are keyed by it). */
  readonly keyed: <X>(f: <K>(key: Topic.AnyCodec<K>) => X) => X
  /**
   * Set for a versioned table (`KTable.from(topic, { versioned })`): it keeps each key's versions
   * within the history retention (`versionedTable.ts`; `use` then stores a key's versions), and a
   * stream record joins the value as of its own timestamp.
   */
  readonly versioned: { readonly historyMs: number } | undefined
  /**
   * Set with `KTable.from(topic, { sourceChangelog: true })`: the topic is the table's changelog
   * (Kafka Streams' source-topic changelog), its sub-topology writes none.
   */
  readonly sourceChangelog: boolean
}

/**
 * A table operator (`KTable.mapValues`, `KTable.filter`): the new value of a
 * change, or `null` (deleted). A deletion stays one without calling `apply`.
 */
export interface TableStep extends Base {
  readonly _tag: "TableStep"
  readonly kind: "filter" | "mapValues"
  readonly parent: Node
  /** The value after the operator for a change with a (non-null) value: `null` deletes. */
  readonly apply: (record: StreamRecord) => unknown
}

/**
 * A stream joined with a table on the record key (`KStream.join`,
 * `KStream.leftJoin`): each stream record looks its key up in the table's
 * state; table changes update that state and emit nothing.
 */
export interface Join extends Base {
  readonly _tag: "Join"
  readonly kind: "inner" | "left"
  readonly stream: Node
  readonly table: Node
  /** The joined value of a stream record and the table's value (`null`: none, a left join's). */
  readonly joiner: (record: StreamRecord, tableValue: unknown) => unknown
}

/**
 * Two tables joined on their key (`KTable.join`, `leftJoin`, `outerJoin`):
 * a change of either side looks the key up in the other side's table and
 * emits the joined value, or `null` (a deletion), as a table change (Kafka
 * Streams' `KTableKTableJoin` processors; `tableJoin.ts`).
 */
export interface TableJoin extends Base {
  readonly _tag: "TableJoin"
  readonly kind: "inner" | "left" | "outer"
  readonly left: Node
  readonly right: Node
  /** The joined value of the two sides' values (`null`: none, a left or outer join's). */
  readonly joiner: (left: unknown, right: unknown) => unknown
}

/**
 * Two streams joined on their key within a time window (`KStream.windowedJoin`,
 * `windowedLeftJoin`, `windowedOuterJoin`; Kafka Streams' stream-stream join):
 * each record joins the other side's records of its key in its window, and a
 * left or outer join emits a record without a partner once its window plus
 * grace has closed (`streamStreamJoin.ts`).
 */
export interface StreamJoin extends Base {
  readonly _tag: "StreamJoin"
  readonly kind: "inner" | "left" | "outer"
  readonly left: Node
  readonly right: Node
  readonly windows: JoinWindows
  /** The joined value of a left and a right value (`null`: none, a left or outer join's), and the key. */
  readonly joiner: (left: unknown, right: unknown, key: unknown) => unknown
  /** How each side's values are kept in the join's state, as text (its codec's encoded form). */
  readonly values: { readonly left: KeyText.KeyText; readonly right: KeyText.KeyText }
}

/** Where the record a process node runs on came from: its input record's topic, partition and offset. */
export interface Position {
  readonly topic: string
  readonly partition: number
  readonly offset: number
}

/** A record a process node forwards: unset timestamp and headers take the defaults of where it runs (`process.ts`). */
export interface ProcessOutput {
  readonly key: unknown
  readonly value: unknown
  readonly timestamp?: number | undefined
  readonly headers?: ReadonlyArray<readonly [string, Buffer]> | undefined
}

/** What a process node's `process` or `onTimer` returns, types erased. */
export interface ProcessResult {
  readonly outputs?: ReadonlyArray<ProcessOutput> | undefined
  readonly timers?: ReadonlyArray<Timer.Change> | undefined
}

/**
 * A processor (`KStream.process`, Kafka Streams' `KStream#process`): the
 * user's function on each record, with named stores and per-key timers of
 * its own, compiled into its sub-topology's transformer (`process.ts`).
 */
export interface Process extends Base {
  readonly _tag: "Process"
  readonly parent: Node
  /** The named stores `process` and `onTimer` use: they join the sub-topology's transformer's stores. */
  readonly stores: ReadonlyArray<StoreDeclaration>
  readonly process: (record: StreamRecord, position: Position) => Effect.Effect<ProcessResult, unknown, unknown>
  /** Runs a due timer the node scheduled (its name as the user gave it); unset: the node schedules none. */
  readonly onTimer: ((timer: Timer.Fired) => Effect.Effect<ProcessResult, unknown, unknown>) | undefined
}

/** Records written to a topic. */
export interface Sink extends Base {
  readonly _tag: "Sink"
  readonly parent: Node
  readonly topic: string
  readonly write: (record: StreamRecord) => Topic.OutputRecord
}

let created = 0
const next = (): number => ++created

export const source = <K, V>(
  topics: ReadonlyArray<Topic.Topic<K, V>>,
  timestamp: ((record: InputRecord<K, V>) => number) | undefined
): Source => ({
  _tag: "Source",
  seq: next(),
  name: undefined,
  topics,
  keyTexts: topics.map((topic) => KeyText.make(topic.key)),
  // The records of these topics are typed `K`, `V` by their codecs.
  timestamp: timestamp === undefined ? undefined : (record) => timestamp(record as InputRecord<K, V>)
})

/** The table of `topic`, read through its table view (`tableTopic.ts`), its values stored as `value`. */
export const tableSource = <K, V, I>(
  topic: Topic.Topic<K, V>,
  view: Topic.Any,
  value: Schema.Schema<V, I>,
  name: string | undefined,
  versioned?: { readonly historyMs: number },
  sourceChangelog = false
): TableSource => ({
  _tag: "TableSource",
  seq: next(),
  name,
  topics: [view],
  keyTexts: [KeyText.make(topic.key)],
  use: (f) => versioned === undefined ? f(value) : f(VersionedTable.versionsSchema(value)),
  keyed: (f) => f(topic.key),
  versioned,
  sourceChangelog
})

export const tableStep = (
  parent: Node,
  kind: TableStep["kind"],
  apply: TableStep["apply"],
  name: string | undefined
): TableStep => ({ _tag: "TableStep", seq: next(), name, kind, parent, apply })

export const join = (
  stream: Node,
  table: Node,
  kind: Join["kind"],
  joiner: Join["joiner"],
  name: string | undefined
): Join => ({ _tag: "Join", seq: next(), name, kind, stream, table, joiner })

export const tableJoin = (
  left: Node,
  right: Node,
  kind: TableJoin["kind"],
  joiner: TableJoin["joiner"],
  name: string | undefined
): TableJoin => ({ _tag: "TableJoin", seq: next(), name, kind, left, right, joiner })

export const streamJoin = (
  left: Node,
  right: Node,
  kind: StreamJoin["kind"],
  windows: JoinWindows,
  joiner: StreamJoin["joiner"],
  values: StreamJoin["values"],
  name: string | undefined
): StreamJoin => ({ _tag: "StreamJoin", seq: next(), name, kind, left, right, windows, joiner, values })

/** The four nodes of a foreign-key join named `name` (unset: named at compile time), its result last. */
export const foreignKeyJoin = (join: ForeignKeyJoin, name: string | undefined): FkJoin => {
  const subscriptions: FkSubscribe = {
    _tag: "FkSubscribe",
    seq: next(),
    name: name === undefined ? undefined : `${name}-subscription-registration`,
    join,
    parent: join.left
  }
  const respond: FkRespond = {
    _tag: "FkRespond",
    seq: next(),
    name: name === undefined ? undefined : `${name}-subscription-store`,
    join,
    subscriptions,
    table: join.right
  }
  const responses: FkResponse = {
    _tag: "FkResponse",
    seq: next(),
    name: name === undefined ? undefined : `${name}-subscription-response`,
    join,
    parent: respond
  }
  return { _tag: "FkJoin", seq: next(), name, join, responses, table: join.left }
}

/** The global table of `topic`, read through its table view. */
export const globalTableSource = <K, V>(topic: Topic.Topic<K, V>, view: Topic.Any, name: string | undefined): GlobalTableSource => ({
  _tag: "GlobalTableSource",
  seq: next(),
  name,
  topic: view,
  keyText: KeyText.make(topic.key)
})

export const globalJoin = (
  stream: Node,
  table: GlobalTableSource,
  kind: GlobalJoin["kind"],
  keyMapper: GlobalJoin["keyMapper"],
  joiner: GlobalJoin["joiner"],
  name: string | undefined
): GlobalJoin => ({ _tag: "GlobalJoin", seq: next(), name, kind, stream, table, keyMapper, joiner })

export const step = (parent: Node, kind: StepKind, keyChanging: boolean, run: Step, name: string | undefined): StepNode => ({
  _tag: "Step",
  seq: next(),
  name,
  kind,
  parent,
  keyChanging,
  step: run
})

export const process = (
  parent: Node,
  stores: ReadonlyArray<StoreDeclaration>,
  run: Process["process"],
  onTimer: Process["onTimer"],
  name: string | undefined
): Process => ({ _tag: "Process", seq: next(), name, parent, stores, process: run, onTimer })

export const merge = (parents: ReadonlyArray<Node>, name: string | undefined): Merge => ({
  _tag: "Merge",
  seq: next(),
  name,
  parents
})

export const repartition = (parent: Node, codecs: Codecs, partitions: number | undefined, name: string | undefined): Repartition => ({
  _tag: "Repartition",
  seq: next(),
  name,
  parent,
  codecs,
  partitions
})

export const grouping = (
  parent: Node,
  codecs: Codecs | undefined,
  partitions: number | undefined,
  name: string | undefined
): Grouping => ({ _tag: "Grouping", seq: next(), name, parent, codecs, partitions })

export const aggregate = <A, I>(
  parent: Node,
  kind: Aggregate["kind"],
  spec: AggregateSpec<A, I>,
  name: string | undefined,
  windowing?: Windowing
): Aggregate => ({ _tag: "Aggregate", seq: next(), name, kind, parent, use: (f) => f(spec), windowing })

export const sink = (
  parent: Node,
  topic: string,
  write: (record: StreamRecord) => Topic.OutputRecord,
  name: string | undefined
): Sink => ({ _tag: "Sink", seq: next(), name, parent, topic, write })

/** The codecs of an internal topic with keys `K` and values `V`. */
export const codecs = <K, V>(key: Topic.AnyCodec<K>, value: Topic.AnyCodec<V>): Codecs => ({
  topic: (name) => {
    const topic = Topic.make({ name, key, value })
    return {
      topic,
      // The record was made by the operators that typed the stream as `K`, `V`.
      write: (record) =>
        Topic.record(topic, record.key as K | null, record.value as V, record.headers, { timestamp: record.timestamp }),
      keyText: KeyText.make(key)
    }
  }
})

/** The nodes a node reads from. */
export const parentsOf = (node: Node): ReadonlyArray<Node> => {
  switch (node._tag) {
    case "Source":
    case "TableSource":
    case "GlobalTableSource":
      return []
    case "GlobalJoin":
      // The global table is in no sub-topology: only the stream is a parent.
      return [node.stream]
    case "Merge":
      return node.parents
    case "Join":
      return [node.stream, node.table]
    case "TableJoin":
    case "StreamJoin":
      return [node.left, node.right]
    case "FkRespond":
      return [node.subscriptions, node.table]
    case "FkJoin":
      return [node.responses, node.table]
    default:
      return [node.parent]
  }
}

/**
 * True when records leaving `node` may have a key other than the one they
 * were partitioned by: a grouping below it repartitions (Kafka Streams' rule).
 */
export const keyChanged = (node: Node): boolean => {
  switch (node._tag) {
    case "Source":
    case "TableSource":
    case "Repartition":
    case "Grouping":
    case "Aggregate":
    case "TableJoin":
    case "FkSubscribe":
    case "FkRespond":
    case "FkResponse":
    case "FkJoin":
      // A grouping whose key may have changed repartitions (compile.ts fails without its codecs).
      return false
    case "Step":
      return node.keyChanging || keyChanged(node.parent)
    case "Process":
      // Its outputs carry any key (Kafka Streams marks a process node as key changing too).
      return true
    case "Merge":
      return node.parents.some(keyChanged)
    case "Sink":
    case "TableStep":
      return keyChanged(node.parent)
    case "GlobalTableSource":
      return false
    case "GlobalJoin":
      // Its records keep the stream's key, which needs no partitioning of its own: no co-partitioning.
      return keyChanged(node.stream)
    case "Join":
      // compile.ts fails a join whose stream's key may have changed: its records keep their input key.
      return keyChanged(node.stream)
    case "StreamJoin":
      // compile.ts fails a stream-stream join whose inputs' keys may have changed.
      return keyChanged(node.left) || keyChanged(node.right)
  }
}
