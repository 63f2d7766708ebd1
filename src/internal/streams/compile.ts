/**
 * From the DSL's graph to Skein's runtime: the topology is cut at its
 * repartitions into sub-topologies (Kafka Streams' term), and each becomes
 * one transformer, whose inputs are its source topics and the repartition
 * topics it reads, and whose transform runs the operators of its part of the
 * graph on each record. A repartition's writer side emits to its internal
 * topic in the upstream transformer's transaction; its reader side is an
 * input of the downstream one. An aggregation keeps its value per key as the
 * transformer's state.
 *
 * Pure: names, checks and transformers, no Kafka. `Topology.run` creates the
 * internal topics and runs the transformers.
 *
 * @internal
 */
import { Cause, Effect, Either, Exit, Metric, Option, Schema } from "effect"
import * as RunnerMetrics from "../runtime/RunnerMetrics.ts"
import * as Eager from "./eager.ts"
import { applicationIdOf } from "../runtime/runAll.ts"
import { defaultStateKey } from "../runtime/StateKeyCheck.ts"
import * as StateCopy from "../stores/stateCopy.ts"
import * as StoredAtEnd from "../runtime/storedAtEnd.ts"
import { ConfigurationError, EncodeError, InvalidTimestamp, OperatorFailed } from "../../SkeinError.ts"
import * as JoinWindows from "../../JoinWindows.ts"
import * as KeyValueStore from "../../KeyValueStore.ts"
import * as SessionWindows from "../../SessionWindows.ts"
import * as SlidingWindows from "../../SlidingWindows.ts"
import * as TimeWindows from "../../TimeWindows.ts"
import * as Topic from "../../Topic.ts"
import * as Transformer from "../../Transformer.ts"
import * as ForeignKeyJoin from "./foreignKeyJoin.ts"
import { GlobalStore } from "./globalTable.ts"
import * as Graph from "./graph.ts"
import * as KeyStores from "./keyStores.ts"
import type { KeyText } from "./keyText.ts"
import * as Process from "./process.ts"
import * as SessionAggregate from "./sessionAggregate.ts"
import * as SlidingAggregate from "./slidingAggregate.ts"
import * as StreamStreamJoin from "./streamStreamJoin.ts"
import * as TableJoin from "./tableJoin.ts"
import * as VersionedTable from "./versionedTable.ts"
import * as WindowAggregate from "./windowAggregate.ts"

/** A repartition topic the topology needs, and how many partitions it gets. */
export interface InternalTopicSpec {
  readonly name: string
  /** Set explicitly; unset: the largest partition count of `upstreamInputs`. */
  readonly partitions: number | undefined
  /** The inputs of the sub-topology that writes it (topics, some of them internal). */
  readonly upstreamInputs: ReadonlyArray<string>
}

/** One sub-topology: its transformer and what it reads. */
export interface SubTopology {
  readonly index: number
  readonly name: string
  readonly inputs: ReadonlyArray<string>
  readonly transformer: Transformer.Any
  /** The topic of its table read with `sourceChangelog`, that table's changelog (its sub-topology writes none). */
  readonly sourceChangelog: string | undefined
}

export interface Compiled {
  readonly subTopologies: ReadonlyArray<SubTopology>
  /** In dependency order: a topic's upstream inputs are sources or earlier entries. */
  readonly internalTopics: ReadonlyArray<InternalTopicSpec>
  /** Each node's name, for `describe`. */
  readonly names: ReadonlyMap<Graph.Node, string>
  readonly children: ReadonlyMap<Graph.Node, ReadonlyArray<Graph.Node>>
  /** Per sub-topology (same order), its nodes in creation order. */
  readonly members: ReadonlyArray<ReadonlyArray<Graph.Node>>
  readonly internalTopicOf: ReadonlyMap<Graph.Node, string>
  /** The stream-table joins, for the co-partitioning check (`Topology.run`). */
  readonly joins: ReadonlyArray<JoinInputs>
  /** The global tables the topology's joins read: `Topology.run` loads each before the sub-topologies run. */
  readonly globalTables: ReadonlyArray<GlobalTable>
}

/** A global table of the topology: its name, its topic, and the store its joins read. */
export interface GlobalTable {
  readonly name: string
  readonly topic: string
  readonly store: GlobalStore
}

/** A join's inputs: the topics its stream and its table read, which must be co-partitioned. */
export interface JoinInputs {
  readonly name: string
  /** The left side's topics: the stream's of a stream-table join. */
  readonly streamTopics: ReadonlyArray<string>
  /** The right side's topics: the table's. */
  readonly tableTopics: ReadonlyArray<string>
  /** What the sides are, for messages; unset: a stream and a table. */
  readonly labels?: readonly [left: string, right: string]
}

/** Kafka Streams' prefixes of generated names. */
const prefixOf = (node: Graph.Node): string => {
  switch (node._tag) {
    case "Source":
      return "KSTREAM-SOURCE"
    case "Step":
      switch (node.kind) {
        case "filter":
          return "KSTREAM-FILTER"
        case "map":
          return "KSTREAM-MAP"
        case "mapValues":
          return "KSTREAM-MAPVALUES"
        case "flatMap":
          return "KSTREAM-FLATMAP"
        case "flatMapValues":
          return "KSTREAM-FLATMAPVALUES"
        case "selectKey":
          return "KSTREAM-KEY-SELECT"
        case "toStream":
          return "KTABLE-TOSTREAM"
      }
    case "Merge":
      return "KSTREAM-MERGE"
    case "Repartition":
      return "KSTREAM-REPARTITION"
    case "Grouping":
      return "KSTREAM-GROUPBYKEY"
    case "Aggregate":
      return "KSTREAM-AGGREGATE"
    case "Sink":
      return "KSTREAM-SINK"
    case "Process":
      return "KSTREAM-PROCESSOR"
    case "TableSource":
      return "KTABLE-SOURCE"
    case "TableStep":
      return node.kind === "filter" ? "KTABLE-FILTER" : "KTABLE-MAPVALUES"
    case "Join":
      return node.kind === "inner" ? "KSTREAM-JOIN" : "KSTREAM-LEFTJOIN"
    case "TableJoin":
      return node.kind === "inner" ? "KTABLE-JOIN" : node.kind === "left" ? "KTABLE-LEFTJOIN" : "KTABLE-OUTERJOIN"
    case "StreamJoin":
      return node.kind === "inner" ? "KSTREAM-JOIN" : node.kind === "left" ? "KSTREAM-LEFTJOIN" : "KSTREAM-OUTERJOIN"
    case "FkSubscribe":
      return "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION"
    case "FkRespond":
      return "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE"
    case "FkResponse":
      return "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE"
    case "FkJoin":
      return "KTABLE-FK-JOIN-OUTPUT"
    case "GlobalTableSource":
      return "KTABLE-SOURCE"
    case "GlobalJoin":
      return node.kind === "inner" ? "KSTREAM-JOIN" : "KSTREAM-LEFTJOIN"
  }
}

/** The repartition topic of a node named `name`. */
export const repartitionTopic = (applicationId: string, name: string): string => `${applicationId}-${name}-repartition`

/** The subscription or response topic of a foreign-key join's node named `name` (Kafka Streams' names). */
export const foreignKeyTopic = (applicationId: string, name: string): string => `${applicationId}-${name}-topic`

const fail = (problem: string, fix: string) => Either.left(new ConfigurationError({ problem, fix }))

/**
 * Compiles the topology `name` (its sinks) for `applicationId`: names,
 * checks (a grouping that must repartition has codecs, names are unique, one
 * aggregation per sub-topology), sub-topologies and their transformers.
 */
