/**
 * Process nodes (`KStream.process`, Kafka Streams' `KStream#process`) in
 * their sub-topology's transformer: a process node's named stores join the
 * transformer's stores (committed in the task's transaction, changelogged,
 * restored, kept, standbys: the runtime's, unchanged), and its timers are the
 * transformer's timers (`Timer.ts`), under names namespaced by the node
 * (`timerName`), so that two process nodes of one sub-topology never collide.
 * The transformer's `onTimer` hands a due timer to the node that scheduled
 * it, and what that forwards runs through the node's downstream operators,
 * as a record's outputs do.
 *
 * A timer belongs to the state key of the record its sub-topology read (the
 * record key as text): `check` makes sure a process node with `onTimer`
 * still has that key (no operator above it in its sub-topology may change it).
 *
 * @internal
 */
import { Effect, Either, FiberRef, Option, Schema } from "effect"
import { ConfigurationError, OperatorFailed } from "../../SkeinError.ts"
import type * as Timer from "../../Timer.ts"
import type * as Topic from "../../Topic.ts"
import type * as Transformer from "../../Transformer.ts"
import * as StoredAtEnd from "../runtime/storedAtEnd.ts"
import * as Timers from "../runtime/timers.ts"
import * as StoreAccess from "../stores/access.ts"
import * as Keys from "../stores/keys.ts"
import * as Eager from "./eager.ts"
import * as Graph from "./graph.ts"

/** The runtime name of timer `name` of the process node `node`: both, as JSON, so no two nodes' names meet. */
export const timerName = (node: string, name: string): string => JSON.stringify([node, name])

const decodeTimerName = Schema.decodeUnknownOption(Schema.parseJson(Schema.Tuple(Schema.String, Schema.String)))

/** A process node's timer changes, under its namespaced names. */
const namespaced = (node: string, changes: ReadonlyArray<Timer.Change>): Array<Timer.Change> =>
  changes.map((change): Timer.Change =>
    change._tag === "Cancel"
      ? { _tag: "Cancel", name: timerName(node, change.name) }
      : { _tag: "Schedule", timer: { ...change.timer, name: timerName(node, change.timer.name) } }
  )

/**
 * The timer changes the process nodes of the running unit (a record's
 * transform, a timer's `onTimer`) made, in order; set by `attach` around the
 * unit, read as the unit runs (its process nodes' steps are effects: they run
 * inside it, whatever ran eagerly before them).
 */
const scheduled: FiberRef.FiberRef<Array<Timer.Change> | undefined> = FiberRef.unsafeMake<Array<Timer.Change> | undefined>(
  undefined
)

/** Where a process node runs: its sub-topology, its name, and the record (or timer) it runs for. */
export interface Where {
  readonly subTopology: string
  readonly name: string
  readonly position: Graph.Position
}

/** The user's function, its throw an `OperatorFailed` for the rules. */
const call = (
  where: Where,
  kind: string,
  f: () => Effect.Effect<Graph.ProcessResult, unknown, unknown>
): Effect.Effect<Graph.ProcessResult, unknown, unknown> => {
  try {
    return f()
  } catch (cause) {
    return Effect.fail(new OperatorFailed({ operator: where.name, kind, source: where.position, cause }))
  }
}

const unreachable = Effect.dieMessage("Skein invariant broken: a process node reached a store it does not list")

/**
 * `effect` with the stores of `node` only: a store it does not list is a
 * defect naming the node and the fix (`Typed.access`), even one another node
 * of its sub-topology lists.
 */
