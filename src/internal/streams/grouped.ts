/**
 * The representation of `KGroupedStream` and `KTable` values: a graph node
 * behind the public variance markers. The public modules re-export these.
 *
 * @internal
 */
import * as Pipeable from "effect/Pipeable"
import type { SessionWindows } from "../../SessionWindows.ts"
import type { SlidingWindows } from "../../SlidingWindows.ts"
import type { TimeWindows } from "../../TimeWindows.ts"
import type * as Graph from "./graph.ts"

export const GroupedTypeId: unique symbol = Symbol.for("skein/KGroupedStream")
export type GroupedTypeId = typeof GroupedTypeId

export const WindowedTypeId: unique symbol = Symbol.for("skein/TimeWindowedKStream")
export type WindowedTypeId = typeof WindowedTypeId

export const SessionTypeId: unique symbol = Symbol.for("skein/SessionWindowedKStream")
export type SessionTypeId = typeof SessionTypeId

export const TableTypeId: unique symbol = Symbol.for("skein/KTable")
export type TableTypeId = typeof TableTypeId

/** Records grouped by key, ready for an aggregation. */
export interface KGroupedStream<out K, out V, out E = never, out R = never> extends Pipeable.Pipeable {
  readonly [GroupedTypeId]: {
    readonly _K: (_: never) => K
    readonly _V: (_: never) => V
    readonly _E: (_: never) => E
    readonly _R: (_: never) => R
  }
  /** @internal */
  readonly node: Graph.Node
}

/** Records grouped by key and by window of event time, ready for a windowed aggregation. */
export interface TimeWindowedKStream<out K, out V, out E = never, out R = never> extends Pipeable.Pipeable {
  readonly [WindowedTypeId]: {
    readonly _K: (_: never) => K
    readonly _V: (_: never) => V
    readonly _E: (_: never) => E
    readonly _R: (_: never) => R
  }
  /** @internal */
  readonly node: Graph.Node
  readonly windows: TimeWindows | SlidingWindows
}

/** Records grouped by key and by session of event time, ready for a session aggregation. */
export interface SessionWindowedKStream<out K, out V, out E = never, out R = never> extends Pipeable.Pipeable {
  readonly [SessionTypeId]: {
    readonly _K: (_: never) => K
    readonly _V: (_: never) => V
    readonly _E: (_: never) => E
    readonly _R: (_: never) => R
  }
  /** @internal */
  readonly node: Graph.Node
  readonly windows: SessionWindows
}

/** The latest value per key, as an aggregation keeps it; its updates are a stream (`toStream`). */
export interface KTable<out K, out V, out E = never, out R = never> extends Pipeable.Pipeable {
  readonly [TableTypeId]: {
    readonly _K: (_: never) => K
    readonly _V: (_: never) => V
    readonly _E: (_: never) => E
    readonly _R: (_: never) => R
  }
  /** @internal */
  readonly node: Graph.Node
}

/** The variance markers of a DSL value (phantom types: never called). */
export const variance = { _K: (_: never) => _, _V: (_: never) => _, _E: (_: never) => _, _R: (_: never) => _ }

/** A DSL value: the graph node it stands for, pipeable. */
export class NodeValue extends Pipeable.Class() {
  constructor(readonly node: Graph.Node) {
    super()
  }
}

class GroupedValue<K, V, E, R> extends NodeValue implements KGroupedStream<K, V, E, R> {
  readonly [GroupedTypeId] = variance
}

class WindowedValue<K, V, E, R> extends NodeValue implements TimeWindowedKStream<K, V, E, R> {
  readonly [WindowedTypeId] = variance
  constructor(node: Graph.Node, readonly windows: TimeWindows | SlidingWindows) {
    super(node)
  }
}

class SessionValue<K, V, E, R> extends NodeValue implements SessionWindowedKStream<K, V, E, R> {
  readonly [SessionTypeId] = variance
  constructor(node: Graph.Node, readonly windows: SessionWindows) {
    super(node)
  }
}

class TableValue<K, V, E, R> extends NodeValue implements KTable<K, V, E, R> {
  readonly [TableTypeId] = variance
}

export const make = <K, V, E, R>(node: Graph.Node): KGroupedStream<K, V, E, R> => new GroupedValue<K, V, E, R>(node)

export const table = <K, V, E, R>(node: Graph.Node): KTable<K, V, E, R> => new TableValue<K, V, E, R>(node)

export const windowed = <K, V, E, R>(node: Graph.Node, windows: TimeWindows | SlidingWindows): TimeWindowedKStream<K, V, E, R> =>
  new WindowedValue<K, V, E, R>(node, windows)

export const sessions = <K, V, E, R>(node: Graph.Node, windows: SessionWindows): SessionWindowedKStream<K, V, E, R> =>
  new SessionValue<K, V, E, R>(node, windows)