export const compile = (
  topologyName: string,
  sinks: ReadonlyArray<Graph.Sink>,
  applicationId: string,
  rules: ReadonlyArray<Transformer.Rule<unknown>> = []
): Either.Either<Compiled, ConfigurationError> => {
  if (sinks.length === 0) {
    return fail(`Topology "${topologyName}" writes to no topic`, "Give Topology.make at least one stream ending in KStream.to(topic)")
  }
  // Every node the sinks read from, in creation order (parents before children).
  const seen = new Set<Graph.Node>()
  const visit = (node: Graph.Node): void => {
    if (seen.has(node)) return
    seen.add(node)
    for (const parent of Graph.parentsOf(node)) visit(parent)
    // A global table is no parent of its joins (it is in no sub-topology), but it is named with them.
    if (node._tag === "GlobalJoin") visit(node.table)
  }
  for (const sink of sinks) visit(sink)
  const nodes = [...seen].sort((a, b) => a.seq - b.seq)

  const names = new Map<Graph.Node, string>()
  nodes.forEach((node, i) => names.set(node, node.name ?? `${prefixOf(node)}-${String(i).padStart(10, "0")}`))
  const byName = new Map<string, Graph.Node>()
  for (const node of nodes) {
    const name = names.get(node)!
    if (byName.has(name)) {
      return fail(
        `Topology "${topologyName}" has two operators named "${name}"`,
        "Give each named operator of a topology its own name: names identify state and internal topics"
      )
    }
    byName.set(name, node)
  }

  for (const node of nodes) {
    if (node._tag === "Aggregate" && node.windowing !== undefined) {
      const windows = node.windowing.windows
      const valid = SlidingWindows.isSlidingWindows(windows)
        ? Either.map(SlidingWindows.validate(windows, `"${names.get(node)}"`), () => undefined)
        : SessionWindows.isSessionWindows(windows)
        ? Either.map(SessionWindows.validate(windows, `"${names.get(node)}"`), () => undefined)
        : Either.map(TimeWindows.validate(windows, `"${names.get(node)}"`), () => undefined)
      if (Either.isLeft(valid)) return Either.left(valid.left)
    }
  }

  for (const node of nodes) {
    if (node._tag === "Join") {
      if (Graph.keyChanged(node.stream)) {
        return fail(
          `The join "${names.get(node)}" follows an operator that may change the stream's key (selectKey, map, flatMap), ` +
            "so its records may not be on the partition of their key's table records",
          "Give the join the codecs of its repartition topic: KStream.join(table, joiner, { key: ..., value: ... }) " +
            "repartitions the stream by its new key first (or KStream.repartition before the join)"
        )
      }
      const joinable = joinableTable(node.table, `The join "${names.get(node)}"`)
      if (Either.isLeft(joinable)) return Either.left(joinable.left)
    }
    if (node._tag === "StreamJoin") {
      const checked = checkStreamJoin(node, names.get(node)!)
      if (Either.isLeft(checked)) return Either.left(checked.left)
    }
    if (node._tag === "FkJoin") {
      const checked = checkForeignKeyJoin(node.join, names.get(node)!)
      if (Either.isLeft(checked)) return Either.left(checked.left)
    }
    if (node._tag === "TableJoin") {
      if (node.left === node.right) {
        return fail(
          `The table join "${names.get(node)}" joins a table with itself`,
          "Join two different tables, or map the table's values (KTable.mapValues) instead"
        )
      }
      for (const side of [node.left, node.right]) {
        const joinable = joinableTable(side, `The table join "${names.get(node)}"`)
        if (Either.isLeft(joinable)) return Either.left(joinable.left)
      }
    }
  }

  const tableTopics = new Set(nodes.flatMap((n) => n._tag === "TableSource" ? n.topics.map((t) => t.name) : []))
  const both = nodes.flatMap((n) => n._tag === "Source" ? n.topics.map((t) => t.name) : []).filter((t) => tableTopics.has(t))
  if (both.length > 0) {
    return fail(
      `Topology "${topologyName}" reads ${both[0]} both as a stream (KStream.from) and as a table (KTable.from)`,
      `Read it once, as a table: KTable.from(topic), and KTable.toStream for its records as a stream`
    )
  }

  const children = new Map<Graph.Node, Array<Graph.Node>>()
  for (const node of nodes) {
    for (const parent of Graph.parentsOf(node)) {
      const list = children.get(parent) ?? []
      list.push(node)
      children.set(parent, list)
    }
  }

  // A versioned table is read as of a stream record's timestamp: only stream-table joins read it, for now.
  const onlyStreamJoins = (node: Graph.Node): boolean =>
    (children.get(node) ?? []).every((child) =>
      (child._tag === "Join" && child.table === node) || (child._tag === "TableStep" && onlyStreamJoins(child))
    )
  for (const node of nodes) {
    if (node._tag === "TableSource" && node.versioned !== undefined && !onlyStreamJoins(node)) {
      return fail(
        `The versioned table "${names.get(node)}" is read by something other than a stream-table join (KStream.join, ` +
          "KStream.leftJoin): a versioned table can only be joined by a stream for now",
        "Join it with a stream only, or read it without `versioned` (KTable.from(topic)) for table joins and toStream"
      )
    }
  }

  // The table changes that carry their previous value (Kafka Streams' sendOldValues): what table joins need.
  const sendsPrevious = new Set<Graph.Node>()
  const markPrevious = (node: Graph.Node): void => {
    sendsPrevious.add(node)
    if (node._tag === "TableStep") markPrevious(node.parent)
  }
  for (const node of nodes) {
    if (node._tag === "FkJoin") {
      // Kafka Streams sends both sides' previous values to a foreign-key join: the left's names the
      // subscription to delete, and a right `filter` passes on no change that deletes what it had not passed.
      markPrevious(node.join.left)
      markPrevious(node.join.right)
    }
    if (node._tag !== "TableJoin") continue
    // Both sides, whatever the kind (`tableJoin.ts`).
    markPrevious(node.left)
    markPrevious(node.right)
  }

  // A boundary is written by its parent's sub-topology and read by its own.
  const boundaries = new Set<Graph.Node>()
  for (const node of nodes) {
    if (node._tag === "Repartition" || node._tag === "FkSubscribe" || node._tag === "FkResponse") boundaries.add(node)
    if (node._tag === "Grouping" && Graph.keyChanged(node.parent)) {
      if (node.codecs === undefined) {
        return fail(
          `groupByKey ("${names.get(node)}") follows an operator that may change the key, so its records must be ` +
            "repartitioned by their new key, and it was given no codecs for the repartition topic",
          "Pass the key and value codecs: KStream.groupByKey({ key: ..., value: ... }), or use KStream.groupBy"
        )
      }
      boundaries.add(node)
    }
  }
  const codecsOf = (node: Graph.Node): Graph.Codecs | undefined =>
    node._tag === "Repartition" || node._tag === "Grouping"
      ? node.codecs
      : node._tag === "FkSubscribe"
      ? ForeignKeyJoin.subscriptionCodecs(topicTable(node.join.right))
      : node._tag === "FkResponse"
      ? ForeignKeyJoin.responseCodecs(topicTable(node.join.left))
      : undefined
  const partitionsOf = (node: Graph.Node): number | undefined =>
    node._tag === "Repartition" || node._tag === "Grouping" ? node.partitions : undefined

  // Sub-topologies: union-find over roots (sources and boundaries); a merge joins its parents'.
  const root = new Map<Graph.Node, Graph.Node>()
  const find = (node: Graph.Node): Graph.Node => {
    let current = node
    while (root.get(current) !== current) current = root.get(current)!
    return current
  }
  const groupOf = new Map<Graph.Node, Graph.Node>()
  // A global table is in no sub-topology: every instance loads it whole (`globalTable.ts`).
  const grouped = nodes.filter((node) => node._tag !== "GlobalTableSource")
  for (const node of grouped) {
    if (isSource(node) || boundaries.has(node)) {
      root.set(node, node)
      groupOf.set(node, node)
      continue
    }
    const parents = Graph.parentsOf(node).map((p) => find(groupOf.get(p)!))
    const [first, ...rest] = parents
    for (const other of rest) root.set(find(other), find(first!))
    groupOf.set(node, first!)
  }
  /** The sub-topology that writes a boundary: its parent's. */
  const writerGroup = (boundary: Graph.Node): Graph.Node => find(groupOf.get(Graph.parentsOf(boundary)[0]!)!)
  for (const boundary of boundaries) {
    // A join or a merge of a stream with what it wrote to a repartition topic would read its own writes in one task.
    if (writerGroup(boundary) === find(groupOf.get(boundary)!)) {
      return fail(
        `Topology "${topologyName}" joins or merges the records of "${names.get(boundary)}" with the stream they were ` +
          "repartitioned from, in one sub-topology, which would read the repartition topic it writes",
        "Read the other input from its own source: join (or merge) streams and tables that do not come from the records " +
          "written to that repartition topic"
      )
    }
  }

  const groups = new Map<Graph.Node, Array<Graph.Node>>()
  for (const node of grouped) {
    const group = find(groupOf.get(node)!)
    const list = groups.get(group) ?? []
    list.push(node)
    groups.set(group, list)
  }

  const processesChecked = Process.check(topologyName, groups.values(), names)
  if (Either.isLeft(processesChecked)) return Either.left(processesChecked.left)

  const internalTopicOf = new Map<Graph.Node, string>()
  const internal = new Map<Graph.Node, Graph.InternalTopic>()
  for (const boundary of boundaries) {
    const topic = boundary._tag === "FkSubscribe" || boundary._tag === "FkResponse"
      ? foreignKeyTopic(applicationId, names.get(boundary)!)
      : repartitionTopic(applicationId, names.get(boundary)!)
    internalTopicOf.set(boundary, topic)
    internal.set(boundary, codecsOf(boundary)!.topic(topic))
  }

  const globalStores = new Map(
    nodes.flatMap((node) => node._tag === "GlobalTableSource" ? [[node, new GlobalStore(node.topic, node.keyText)] as const] : [])
  )
  const subTopologies: Array<SubTopology> = []
  const members: Array<ReadonlyArray<Graph.Node>> = []
  const groupName = new Map<Graph.Node, string>()
  const transformerNames = new Set<string>()
  for (const [group, groupNodes] of groups) {
    const roots = groupNodes.filter((n) => isSource(n) || boundaries.has(n))
    const inputs: Array<Topic.Any> = []
    const rootsByTopic = new Map<string, Array<Graph.Node>>()
    const keyTexts = new Map<string, KeyText>()
    const extractors = new Map<string, Graph.TimestampExtractor>()
    for (const r of roots) {
      const topics = isSource(r) ? r.topics : [internal.get(r)!.topic]
      topics.forEach((topic, i) => {
        keyTexts.set(topic.name, isSource(r) ? r.keyTexts[i]! : internal.get(r)!.keyText)
        if (r._tag === "Source" && r.timestamp !== undefined && !extractors.has(topic.name)) extractors.set(topic.name, r.timestamp)
      })
      for (const topic of topics) {
        if (!inputs.some((t) => t.name === topic.name)) inputs.push(topic)
        const list = rootsByTopic.get(topic.name) ?? []
        list.push(r)
        rootsByTopic.set(topic.name, list)
      }
    }
    const aggregates = groupNodes.filter((n): n is Graph.Aggregate => n._tag === "Aggregate")
    if (aggregates.length > 1) {
      return fail(
        `Topology "${topologyName}" has ${aggregates.length} aggregations (${aggregates.map((a) => `"${names.get(a)}"`).join(", ")}) ` +
          "in one sub-topology, which keeps one value per key",
        "Aggregate once per grouping for now: group each aggregation's records separately (KStream.groupBy with its own name)"
      )
    }
    const tables = groupNodes.filter((n): n is Graph.TableSource => n._tag === "TableSource")
    const joins = groupNodes.some((n) => n._tag === "Join" || n._tag === "TableJoin" || n._tag === "FkRespond" || n._tag === "FkJoin")
    const windowed = aggregates.find((a) => a.windowing !== undefined)
    const streamJoins = groupNodes.filter((n): n is Graph.StreamJoin => n._tag === "StreamJoin")
    if (streamJoins.length > 0 && (streamJoins.length > 1 || aggregates.length > 0 || tables.length > 0 || joins)) {
      return fail(
        `Topology "${topologyName}" keeps the stream-stream join "${names.get(streamJoins[0]!)}" in one sub-topology with ` +
          "another join, a table or an aggregation, and a stream-stream join keeps its sub-topology's state to itself",
        "Repartition between them (KStream.repartition after the join, with its own name)"
      )
    }
    if (windowed !== undefined && (tables.length > 0 || joins)) {
      return fail(
        `Topology "${topologyName}" keeps the windowed aggregation "${names.get(windowed)}" in one sub-topology with ` +
          "a table or a join, and a windowed aggregation keeps its sub-topology's state to itself",
        "Repartition between them (KStream.repartition, KStream.groupBy with its own name)"
      )
    }
    const sourceChangelog = tables.find((table) => table.sourceChangelog)
    if (sourceChangelog !== undefined) {
      const checked = checkSourceChangelog(sourceChangelog, names.get(sourceChangelog)!, {
        onlyStreamJoins: onlyStreamJoins(sourceChangelog),
        onlyState: tables.length === 1 && aggregates.length === 0 &&
          !groupNodes.some((n) =>
            n._tag === "FkRespond" || n._tag === "FkJoin" || n._tag === "FkSubscribe" ||
            (n._tag === "Process" && Process.needsState([{ node: n, name: "" }]))
          )
      })
      if (Either.isLeft(checked)) return Either.left(checked.left)
    }
    const first = roots[0]!
    const name = isSource(first) ? first.topics.map((t) => t.name).join("+") : names.get(first)!
    if (transformerNames.has(name)) {
      return fail(
        `Topology "${topologyName}" has two sub-topologies named "${name}" (two sources of the same topics)`,
        "Read each topic once: KStream.from(topic) once, and branch from that stream"
      )
    }
    transformerNames.add(name)
    groupName.set(group, name)
    const boundaryOut = (node: Graph.Node): boolean => boundaries.has(node) && find(groupOf.get(node)!) !== group
    const processes = groupNodes.flatMap((n) => n._tag === "Process" ? [{ node: n, name: names.get(n)! }] : [])
    for (const timed of processes) {
      // A process node's timers run its downstream operators from a root of their own (`runFrom`).
      if (timed.node.onTimer === undefined) continue
      const root = Graph.merge([timed.node], undefined)
      children.set(root, children.get(timed.node) ?? [])
      rootsByTopic.set(timerRootOf(name, timed.name), [root])
    }
    // Its operators never mutate a state they read (they build new values) and copy the values they
    // hand to user functions (`privateCopy`): the batch gives it the states without a copy.
    const transformer = StateCopy.readsWithoutCopy(makeTransformer({
      name,
      inputs,
      rootsByTopic,
      children: (node) => children.get(node) ?? [],
      writer: (node) => boundaryOut(node) ? internal.get(node) : undefined,
      aggregate: aggregates[0],
      streamJoin: streamJoins[0],
      aggregateName: aggregates[0] === undefined ? "" : names.get(aggregates[0])!,
      stores: tables.length > 0 || joins
        ? [...tables, ...aggregates].sort((a, b) => a.seq - b.seq).map((node) => storeOf(node, names.get(node)!))
        : [],
      sourceChangelog,
      sendsPrevious,
      foreignKeys: new Map(groupNodes.flatMap((n) =>
        n._tag === "FkJoin" || n._tag === "FkSubscribe" || n._tag === "FkRespond"
          ? [[n.join, ForeignKeyJoin.sidesOf(topicTable(n.join.left), topicTable(n.join.right))] as const]
          : []
      )),
      streamTimeStores: new Map(
        tables.flatMap((n) =>
          n.versioned === undefined
            ? []
            : [[n, KeyValueStore.make({ name: `${names.get(n)!}-stream-time`, key: Schema.String, value: Schema.Number })] as const]
        )
      ),
      subscriptionStores: new Map(
        groupNodes.flatMap((n) => n._tag === "FkRespond" ? [[n, ForeignKeyJoin.subscriptionStore(names.get(n)!)] as const] : [])
      ),
      applicationId,
      nameOf: (node) => names.get(node)!,
      sourceNames: new Map(roots.flatMap((r) => isSource(r) ? r.topics.map((t) => [t.name, names.get(r)!] as const) : [])),
      keyTexts,
      extractors,
      rules,
      droppedNullKeys: { count: 0 },
      droppedNullValues: { count: 0 },
      droppedJoinRecords: { count: 0 },
      globalStores,
      processes
    }))
    subTopologies.push({
      index: subTopologies.length,
      name,
      inputs: inputs.map((t) => t.name),
      transformer,
      sourceChangelog: sourceChangelog?.topics[0]?.name
    })
    members.push(groupNodes)
  }

  // Internal topics in dependency order: a boundary's creation number is above its upstream's.
  const internalTopics = [...boundaries].sort((a, b) => a.seq - b.seq).map((boundary): InternalTopicSpec => {
    const upstream = subTopologies.find((s) => s.name === groupName.get(writerGroup(boundary)))!
    return { name: internalTopicOf.get(boundary)!, partitions: partitionsOf(boundary), upstreamInputs: upstream.inputs }
  })
  /** The topics a node's records come from: its sources' and the internal topics it reads. */
  const topicsOf = (node: Graph.Node): Array<string> =>
    isSource(node)
      ? node.topics.map((t) => t.name)
      : boundaries.has(node)
      ? [internalTopicOf.get(node)!]
      : Graph.parentsOf(node).flatMap(topicsOf)
  const joins = nodes.flatMap((node): Array<JoinInputs> =>
    node._tag === "StreamJoin"
      ? [{
        name: names.get(node)!,
        streamTopics: [...new Set(topicsOf(node.left))],
        tableTopics: [...new Set(topicsOf(node.right))],
        labels: ["left stream", "right stream"]
      }]
      : node._tag === "Join"
      ? [{ name: names.get(node)!, streamTopics: [...new Set(topicsOf(node.stream))], tableTopics: [...new Set(topicsOf(node.table))] }]
      : node._tag === "TableJoin"
      ? [{
        name: names.get(node)!,
        streamTopics: [...new Set(topicsOf(node.left))],
        tableTopics: [...new Set(topicsOf(node.right))],
        labels: ["left table", "right table"]
      }]
      : node._tag === "FkRespond"
      ? [{
        // The subscriptions meet the right table's records of their foreign key in one task.
        name: names.get(node)!,
        streamTopics: [internalTopicOf.get(node.subscriptions)!],
        tableTopics: [...new Set(topicsOf(node.table))],
        labels: ["subscription topic", "right table"]
      }]
      : node._tag === "FkJoin"
      ? [{
        // The responses meet the left table's records of their key in one task.
        name: names.get(node)!,
        streamTopics: [internalTopicOf.get(node.responses)!],
        tableTopics: [...new Set(topicsOf(node.table))],
        labels: ["response topic", "left table"]
      }]
      : []
  )
  return Either.right({
    subTopologies,
    internalTopics: coPartitioned(internalTopics, joins),
    globalTables: [...globalStores].map(([node, store]) => ({ name: names.get(node)!, topic: node.topic.name, store })),
    names,
    children,
    members,
    internalTopicOf,
    joins
  })
}