const withOwnStores = <A, E, R>(node: Graph.Process, where: Where, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  FiberRef.getWith(StoreAccess.current, (running) => {
    const label = `${where.subTopology}: process node "${where.name}"`
    const declared = (name: string) => node.stores.find((store) => store.name === name)
    const own: StoreAccess.Access = Option.match(running, {
      onNone: () => ({
        transformer: label,
        partition: where.position.partition,
        path: "",
        source: where.position,
        declared,
        get: () => unreachable,
        put: () => unreachable,
        range: () => unreachable
      }),
      onSome: (access) => ({
        transformer: label,
        partition: access.partition,
        path: access.path,
        source: access.source,
        declared,
        get: access.get,
        put: access.put,
        range: access.range
      })
    })
    return Effect.locally(effect, StoreAccess.current, Option.some(own))
  })

/**
 * A process node's result, checked: its timers kept for the unit, its
 * outputs as stream records (unset timestamp and headers: `defaults`').
 */
const settle = (
  node: Graph.Process,
  where: Where,
  result: Graph.ProcessResult,
  defaults: { readonly timestamp: number; readonly headers: ReadonlyArray<readonly [string, Buffer]> }
): Effect.Effect<ReadonlyArray<Graph.StreamRecord>, unknown, unknown> => {
  const timers = result.timers ?? []
  if (timers.length > 0) {
    if (node.onTimer === undefined) {
      return Effect.dieMessage(
        `${where.subTopology}: the process node "${where.name}" schedules timers but has no onTimer to run them: give it one ` +
          "(KStream.process({ ..., onTimer }))"
      )
    }
    const invalid = Timers.invalidChange(timers)
    if (invalid !== undefined) return Effect.dieMessage(`${where.subTopology}: the process node "${where.name}": ${invalid}`)
  }
  const records: Array<Graph.StreamRecord> = []
  for (const output of result.outputs ?? []) {
    const timestamp = output.timestamp ?? defaults.timestamp
    if (!Number.isFinite(timestamp) || timestamp < 0) {
      return Effect.fail(
        new OperatorFailed({
          operator: where.name,
          kind: "process",
          source: where.position,
          cause: new Error(
            `an output has the timestamp ${timestamp}: an output's timestamp must be a finite number of epoch milliseconds, 0 or more`
          )
        })
      )
    }
    records.push({ key: output.key, value: output.value, timestamp, headers: output.headers ?? defaults.headers })
  }
  if (timers.length === 0) return Effect.succeed(records)
  return Effect.flatMap(FiberRef.get(scheduled), (into) => {
    if (into === undefined) return Effect.dieMessage("Skein invariant broken: a process node's timers outside their unit")
    for (const change of namespaced(where.name, timers)) into.push(change)
    return Effect.succeed(records)
  })
}

/**
 * A record reaching a process node: the user's `process` with the node's
 * stores, then its outputs to `forward` (its downstream operators), each
 * with the record's timestamp and headers unless it sets its own.
 */
export const visit = (
  node: Graph.Process,
  record: Graph.StreamRecord,
  where: Where,
  forward: (record: Graph.StreamRecord) => Effect.Effect<void, unknown, unknown>
): Effect.Effect<void, unknown, unknown> =>
  Eager.flatMap(
    withOwnStores(node, where, call(where, "process", () => node.process(record, where.position))),
    (result) => Eager.flatMap(settle(node, where, result, record), (records) => Eager.forEach(records, forward))
  )

/** A sub-topology's process nodes, and how it runs records from a node's downstream operators on. */
export interface Parts {
  readonly subTopology: string
  readonly processes: ReadonlyArray<{ readonly node: Graph.Process; readonly name: string }>
  /** Runs `records` through the operators below `node`, as `input`'s (a timer's); what they write. */
  readonly runFrom: (
    node: Graph.Process,
    records: ReadonlyArray<Graph.StreamRecord>,
    input: Transformer.InputRecord<unknown, unknown>
  ) => Effect.Effect<ReadonlyArray<Topic.OutputRecord>, unknown, unknown>
  /** A record's event time, when its sources have timestamp extractors: stream time moves by it. */
  readonly eventTime?: ((record: Transformer.InputRecord<unknown, unknown>) => number) | undefined
}

/** True when one of `processes` needs its transformer to keep a state store (for its stores or its timers). */
export const needsState = (processes: Parts["processes"]): boolean =>
  processes.some(({ node }) => node.stores.length > 0 || node.onTimer !== undefined)

/**
 * `transformer` with its sub-topology's process nodes: their stores join
 * its stores (one declaration per name: `check` made sure a shared name is
 * one store), and, when one has `onTimer`, its units collect their process
 * nodes' timer changes into their results, its `onTimer` runs a due timer
 * at the node that scheduled it, and its records move stream time by their
 * event time. The transformer keeps a state (`needsState`).
 */
export const attach = (
  transformer: Transformer.Any & { readonly stores?: ReadonlyArray<StoreAccess.Declaration> | undefined },
  parts: Parts
): Transformer.Any => {
  const stores = new Map((transformer.stores ?? []).map((store) => [store.name, store]))
  for (const { node } of parts.processes) for (const store of node.stores) if (!stores.has(store.name)) stores.set(store.name, store)
  const timed = new Map(parts.processes.flatMap(({ name, node }) => node.onTimer === undefined ? [] : [[name, node] as const]))
  const inner = transformer.transform
  const attached: Transformer.Any = Object.assign(
    {},
    transformer,
    stores.size === 0 ? {} : { stores: [...stores.values()] },
    timed.size === 0 ? {} : {
      transform: (record: never, state: never, task?: never) => {
        const into: Array<Timer.Change> = []
        return Effect.map(
          Effect.locally(inner(record, state, task), scheduled, into),
          (result): Transformer.Result<unknown> => into.length === 0 ? result : { ...result, timers: [...(result.timers ?? []), ...into] }
        )
      },
      onTimer: (fired: Timer.Fired) => onTimer(parts, timed, fired)
    }
  )
  if (timed.size > 0 && parts.eventTime !== undefined) Timers.withEventTime(attached, parts.eventTime)
  const atEnd = StoredAtEnd.atEndOf(transformer)
  return atEnd === undefined ? attached : StoredAtEnd.storedAtEnd(attached, atEnd)
}

/** A due timer, run by the process node that scheduled it; one no node of the topology has now is dropped with a warning. */
const onTimer = (
  parts: Parts,
  timed: ReadonlyMap<string, Graph.Process>,
  fired: Timer.Fired
): Effect.Effect<Transformer.Result<unknown>, unknown, unknown> => {
  const owner = Option.flatMap(
    decodeTimerName(fired.name),
    ([node, name]) => Option.map(Option.fromNullable(timed.get(node)), (process) => ({ node: process, nodeName: node, name }))
  )
  if (Option.isNone(owner)) {
    return Effect.as(
      Effect.logWarning(
        `${parts.subTopology}: the timer ${fired.name} of key ${JSON.stringify(fired.key)} belongs to no process node with ` +
          "onTimer in this topology (renamed or removed since it was scheduled): dropped"
      ),
      {}
    )
  }
  const { name, node, nodeName } = owner.value
  const run = node.onTimer
  if (run === undefined) return Effect.dieMessage("Skein invariant broken: a timer of a process node without onTimer")
  return FiberRef.getWith(StoreAccess.current, (running) => {
    const position: Graph.Position = {
      topic: `${parts.subTopology} timer ${name}`,
      partition: Option.match(running, { onNone: () => -1, onSome: (access) => access.partition }),
      offset: -1
    }
    const where: Where = { subTopology: parts.subTopology, name: nodeName, position }
    const input: Transformer.InputRecord<unknown, unknown> = {
      ...position,
      key: fired.key,
      value: null,
      headers: {},
      rawHeaders: [],
      timestamp: fired.time
    }
    const into: Array<Timer.Change> = []
    const forwarded = Eager.flatMap(
      withOwnStores(node, where, call(where, "onTimer", () => run({ ...fired, name }))),
      (result) =>
        Eager.flatMap(settle(node, where, result, { timestamp: fired.time, headers: [] }), (records) => parts.runFrom(node, records, input))
    )
    return Effect.map(
      Effect.locally(forwarded, scheduled, into),
      (emit): Transformer.Result<unknown> => into.length === 0 ? { emit } : { emit, timers: into }
    )
  })
}

const fail = (problem: string, fix: string) => Either.left(new ConfigurationError({ problem, fix }))

/**
 * Fails for process nodes whose stores or timers cannot work: a store name
 * that is not valid, one that names another operator's state (store names
 * share one namespace with the topology's stateful operators), one store
 * name for stores of other kinds or Schemas, a store used from two
 * sub-topologies (a store is its sub-topology's tasks'), and a node with
 * `onTimer` whose records may not have their sub-topology's input key, or
 * in a sub-topology whose state keys are not the records' keys.
 */
export const check = (
  topologyName: string,
  groups: Iterable<ReadonlyArray<Graph.Node>>,
  names: ReadonlyMap<Graph.Node, string>
): Either.Either<void, ConfigurationError> => {
  const nameOf = (node: Graph.Node) => names.get(node) ?? ""
  const owned = new Map<string, string>()
  const all = [...groups]
  for (const node of all.flat()) {
    const name = nameOf(node)
    switch (node._tag) {
      case "TableSource":
        owned.set(name, "table")
        if (node.versioned !== undefined) owned.set(`${name}-stream-time`, "versioned table's stream time")
        break
      case "Aggregate":
        owned.set(name, "aggregation")
        break
      case "StreamJoin":
        owned.set(name, "stream-stream join")
        break
      case "FkRespond":
        owned.set(name, "foreign-key join's subscriptions")
        break
      default:
    }
  }
  const declared = new Map<string, { readonly store: StoreAccess.Declaration; readonly node: string; readonly group: number }>()
  for (const [group, members] of all.entries()) {
    for (const node of members) {
      if (node._tag !== "Process") continue
      const name = nameOf(node)
      for (const store of node.stores) {
        const invalid = Keys.invalidName(store.name)
        if (invalid !== undefined) {
          return fail(`The process node "${name}" lists an invalid store: ${invalid}`, "Give the store a name (KeyValueStore.make({ name, ... }))")
        }
        const operator = owned.get(store.name)
        if (operator !== undefined) {
          return fail(
            `The ${store.kind} "${store.name}" of the process node "${name}" has the name of the ${operator} "${store.name}" ` +
              `of topology "${topologyName}", whose state it names`,
            "Give the store a name of its own: store names share one namespace with the topology's tables, aggregations and joins"
          )
        }
        const other = declared.get(store.name)
        if (other === undefined) {
          declared.set(store.name, { store, node: name, group })
          continue
        }
        if (other.store.kind !== store.kind || other.store.schema !== store.schema) {
          return fail(
            `The process nodes "${other.node}" and "${name}" of topology "${topologyName}" list two different stores named ` +
              `"${store.name}" (${other.store.kind}: ${other.store.schema}; ${store.kind}: ${store.schema})`,
            "Give each store its own name, or list the same store value in both to share it"
          )
        }
        if (other.group !== group) {
          return fail(
            `The process nodes "${other.node}" and "${name}" of topology "${topologyName}" share the store "${store.name}" from ` +
              "two sub-topologies, and a store belongs to the tasks of one sub-topology",
            "Use a shared store from process nodes with no repartition between them, or give each its own store with its own name"
          )
        }
      }
      if (node.onTimer === undefined) continue
      if (Graph.keyChanged(node.parent)) {
        return fail(
          `The process node "${name}" has onTimer and follows an operator that may change the key (selectKey, map, flatMap, ` +
            "process), and a timer belongs to the key its sub-topology read the record with",
          "Repartition the stream by its new key before the process node: KStream.repartition({ key, value })"
        )
      }
      const other = members.find((n) =>
        (n._tag === "Aggregate" && n.windowing !== undefined) || n._tag === "StreamJoin"
      )
      if (other !== undefined) {
        return fail(
          `The process node "${name}" has onTimer and is in one sub-topology with the ${
            other._tag === "StreamJoin" ? "stream-stream join" : "windowed aggregation"
          } "${nameOf(other)}", which keeps its sub-topology's state to itself`,
          "Repartition between them (KStream.repartition before the process node, with its own name)"
        )
      }
    }
  }
  return Either.right(undefined)
}