/**
 * The repartition topics a join reads get as many partitions as the join's
 * other input topics (Kafka Streams' co-partitioning of repartition topics):
 * one whose count is not set explicitly counts the join's topics that are
 * not internal, where it would count its writer's inputs.
 */
const coPartitioned = (
  internalTopics: ReadonlyArray<InternalTopicSpec>,
  joins: ReadonlyArray<JoinInputs>
): Array<InternalTopicSpec> =>
  internalTopics.map((spec) => {
    if (spec.partitions !== undefined) return spec
    const join = joins.find((j) => j.streamTopics.includes(spec.name) || j.tableTopics.includes(spec.name))
    if (join === undefined) return spec
    const external = [...join.streamTopics, ...join.tableTopics].filter((t) => !internalTopics.some((i) => i.name === t))
    return external.length === 0 ? spec : { ...spec, upstreamInputs: external }
  })

const isSource = (node: Graph.Node): node is Graph.Source | Graph.TableSource =>
  node._tag === "Source" || node._tag === "TableSource"

/** The store a join reads, through its table operators: a table's source or an aggregation (not windowed). */
const storeNodeOf = (node: Graph.Node): Option.Option<Graph.TableSource | Graph.Aggregate> =>
  node._tag === "TableSource" || (node._tag === "Aggregate" && node.windowing === undefined)
    ? Option.some(node)
    : node._tag === "TableStep"
    ? storeNodeOf(node.parent)
    : Option.none()

/** Fails for a join's table that has no store of its own: a windowed aggregation's, a join's. */
const joinableTable = (table: Graph.Node, join: string): Either.Either<void, ConfigurationError> =>
  Option.isSome(storeNodeOf(table)) ? Either.right(undefined) : fail(
    `${join} joins a table that is not a table read from a topic or a (not windowed) aggregation's: ` +
      "a windowed aggregation's table and a table join's result cannot be joined yet",
    "Write that table to a topic (KTable.toStream, KStream.to) and join KTable.from(that topic)"
  )

/** The table read from a topic that a foreign-key join's side reads, through its table operators. */
const topicTableOf = (node: Graph.Node): Option.Option<Graph.TableSource> =>
  Option.filter(storeNodeOf(node), (store): store is Graph.TableSource => store._tag === "TableSource")

/** Fails for a foreign-key join whose sides are not tables read from topics, or one table. */
const checkForeignKeyJoin = (join: Graph.ForeignKeyJoin, name: string): Either.Either<void, ConfigurationError> => {
  const left = topicTableOf(join.left)
  const right = topicTableOf(join.right)
  if (Option.isNone(left) || Option.isNone(right)) {
    return fail(
      `The foreign-key join "${name}" joins a table that is not read from a topic (KTable.from, and its mapValues and ` +
        "filter): an aggregation's table, a windowed one or a join's result cannot be a side of a foreign-key join yet",
      "Write that table to a topic (KTable.toStream, KStream.to) and join KTable.from(that topic)"
    )
  }
  if (left.value === right.value) {
    return fail(
      `The foreign-key join "${name}" joins a table with itself`,
      "Copy the table to a second topic (KTable.toStream, KStream.to) and join KTable.from of that topic"
    )
  }
  return Either.right(undefined)
}

/** The table source of a foreign-key join's side (`checkForeignKeyJoin` made sure there is one). */
const topicTable = (node: Graph.Node): Graph.TableSource =>
  Option.getOrThrowWith(topicTableOf(node), () => new Error("Skein invariant broken: a foreign-key join's side is not a table of a topic"))

/**
 * Fails for a table read with `sourceChangelog` whose topic cannot be its
 * changelog: a restore from the topic rebuilds exactly what processing its
 * records stored only when the table is its sub-topology's only state, is
 * not versioned, and no operator runs on its records after the store takes
 * them (only stream-table joins read it: a table change that failed further
 * on, skipped or dead-lettered by a rule, leaves the table as it was, where
 * a restore would apply it).
 */
const checkSourceChangelog = (
  table: Graph.TableSource,
  name: string,
  shape: { readonly onlyStreamJoins: boolean; readonly onlyState: boolean }
): Either.Either<void, ConfigurationError> => {
  const topic = table.topics.map((t) => t.name).join(", ")
  const without = `or read it without sourceChangelog (KTable.from(${topic})): its sub-topology then writes a changelog topic`
  if (table.versioned !== undefined) {
    return fail(
      `The table "${name}" is versioned and read with sourceChangelog: a versioned table's store is not restored from its ` +
        "source topic yet",
      `Drop versioned, ${without}`
    )
  }
  if (!shape.onlyState) {
    return fail(
      `The table "${name}" is read with sourceChangelog, and its sub-topology keeps other state (another table, an ` +
        "aggregation, a foreign-key join's or a process node's stores or timers), which its source topic cannot restore",
      `Join it from a sub-topology of its own (repartition the other side, KStream.repartition), ${without}`
    )
  }
  if (!shape.onlyStreamJoins) {
    return fail(
      `The table "${name}" is read with sourceChangelog and by something other than a stream-table join (a table ` +
        "join, toStream): an update that fails there would leave the table unchanged, where a restore from the topic " +
        "would apply it",
      `Join it with streams only (KStream.join, KStream.leftJoin), ${without}`
    )
  }
  return Either.right(undefined)
}

/** The store of a table's source or an aggregation, named `name`. */
const storeOf = (node: Graph.TableSource | Graph.Aggregate, name: string): KeyStores.Store =>
  node._tag === "TableSource"
    ? { node, name, use: node.use }
    : { node, name, use: (f) => node.use((spec) => f(spec.state)) }

/** The table operators between a join and its table's source, the source's first. */
const tableStepsOf = (node: Graph.Node): ReadonlyArray<Graph.TableStep> =>
  node._tag === "TableStep" ? [...tableStepsOf(node.parent), node] : []

interface TransformerParts {
  readonly name: string
  readonly inputs: ReadonlyArray<Topic.Any>
  readonly rootsByTopic: ReadonlyMap<string, ReadonlyArray<Graph.Node>>
  readonly children: (node: Graph.Node) => ReadonlyArray<Graph.Node>
  /** The internal topic a boundary of another sub-topology is written to, from this one. */
  readonly writer: (node: Graph.Node) => Graph.InternalTopic | undefined
  readonly aggregate: Graph.Aggregate | undefined
  /** The sub-topology's stream-stream join: then it has no other join, table or aggregation. */
  readonly streamJoin: Graph.StreamJoin | undefined
  readonly aggregateName: string
  /**
   * The tables read from topics and the aggregation the sub-topology keeps per key, where it has a
   * table or a join (`keyStores.ts`); none: the aggregation alone keeps its state (or nothing).
   */
  readonly stores: ReadonlyArray<KeyStores.Store>
  /** The sub-topology's only store, when its topic is its changelog (`checkSourceChangelog`). */
  readonly sourceChangelog: Graph.TableSource | undefined
  /** The table operators whose changes carry their previous value (`Graph.StreamRecord.previous`). */
  readonly sendsPrevious: ReadonlySet<Graph.Node>
  /** The foreign-key joins the sub-topology has a node of, and what those need of their sides. */
  readonly foreignKeys: ReadonlyMap<Graph.ForeignKeyJoin, ForeignKeyJoin.Sides>
  /** Each versioned table's stream time, in a store of the sub-topology (`versionedTable.ts`). */
  readonly streamTimeStores: ReadonlyMap<Graph.TableSource, KeyValueStore.KeyValueStore<string, number>>
  /** The subscriptions each foreign-key join's right side of the sub-topology keeps. */
  readonly subscriptionStores: ReadonlyMap<Graph.FkRespond, KeyValueStore.KeyValueStore<string, ForeignKeyJoin.Stored>>
  /** The application the topology is compiled for (metric labels). */
  readonly applicationId: string
  /** Each node's name, as `describe` prints it (for `OperatorFailed`). */
  readonly nameOf: (node: Graph.Node) => string
  /** Per input topic read by a source, the source's name. */
  readonly sourceNames: ReadonlyMap<string, string>
  /** Per input topic, its keys as text and back. */
  readonly keyTexts: ReadonlyMap<string, KeyText>
  /** Per input topic read by a source with a timestamp extractor, the extractor. */
  readonly extractors: ReadonlyMap<string, Graph.TimestampExtractor>
  readonly rules: ReadonlyArray<Transformer.Rule<unknown>>
  /** Records an aggregation dropped for having no key, since the start. */
  readonly droppedNullKeys: { count: number }
  /** Records a sliding-window aggregation dropped for having no value, since the start. */
  readonly droppedNullValues: { count: number }
  /** Records a join or a table dropped (no key, or a stream record without a value), since the start. */
  readonly droppedJoinRecords: { count: number }
  /** The global tables of the topology, which its stream-global table joins read. */
  readonly globalStores: ReadonlyMap<Graph.GlobalTableSource, GlobalStore>
  /** The sub-topology's process nodes (`process.ts`). */
  readonly processes: Process.Parts["processes"]
}

/**
 * An aggregate as stored: its value and the largest timestamp of the records
 * it has seen, which its updates carry (Kafka Streams' `ValueAndTimestamp`).
 */
const timestamped = <A, I>(value: Schema.Schema<A, I>) => Schema.Struct({ value, timestamp: Schema.Number })

/**
 * A private copy of a value the sub-topology keeps in its state (an
 * aggregate, a table's value), for the user functions it is handed to
 * (`add`, `merge`, a join's `joiner`, the operators after an aggregation),
 * which may mutate it: the batch gives a DSL transformer its states without
 * a copy (`StateCopy.readsWithoutCopy`). A number or a string is its own.
 */
const privateCopy = <A, I>(parts: TransformerParts, schema: Schema.Schema<A, I>): (value: A) => Either.Either<A, EncodeError> => {
  const copy = StateCopy.value(Topic.json(schema))
  return (value) => Either.mapLeft(copy(value), (cause) => new EncodeError({ topic: `state of ${parts.name}`, cause }))
}

/** `state` with its value a private copy (`privateCopy`). */
const privateTimestamped = <A>(
  state: Option.Option<{ readonly value: A; readonly timestamp: number }>,
  copy: (value: A) => Either.Either<A, EncodeError>
): Either.Either<Option.Option<{ readonly value: A; readonly timestamp: number }>, EncodeError> => {
  if (Option.isNone(state)) return Either.right(state)
  const value = copy(state.value.value)
  if (Either.isLeft(value)) return Either.left(value.left)
  return Either.right(value.right === state.value.value ? state : Option.some({ ...state.value, value: value.right }))
}

/**
 * What an aggregate does with a record that reached it (keyed): `forward`
 * passes its update on to the aggregate's children.
 */
type Aggregator = (
  record: Graph.StreamRecord,
  forward: (record: Graph.StreamRecord) => Effect.Effect<void, unknown, unknown>
) => Effect.Effect<void, unknown, unknown>

/**
 * The sub-topology's stores for the input record's key (its state key: the
 * record key, which the joins' records keep): each store's value and its
 * timestamp, as the record has left it so far.
 */
interface StoreAccess {
  readonly get: (store: Graph.Node) => Option.Option<KeyStores.Slot>
  /** The store's new value for the key (`null` value: deleted). */
  readonly put: (store: Graph.Node, value: unknown, timestamp: number) => void
  /** Each versioned table's stream time (the largest timestamp it kept; -1: none), as the record leaves it. */
  readonly streamTimes: Map<Graph.Node, number>
}

/** The sub-topology's transformer: its operators', with its process nodes' stores and timers (`process.ts`). */
const makeTransformer = (parts: TransformerParts): Transformer.Any =>
  parts.processes.length === 0 ? operatorsTransformer(parts) : Process.attach(operatorsTransformer(parts), {
    subTopology: parts.name,
    processes: parts.processes,
    // A timer's records through the process node's downstream operators: each from the node's timer root.
    runFrom: (node, records, input) => {
      const emit: Array<Topic.OutputRecord> = []
      const topic = timerRootOf(parts.name, parts.nameOf(node))
      return Eager.map(
        Eager.forEach(records, (r) =>
          Eager.map(
            runRecord(parts, { ...input, topic, key: r.key, value: r.value, rawHeaders: r.headers, timestamp: r.timestamp }, undefined),
            (written) => {
              for (const output of written) emit.push(output)
            }
          )),
        () => emit
      )
    },
    eventTime: parts.extractors.size === 0 ? undefined : (record) => {
      // Stream time moves by the records' event time (their source's extractor); none when it fails (the record failed).
      const extractor = parts.extractors.get(record.topic)
      if (extractor === undefined) return record.timestamp
      try {
        return extractor(record)
      } catch {
        return -1
      }
    }
  })

/** The input topic name of the root a timer of process node `node` runs its downstream operators from (no topic's: a space). */
const timerRootOf = (subTopology: string, node: string): string => `${subTopology} timer of ${node}`

const operatorsTransformer = (parts: TransformerParts): Transformer.Any => {
  const { aggregate } = parts
  if (parts.streamJoin !== undefined) return streamJoinTransformer(parts, parts.streamJoin)
  if (parts.stores.length > 0) {
    return KeyStores.make(parts.name, parts.stores).use((stores) => storesTransformer(parts, stores))
  }
  if (aggregate === undefined) {
    const transform = (record: Transformer.RecordOf<ReadonlyArray<Topic.Any>>) =>
      Eager.map(runRecord(parts, record, undefined), (emit) => ({ emit }))
    // Process nodes' stores and timers live in the task's state store: a state, never written.
    return Process.needsState(parts.processes)
      ? Transformer.make({ name: parts.name, inputs: parts.inputs, state: Schema.Null, transform, rules: parts.rules })
      : Transformer.stateless({ name: parts.name, inputs: parts.inputs, transform, rules: parts.rules })
  }
  const windowing = aggregate.windowing
  if (windowing !== undefined) {
    return aggregate.use<Transformer.Any>(<A, I>(spec: Graph.AggregateSpec<A, I>) =>
      windowedTransformer(parts, windowing, spec, aggregate.kind)
    )
  }
  return aggregate.use<Transformer.Any>(<A, I>(spec: Graph.AggregateSpec<A, I>) => {
    const add = guarded(parts.aggregateName, aggregate.kind, spec.add)
    const copy = privateCopy(parts, spec.state)
    return Transformer.make({
      name: parts.name,
      inputs: parts.inputs,
      state: timestamped(spec.state),
      transform: (record, stored) => {
        // `add` (the user's aggregator) is handed the aggregate: a private copy, its to mutate.
        const copied = privateTimestamped(stored, copy)
        if (Either.isLeft(copied)) return Effect.fail(copied.left)
        let current = copied.right
        let changed = false
        const aggregator: Aggregator = (keyed, forward) => {
          const next = {
            value: add(Option.map(current, (s) => s.value), keyed),
            timestamp: Option.match(current, { onNone: () => keyed.timestamp, onSome: (s) => Math.max(s.timestamp, keyed.timestamp) })
          }
          current = Option.some(next)
          changed = true
          return forward({ ...keyed, value: next.value, timestamp: next.timestamp })
        }
        return Eager.map(runRecord(parts, record, aggregator), (emit) => ({
          emit,
          ...(changed && Option.isSome(current) ? { state: Transformer.set(current.value) } : {})
        }))
      },
      rules: parts.rules
    })
  })
}

/**
 * The transformer of a sub-topology with tables or joins: its state per key
 * is its stores' values (`keyStores.ts`), read once per record and written
 * back when a table or the aggregation changed.
 */
const storesTransformer = <S, I>(parts: TransformerParts, stores: KeyStores.KeyStores<S, I>): Transformer.Any => ({
  ...Transformer.make({
    name: parts.name,
    inputs: parts.inputs,
    state: stores.state,
    stores: [...parts.subscriptionStores.values(), ...parts.streamTimeStores.values()],
    transform: (record, stored) => {
      // Decoded from the stored form: the record's own copies, which user functions may mutate.
      const read = stores.read(stored)
      if (Either.isLeft(read)) return Effect.fail(read.left)
      const slots = read.right
      let changed = false
      const access: StoreAccess = {
        get: (store) => Option.fromNullable(slots.get(store)),
        put: (store, value, timestamp) => {
          changed = true
          if (value === null) slots.delete(store)
          else slots.set(store, { value, timestamp })
        },
        streamTimes: new Map()
      }
      if (parts.streamTimeStores.size === 0) return runStores(parts, stores, record, access, slots, () => changed)
      // The versioned tables' stream times, read before the record and kept after it.
      const before = new Map<Graph.Node, number>()
      return Effect.flatMap(
        Effect.forEach(parts.streamTimeStores, ([node, store]) =>
          Effect.map(store.get(streamTimeKey), (time) => {
            before.set(node, Option.getOrElse(time, () => -1))
            access.streamTimes.set(node, Option.getOrElse(time, () => -1))
          }), { discard: true }),
        () =>
          Effect.flatMap(runStores(parts, stores, record, access, slots, () => changed), (result) =>
            Effect.as(
              Effect.forEach(parts.streamTimeStores, ([node, store]) => {
                const time = access.streamTimes.get(node) ?? -1
                return time === before.get(node) ? Effect.void : store.put(streamTimeKey, time)
              }, { discard: true }),
              result
            ))
      )
    },
    rules: parts.rules
  }),
  ...(parts.sourceChangelog === undefined ? {} : { sourceChangelog: sourceChangelogOf(parts.sourceChangelog, stores) })
})

/**
 * The table `table`'s topic as its sub-topology's changelog: a record's
 * state change is the one the table source makes of it (`runRecord`), and
 * none for a record it does not store (it does not decode, has no key or an
 * invalid timestamp: its processing dead-letters, skips or drops it).
 */
const sourceChangelogOf = <S, I>(
  table: Graph.TableSource,
  stores: KeyStores.KeyStores<S, I>
): Transformer.SourceChangelog<S> => {
  const view = table.topics[0]!
  return {
    topic: view.name,
    change: (record) => {
      if (!Number.isFinite(record.timestamp) || record.timestamp < 0) return undefined
      const decoded = view.decode(record.key, record.value)
      if (Either.isLeft(decoded) || decoded.right.key === null) return undefined
      const slots = new Map<Graph.Node, KeyStores.Slot>()
      if (decoded.right.value !== null) slots.set(table, { value: decoded.right.value, timestamp: record.timestamp })
      const written = stores.write(slots)
      if (Either.isLeft(written)) return undefined
      const change = written.right
      return { key: defaultStateKey(decoded.right), state: change._tag === "Set" ? Option.some(change.value) : Option.none() }
    }
  }
}

/** The key of a versioned table's stream time in its store. */
const streamTimeKey = "stream-time"

/** The stores transformer's run of one record through the sub-topology (its state written back when a store changed). */
const runStores = <S, I>(
  parts: TransformerParts,
  stores: KeyStores.KeyStores<S, I>,
  record: Transformer.RecordOf<ReadonlyArray<Topic.Any>>,
  access: StoreAccess,
  slots: ReadonlyMap<Graph.Node, KeyStores.Slot>,
  changed: () => boolean
): Effect.Effect<Transformer.Result<S>, unknown, unknown> => {
      const { aggregate } = parts
      const aggregator = aggregate === undefined ? undefined : aggregate.use((spec): Aggregator => {
        const add = guarded(parts.aggregateName, aggregate.kind, spec.add)
        const sends = parts.sendsPrevious.has(aggregate)
        const isAggregate = Schema.is(spec.state)
        return (keyed, forward) => {
          const current = access.get(aggregate)
          const before = Option.map(current, (s) => s.value)
          if (Option.isSome(before) && !isAggregate(before.value)) {
            return Effect.dieMessage(`Skein invariant broken: the store of ${parts.aggregateName} holds a value its Schema did not decode`)
          }
          const value = add(Option.filter(before, isAggregate), keyed)
          const timestamp = Option.match(current, { onNone: () => keyed.timestamp, onSome: (s) => Math.max(s.timestamp, keyed.timestamp) })
          access.put(aggregate, value, timestamp)
          const previous = sends ? Option.match(current, { onNone: () => null, onSome: (s) => s.value }) : null
          return forward({ ...keyed, value, timestamp, previous })
        }
      })
      return Eager.flatMap(runRecord(parts, record, aggregator, undefined, access), (emit) => {
        if (!changed()) return Effect.succeed({ emit })
        const state = stores.write(slots)
        return Either.isLeft(state) ? Effect.fail(state.left) : Effect.succeed({ emit, state: state.right })
      })
}

/**
 * The transformer of a sub-topology with a windowed aggregation: its state
 * is the task's (`windowAggregate.ts`), shared across keys.
 */
const windowedTransformer = <A, I>(
  parts: TransformerParts,
  windowing: Graph.Windowing,
  spec: Graph.AggregateSpec<A, I>,
  kind: Graph.Aggregate["kind"]
): Transformer.Transformer<ReadonlyArray<Topic.Any>, WindowAggregate.WindowState<A>, unknown, unknown> => {
  const operator: WindowAggregate.Operator<A> = {
    name: parts.aggregateName,
    subTopology: parts.name,
    windowing,
    add: guarded(parts.aggregateName, kind, spec.add),
    ...(spec.session === undefined ? {} : {
      session: {
        initial: guarded(parts.aggregateName, kind, spec.session.initial),
        merge: guarded(parts.aggregateName, `${kind} merge`, spec.session.merge)
      }
    }),
    keyText: (topic) => parts.keyTexts.get(topic)!,
    late: { count: 0 },
    // Tagged as its run's stats read it: `Topology.run` runs each sub-topology under `{applicationId}-{sub-topology}`.
    lateCounter: RunnerMetrics.streamsLateRecordsOf(applicationIdOf(parts.applicationId, parts), parts.name, parts.aggregateName)
  }
  const copyValue = privateCopy(parts, spec.state)
  // The task's time and index change with nearly every record (and a count's windows are whole numbers): stored once per transaction.
  return StoredAtEnd.storedAtEnd({
    name: parts.name,
    inputs: parts.inputs,
    state: Option.some(Topic.json(WindowAggregate.stateSchema(spec.state))),
    stateKey: (record) => WindowAggregate.windowsKey(defaultStateKey(record)),
    sharedState: true,
    rules: parts.rules,
    transform: (record, state, task) => {
      if (task === undefined) return Effect.dieMessage("Skein invariant broken: a windowed aggregation ran without its task's state")
      const context = new WindowAggregate.RecordContext(WindowAggregate.windowsKey(defaultStateKey(record)), state, task, copyValue)
      const windows = windowing.windows
      const aggregator: Aggregator = SlidingWindows.isSlidingWindows(windows)
        ? (keyed, forward) => {
          if (keyed.value !== null) return SlidingAggregate.process(operator, windows, context, keyed, record.topic, forward)
          // Kafka Streams' sliding windows drop records without a value (its dropped-records metric): logged, counted in the log.
          parts.droppedNullValues.count++
          const dropped = parts.droppedNullValues.count
          return dropped === 1 || dropped % 1_000 === 0
            ? Effect.logWarning(
              `${parts.name}: records without a value are dropped by a sliding-window aggregation, as Kafka Streams drops them ` +
                `(${dropped} so far)`
            )
            : Effect.void
        }
        : SessionWindows.isSessionWindows(windows)
        ? (keyed, forward) => SessionAggregate.process(operator, windows, context, keyed, record.topic, forward)
        : (keyed, forward) => WindowAggregate.process(operator, windows, context, keyed, record.topic, forward)
      return Eager.map(
        runRecord(parts, record, aggregator, (timestamp) => WindowAggregate.observeStreamTime(context, timestamp)),
        (emit) => context.result(emit)
      )
    }
  }, WindowAggregate.storedAtEndOf(kind))
}

/**
 * The transformer of a sub-topology with a stream-stream join: its state is
 * the task's (`streamStreamJoin.ts`), shared across keys.
 */
const streamJoinTransformer = (
  parts: TransformerParts,
  node: Graph.StreamJoin
): Transformer.Transformer<ReadonlyArray<Topic.Any>, StreamStreamJoin.State, unknown, unknown> => {
  const name = parts.nameOf(node)
  const operator: StreamStreamJoin.Operator = {
    kind: node.kind,
    windows: node.windows,
    joiner: guarded(name, "joiner", node.joiner),
    keyText: (topic) => parts.keyTexts.get(topic)!,
    values: node.values
  }
  return {
    name: parts.name,
    inputs: parts.inputs,
    state: Option.some(Topic.json(StreamStreamJoin.stateSchema)),
    // Its own state key is never written: the join's state is the task's (`Result.others`).
    stateKey: (record) => `j${defaultStateKey(record)}`,
    sharedState: true,
    rules: parts.rules,
    transform: (record, _state, task) => {
      if (task === undefined) return Effect.dieMessage("Skein invariant broken: a stream-stream join ran without its task's state")
      return Effect.flatMap(StreamStreamJoin.Context.load(task), (context) => {
        const join: StreamJoinStep = (side, keyed, forward, dropped) =>
          StreamStreamJoin.process(operator, context, side, keyed, record.topic, forward, dropped)
        return Eager.map(runRecord(parts, record, undefined, undefined, undefined, join), (emit) => ({ emit, ...context.result() }))
      })
    }
  }
}

/** What a stream-stream join does with a record of one side that reached it. */
type StreamJoinStep = (
  side: StreamStreamJoin.Side,
  record: Graph.StreamRecord,
  forward: (record: Graph.StreamRecord) => Effect.Effect<void, unknown, unknown>,
  dropped: (why: string) => Effect.Effect<void>
) => Effect.Effect<void, unknown, unknown>

/** Fails for a stream-stream join whose inputs may be re-keyed, that joins a stream with itself, or whose window is invalid. */
const checkStreamJoin = (node: Graph.StreamJoin, name: string): Either.Either<void, ConfigurationError> => {
  if (node.left === node.right) {
    return fail(
      `The stream-stream join "${name}" joins a stream with itself`,
      "Join two streams: branch the stream first (KStream.filter or KStream.mapValues on each side)"
    )
  }
  if (Graph.keyChanged(node.left) || Graph.keyChanged(node.right)) {
    return fail(
      `The stream-stream join "${name}" follows an operator that may change a stream's key (selectKey, map, flatMap), ` +
        "so a key's records of the two streams may not be in one task",
      "Repartition the re-keyed stream by its new key before the join: KStream.repartition({ key, value })"
    )
  }
  return Either.map(JoinWindows.validate(node.windows, `"${name}"`), () => undefined)
}

/**
 * What a user function given to an aggregation threw, on its way to the
 * record's boundary (`runRecord`). An aggregation calls its functions deep in
 * synchronous code (window bookkeeping); the throw carries the operator out
 * of it, and `runRecord` turns it into the record's `OperatorFailed`, for
 * the rules. Skein's own defects are not `Threw` and stay defects.
 */
class Threw {
  constructor(readonly operator: string, readonly kind: string, readonly cause: unknown) {}
}

/** `f`, whose throw is tagged with its operator (`Threw`). */
const guarded = <Args extends ReadonlyArray<unknown>, A>(
  operator: string,
  kind: string,
  f: (...args: Args) => A
): (...args: Args) => A =>
(...args) => {
  try {
    return f(...args)
  } catch (cause) {
    // The user's throw, re-thrown with its operator; caught at the record's boundary.
    throw new Threw(operator, kind, cause)
  }
}

const positionOf = (input: Transformer.InputRecord<unknown, unknown>) => ({
  topic: input.topic,
  partition: input.partition,
  offset: input.offset
})

/**
 * A record's event time: its source's extractor's, else its own; a negative
 * one is an `InvalidTimestamp`, a throwing extractor an `OperatorFailed`.
 */
const eventTime = (
  parts: TransformerParts,
  input: Transformer.InputRecord<unknown, unknown>
): Exit.Exit<number, InvalidTimestamp | OperatorFailed> => {
  const extractor = parts.extractors.get(input.topic)
  let timestamp = input.timestamp
  if (extractor !== undefined) {
    try {
      timestamp = extractor(input)
    } catch (cause) {
      return Exit.fail(
        new OperatorFailed({
          operator: parts.sourceNames.get(input.topic) ?? input.topic,
          kind: "timestamp extractor",
          source: positionOf(input),
          cause
        })
      )
    }
  }
  return Number.isFinite(timestamp) && timestamp >= 0
    ? Exit.succeed(timestamp)
    : Exit.fail(new InvalidTimestamp({ topic: input.topic, partition: input.partition, offset: input.offset, timestamp }))
}

/**
 * Runs one input record through the sub-topology's operators, children in
 * declaration order, and returns the records it writes. `observe` sees its
 * event time first (a windowed sub-topology's stream time).
 */
const runRecord = (
  parts: TransformerParts,
  input: Transformer.InputRecord<unknown, unknown>,
  aggregator: Aggregator | undefined,
  observe?: (timestamp: number) => Effect.Effect<void, unknown>,
  stores?: StoreAccess,
  streamJoin?: StreamJoinStep
): Effect.Effect<Array<Topic.OutputRecord>, unknown, unknown> =>
  new RecordRun(parts, input, aggregator, stores, streamJoin).run(observe)

/**
 * One input record's run through the sub-topology's operators (`runRecord`):
 * one object a record, whose steps are its class's methods (a function per
 * record would make each of its helpers, and their context, for every record).
 */
class RecordRun {
  /** The records the run writes, in order. */
  readonly emit: Array<Topic.OutputRecord> = []

  constructor(
    readonly parts: TransformerParts,
    readonly input: Transformer.InputRecord<unknown, unknown>,
    readonly aggregator: Aggregator | undefined,
    readonly stores: StoreAccess | undefined,
    readonly streamJoin: StreamJoinStep | undefined
  ) {}

  visitChildren(node: Graph.Node, record: Graph.StreamRecord): Effect.Effect<void, unknown, unknown> {
    const children = this.parts.children(node)
    // One child (most operators): its visit, without a callback made for `forEach`.
    return children.length === 1
      ? this.visit(children[0]!, record, node)
      : Eager.forEach(children, (child) => this.visit(child, record, node))
  }

  /** Counts and logs a record a table or a join drops, as Kafka Streams does (its dropped-records metric). */
  dropped(node: Graph.Node, why: string): Effect.Effect<void> {
    const { input, parts } = this
    parts.droppedJoinRecords.count++
    const count = parts.droppedJoinRecords.count
    const name = parts.nameOf(node)
    const counted = Metric.increment(RunnerMetrics.streamsDroppedRecordsOf(applicationIdOf(parts.applicationId, parts), parts.name, name))
    return count === 1 || count % 1_000 === 0
      ? Effect.zipRight(
        counted,
        Effect.logWarning(
          `${parts.name}: ${name} dropped the record ${input.topic}/${input.partition}@${input.offset} ${why}, ` +
            `as Kafka Streams drops it (${count} so far: skein_streams_dropped_records_total)`
        )
      )
      : counted
  }

  /**
   * A table change goes on to the operators that pass table changes on (`toStream` and what
   * follows), not to those that only feed joins: a join reads the table through its operators
   * when a stream record looks its key up (Kafka Streams' value getters), so they run then, once.
   */
  visitTableChildren(node: Graph.Node, record: Graph.StreamRecord): Effect.Effect<void, unknown, unknown> {
    return Eager.forEach(
      this.parts.children(node).filter((child) => !this.onlyJoins(child, node)),
      (child) => this.visit(child, record, node)
    )
  }

  onlyJoins(child: Graph.Node, parent: Graph.Node): boolean {
    return (child._tag === "Join" && child.table === parent) ||
      (child._tag === "FkJoin" && child.table === parent) ||
      (child._tag === "TableStep" && this.parts.children(child).every((c) => this.onlyJoins(c, child)))
  }

  operatorFailed(node: Graph.Node, kind: string, cause: unknown) {
    return Effect.fail(new OperatorFailed({ operator: this.parts.nameOf(node), kind, source: positionOf(this.input), cause }))
  }

  /**
   * A table's value for `key` and its timestamp, through its table operators (Kafka Streams' value
   * getters: they run on each lookup); `null` value: none. Throws what a table operator throws.
   */
  lookup(access: StoreAccess, table: Graph.Node, key: unknown, asOf?: number): TableJoin.Other {
    const store = Option.getOrUndefined(storeNodeOf(table))
    const slot = store === undefined ? Option.none() : access.get(store)
    if (Option.isNone(slot)) return { value: null, timestamp: -1 }
    const { timestamp } = slot.value
    // A versioned table: its value as of the stream record's timestamp (`versionedTable.ts`).
    const versioned = store?._tag === "TableSource" ? store.versioned : undefined
    const stored = store === undefined || versioned === undefined || asOf === undefined
      ? slot.value.value
      : VersionedTable.get(
        // The table's stored versions, as its Schema (`versionsSchema`) decoded them.
        slot.value.value as ReadonlyArray<VersionedTable.Version<unknown>>,
        asOf,
        access.streamTimes.get(store) ?? -1,
        versioned.historyMs
      )
    const value = tableStepsOf(table).reduce<unknown>(
      (value, step) => value === null ? null : step.apply({ key, value, timestamp, headers: [] }),
      stored
    )
    return { value, timestamp }
  }

  /** What a foreign-key join's nodes use of this run (`foreignKeyJoin.ts`). */
  foreignKeyRun(join: Graph.ForeignKeyJoin, access: StoreAccess): ForeignKeyJoin.Run {
    const { parts } = this
    return {
      partition: this.input.partition,
      sides: parts.foreignKeys.get(join)!,
      write: (node, record) => this.emit.push(parts.writer(node)!.write(record)),
      visitChildren: (node, record) => this.visitChildren(node, record),
      visitTableChildren: (node, record) => this.visitTableChildren(node, record),
      dropped: (node, why) => this.dropped(node, why),
      failed: (node, kind, cause) => this.operatorFailed(node, kind, cause),
      lookup: (table, key) => this.lookup(access, table, key),
      stored: (table) => Option.map(Option.flatMap(storeNodeOf(table), access.get), (slot) => slot.value),
      through: (table, key, value, timestamp) =>
        tableStepsOf(table).reduce<unknown>((value, step) => value === null ? null : step.apply({ key, value, timestamp, headers: [] }), value)
    }
  }

  /** A foreign-key join's node (`foreignKeyJoin.ts`); its subscriptions reach it from its left table, or from their topic. */
  visitForeignKeyJoin(
    node: Graph.FkSubscribe | Graph.FkRespond | Graph.FkResponse | Graph.FkJoin,
    record: Graph.StreamRecord,
    from: Graph.Node | undefined,
    writes: boolean
  ): Effect.Effect<void, unknown, unknown> {
    const { parts, stores } = this
    if (stores === undefined) return Effect.dieMessage("Skein invariant broken: a foreign-key join ran outside its tables' sub-topology")
    const run = this.foreignKeyRun(node.join, stores)
    switch (node._tag) {
      case "FkSubscribe":
        return writes ? ForeignKeyJoin.subscribe(run, node, record) : this.visitChildren(node, record)
      case "FkResponse":
        return this.visitChildren(node, record)
      case "FkRespond": {
        const store = parts.subscriptionStores.get(node)
        if (store === undefined) return Effect.dieMessage("Skein invariant broken: a foreign-key join's right side has no subscription store")
        return ForeignKeyJoin.respond(run, node, store, record, from === node.subscriptions)
      }
      case "FkJoin":
        // Only responses join: a change of the left table never reaches the join (`visitTableChildren`).
        if (from !== node.responses) return Effect.dieMessage("Skein invariant broken: a table change reached a foreign-key join")
        return ForeignKeyJoin.joinResponse(run, node, record)
    }
  }

  visit(node: Graph.Node, record: Graph.StreamRecord, from: Graph.Node | undefined): Effect.Effect<void, unknown, unknown> {
    const { aggregator, emit, input, parts, stores, streamJoin } = this
    const writer = parts.writer(node)
    // A foreign-key join's subscriptions are made from the left table's change, then written.
    if (node._tag === "FkSubscribe") return this.visitForeignKeyJoin(node, record, from, writer !== undefined)
    if (writer !== undefined) {
      emit.push(writer.write(record))
      return Effect.void
    }
    switch (node._tag) {
      case "Source":
      case "Merge":
      case "Repartition":
      case "Grouping":
        return this.visitChildren(node, record)
      case "Step": {
        let out: ReturnType<Graph.Step>
        try {
          out = node.step(record)
        } catch (cause) {
          return Effect.fail(new OperatorFailed({ operator: parts.nameOf(node), kind: node.kind, source: positionOf(input), cause }))
        }
        if (Effect.isEffect(out)) return Eager.flatMap(out, (records) => Eager.forEach(records, (r) => this.visitChildren(node, r)))
        // One record (a map, a kept record): its visit, without a callback made for `forEach`.
        return out.length === 1 ? this.visitChildren(node, out[0]!) : Eager.forEach(out, (r) => this.visitChildren(node, r))
      }
      case "Aggregate": {
        if (aggregator === undefined) return Effect.dieMessage("Skein invariant broken: an aggregate ran outside its sub-topology")
        if (record.key === null) {
          // Logged, and counted in the log: the first, then every 1,000th.
          parts.droppedNullKeys.count++
          const dropped = parts.droppedNullKeys.count
          return dropped === 1 || dropped % 1_000 === 0
            ? Effect.logWarning(
              `${parts.name}: records without a key are dropped by an aggregation, as Kafka Streams drops them ` +
                `(${dropped} so far); give them a key (KStream.selectKey) to count them`
            )
            : Effect.void
        }
        return aggregator(record, (update) => this.visitTableChildren(node, update))
      }
      case "Sink":
        emit.push(node.write(record))
        return Effect.void
      case "Process":
        return Process.visit(
          node,
          record,
          { subTopology: parts.name, name: parts.nameOf(node), position: positionOf(input) },
          (r) => this.visitChildren(node, r)
        )
      case "TableSource": {
        if (stores === undefined) return Effect.dieMessage("Skein invariant broken: a table ran outside its sub-topology")
        // Kafka Streams' table source drops a record without a key (it cannot be a key's latest value).
        if (record.key === null) return this.dropped(node, "without a key")
        if (node.versioned !== undefined) {
          // Kafka Streams' versioned store: a version per record within the history retention; only
          // stream-table joins read it (checked at compile), so no change is passed on.
          const streamTime = stores.streamTimes.get(node) ?? -1
          // The table's stored versions, as its Schema (`versionsSchema`) decoded them.
          const versions = Option.match(stores.get(node), {
            onNone: (): ReadonlyArray<VersionedTable.Version<unknown>> => [],
            onSome: (slot) => slot.value as ReadonlyArray<VersionedTable.Version<unknown>>
          })
          const next = VersionedTable.put(versions, record.value, record.timestamp, streamTime, node.versioned.historyMs)
          if (next === undefined) return this.dropped(node, "older than the versioned table's history retention")
          stores.streamTimes.set(node, Math.max(streamTime, record.timestamp))
          const latest = next[next.length - 1]
          stores.put(node, latest === undefined ? null : next, latest?.t ?? record.timestamp)
          return Effect.void
        }
        const previous = parts.sendsPrevious.has(node) ? Option.match(stores.get(node), { onNone: () => null, onSome: (s) => s.value }) : null
        stores.put(node, record.value, record.timestamp)
        return this.visitTableChildren(node, { ...record, previous })
      }
      case "TableStep": {
        // Kafka Streams' KTableFilter and KTableMapValues: a deletion stays one; the previous value
        // goes through the operator where it is sent, and a filter that sends it passes on no
        // change that deletes what it had not passed (its previous value and its new one rejected).
        const sends = parts.sendsPrevious.has(node)
        let value: unknown = null
        let previous: unknown = null
        try {
          if (record.value !== null) value = node.apply(record)
          if (sends && record.previous !== undefined && record.previous !== null) {
            previous = node.apply({ ...record, value: record.previous })
          }
        } catch (cause) {
          return this.operatorFailed(node, `table ${node.kind}`, cause)
        }
        if (sends && node.kind === "filter" && value === null && previous === null) return Effect.void
        return this.visitTableChildren(node, { ...record, value, previous })
      }
      case "TableJoin": {
        if (stores === undefined) return Effect.dieMessage("Skein invariant broken: a table join ran outside its sub-topology")
        const fromLeft = from === node.left
        let joined: TableJoin.Joined | undefined
        try {
          const other = this.lookup(stores, fromLeft ? node.right : node.left, record.key)
          const change = { value: record.value, previous: record.previous ?? null, timestamp: record.timestamp }
          joined = TableJoin.onChange(node.kind, fromLeft, change, other, node.joiner)
        } catch (cause) {
          return this.operatorFailed(node, "table join", cause)
        }
        if (joined === undefined) return Effect.void
        return this.visitTableChildren(node, { key: record.key, value: joined.value, timestamp: joined.timestamp, headers: record.headers })
      }
      case "FkRespond":
      case "FkResponse":
      case "FkJoin":
        return this.visitForeignKeyJoin(node, record, from, false)
      case "GlobalTableSource":
        return Effect.dieMessage("Skein invariant broken: a global table ran in a sub-topology")
      case "GlobalJoin": {
        // Kafka Streams 4.4's KStreamKTableJoinProcessor with a global table's value getter: a record without a
        // value is dropped; one whose key maps to none is joined with null by a left join, dropped by an inner one.
        const store = parts.globalStores.get(node.table)
        if (store === undefined) return Effect.dieMessage("Skein invariant broken: a global join without its global table")
        if (record.value === null) return this.dropped(node, "without a value")
        let key: unknown
        try {
          key = node.keyMapper(record) ?? null
        } catch (cause) {
          return this.operatorFailed(node, "key mapper", cause)
        }
        if (key === null && node.kind === "inner") return this.dropped(node, "whose key maps to no key of the global table")
        const found = key === null ? Either.right(null) : store.get(key)
        if (Either.isLeft(found)) return this.operatorFailed(node, "key mapper", found.left)
        if (found.right === null && node.kind === "inner") return Effect.void
        let value: unknown
        try {
          value = node.joiner(record, found.right)
        } catch (cause) {
          return this.operatorFailed(node, "joiner", cause)
        }
        return this.visitChildren(node, { ...record, value })
      }
      case "StreamJoin": {
        if (streamJoin === undefined) return Effect.dieMessage("Skein invariant broken: a stream-stream join ran outside its sub-topology")
        const side = from === node.left ? "left" : from === node.right ? "right" : undefined
        if (side === undefined) return Effect.dieMessage("Skein invariant broken: a stream-stream join reached from neither side")
        return streamJoin(side, record, (r) => this.visitChildren(node, r), (why) => this.dropped(node, why))
      }
      case "Join": {
        // Only stream records join: a table change never reaches a join (`visitTableChildren`).
        if (from !== node.stream) return Effect.dieMessage("Skein invariant broken: a table change reached a join")
        if (stores === undefined) return Effect.dieMessage("Skein invariant broken: a join ran outside its table's sub-topology")
        if (record.value === null) return this.dropped(node, "without a value")
        let tableValue: unknown = null
        if (record.key === null) {
          // A left join joins a record without a key with no table value (Kafka Streams since KIP-962); an inner join drops it.
          if (node.kind === "inner") return this.dropped(node, "without a key")
        } else {
          try {
            tableValue = this.lookup(stores, node.table, record.key, record.timestamp).value
          } catch (cause) {
            return this.operatorFailed(node, "table lookup", cause)
          }
        }
        if (tableValue === null && node.kind === "inner") return Effect.void
        let value: unknown
        try {
          value = node.joiner(record, tableValue)
        } catch (cause) {
          return this.operatorFailed(node, "joiner", cause)
        }
        return this.visitChildren(node, { ...record, value })
      }
    }
  }

  /**
   * The run: the record's event time, then (`observe`) its stream time, then its operators, each step
   * built where it runs. Eagerly (`eager.ts`): a record whose operators are all synchronous runs in this call.
   */
  run(observe: ((timestamp: number) => Effect.Effect<void, unknown>) | undefined): Effect.Effect<Array<Topic.OutputRecord>, unknown, unknown> {
    const time = eventTime(this.parts, this.input)
    if (time._tag === "Failure") return Exit.failCause(time.cause)
    const timestamp = time.value
    if (observe !== undefined) {
      const observed = observe(timestamp)
      if (!Eager.isDone(observed)) return Effect.flatMap(observed, () => Effect.as(this.operators(timestamp), this.emit))
      if (observed._tag === "Failure") return Exit.failCause(observed.cause)
    }
    const ran = this.operators(timestamp)
    if (!Eager.isDone(ran)) return Effect.as(ran, this.emit)
    return ran._tag === "Success" ? Exit.succeed(this.emit) : Exit.failCause(ran.cause)
  }

  /**
   * The record through its sub-topology's operators, from their roots for its topic. What an
   * aggregation's function threw (`guarded`), at once or when its step runs, is the record's error, for the rules.
   */
  operators(timestamp: number): Effect.Effect<void, unknown, unknown> {
    const { aggregator, input, streamJoin } = this
    const start: Graph.StreamRecord = { key: input.key, value: input.value, timestamp, headers: input.rawHeaders }
    if (aggregator === undefined && streamJoin === undefined) return this.visitRoots(start)
    // `Eager.catchSomeDefect`, without the two callbacks it takes made per record.
    let ran: Effect.Effect<void, unknown, unknown>
    try {
      ran = this.visitRoots(start)
    } catch (defect) {
      ran = Exit.die(defect)
    }
    if (!Eager.isDone(ran)) return Effect.catchSomeDefect(ran, (defect) => this.threw(defect))
    if (ran._tag === "Success") return ran
    const defect = Cause.dieOption(ran.cause)
    if (Option.isNone(defect)) return ran
    return Option.getOrElse(this.threw(defect.value), () => ran)
  }

  /** A user function's throw in an aggregation (`Threw`): the record's `OperatorFailed`. */
  threw(defect: unknown): Option.Option<Effect.Effect<never, OperatorFailed>> {
    return defect instanceof Threw
      ? Option.some(
        Effect.fail(new OperatorFailed({ operator: defect.operator, kind: defect.kind, source: positionOf(this.input), cause: defect.cause }))
      )
      : Option.none()
  }

  visitRoots(start: Graph.StreamRecord): Effect.Effect<void, unknown, unknown> {
    const roots = this.parts.rootsByTopic.get(this.input.topic) ?? []
    return roots.length === 1
      ? this.visit(roots[0]!, start, undefined)
      : Eager.forEach(roots, (root) => this.visit(root, start, undefined))
  }
}
