/**
 * Answers queries from a run's committed state: the stores of its active
 * tasks. A task's store holds only what its transactions committed (the
 * runtime writes it after each commit: `StateStore`, `CommitReceipt`), and
 * queries read the store itself, never a batch in flight nor the state cache,
 * so a write whose transaction has not committed is never an answer.
 *
 * What is read: a transformer's state of a key; a `KeyValueStore` by key,
 * range and prefix; a `WindowStore`'s windows of a key by start time and a
 * `SessionStore`'s sessions of a key by end and start time (as Kafka
 * Streams' `ReadOnlyWindowStore` and `ReadOnlySessionStore`), from the
 * entries as those stores lay them out (`stores/keys.ts`).
 *
 * A key belongs to one partition (the producer's default partitioner over its
 * text, or the request's `partition`): answered when that partition's task is
 * active here, `NotHere` (naming its owner, from the group's routes) when the
 * partition is not assigned here, `NotReady` while it restores (or its store
 * cannot be read: the task is moving).
 *
 * @internal
 */
import { Effect } from "effect"
import * as QueryRoutes from "./QueryRoutes.ts"
import type { StateStore } from "../stores/StateStore.ts"
import { compare, decodeTime, encodeTime, maxTime, namespace, namespaceEnd, prefixEnd, timeWidth } from "../stores/keys.ts"
import { partitionOf } from "./partitioner.ts"
import * as Positions from "./Positions.ts"
import { BadRequest, NotHere, NotReady, NotUpToBound, Unknown } from "./QueryError.ts"
import type { QueryError } from "./QueryError.ts"
import { sessionCursorText } from "./request.ts"
import type { Bounds, Format, PositionBound, Query } from "./request.ts"

/**
 * A partition as a query sees it here: its task's store, restoring (or
 * starting), stopped by a failure (failure isolation "partition"), or not
 * assigned here.
 */
export type PartitionState = StateStore<number> | StateStore | "restoring" | "stopped" | "absent"

/** What queries read of a run. */
export interface Source {
  /** The transformer's name. */
  readonly transformer: string
  /** True for a transformer with state (`GET /state/...`). */
  readonly stateful: boolean
  /** The names of its `KeyValueStore`s. */
  readonly keyValueStores: ReadonlyArray<string>
  /** Its other stores (window, session), named with their kind. */
  readonly otherStores: ReadonlyMap<string, string>
  /** The partitions of its inputs. */
  readonly partitions: number
  readonly partition: (partition: number) => PartitionState
  /** The partitions assigned here, in order. */
  readonly assigned: () => ReadonlyArray<number>
  /** Where each partition is queried, as of this instance's last join (`QueryRoutes`). */
  readonly routes: () => QueryRoutes.QueryRoutes
  /** This instance's announced endpoint (`host:port`), once it listens. */
  readonly self: () => string | undefined
  /** The input topics (a position bound names them). */
  readonly inputs: ReadonlyArray<string>
  /** The next offset of each input that `partition`'s committed store is past (`Positions`). */
  readonly position: (partition: number) => ReadonlyMap<string, number>
  /** Completes at the next commit of any task (read when called). */
  readonly nextPositionChange: () => Effect.Effect<void>
  /**
   * `partition`'s standby store here while it is readable, with the
   * changelog offset it reflects and its lag behind the changelog's end.
   */
  readonly standby: (partition: number) => { readonly store: StateStore; readonly position: number; readonly lag: number } | undefined
}

/** How long a caller should wait before asking again for a partition that is not ready. */
export const retryAfterMillis = 1000

/** A value as its JSON-encoded form (the Schema's encoding); text that is not JSON as a string. */
const jsonOf = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** A stored value as the answer carries it: its JSON, or its stored text (`format=text`). */
const valueOf = (text: string, format: Format): unknown => format === "text" ? text : jsonOf(text)

/** A key's value, or that it has none. */
const found = (text: string | undefined, format: Format) =>
  text === undefined ? { found: false, value: null } : { found: true, value: valueOf(text, format) }

const partitionFor = (source: Source, key: string, requested: number | undefined): Effect.Effect<number, BadRequest> =>
  requested === undefined
    ? Effect.succeed(partitionOf(key, source.partitions))
    : requested < source.partitions
    ? Effect.succeed(requested)
    : Effect.fail(
      new BadRequest({
        reason: "InvalidParameter",
        message: `partition=${requested}: the inputs have ${source.partitions} partitions (0 to ${source.partitions - 1})`
      })
    )

/** The store of `partition`'s active task here. */
const storeOf = (source: Source, partition: number): Effect.Effect<StateStore, NotHere | NotReady> => {
  const state = source.partition(partition)
  return state === "absent"
    ? Effect.fail(notHere(source, partition))
    : state === "restoring" || state === "stopped"
    ? Effect.fail(new NotReady({ partition, reason: state, retryAfterMillis }))
    : Effect.succeed(state)
}

/** `partition` is not active here: its owner and standbys as the routes know them (none known: `owner` undefined). */
const notHere = (source: Source, partition: number): NotHere => {
  const routes = source.routes()
  const owner = QueryRoutes.activeOf(routes, partition)
  return new NotHere({
    partition,
    partitions: source.partitions,
    // An owner named as this instance is a stale route (the partition left here since the last join): unknown.
    owner: owner === source.self() ? undefined : owner,
    standbys: QueryRoutes.standbysOf(routes, partition)
  })
}

/** The routes of the instances: which endpoint runs each partition and keeps its standbys. */
const metadata = (source: Source, key: string | undefined, requested: number | undefined) =>
  Effect.gen(function*() {
    const routes = source.routes()
    const here = new Set(source.assigned())
    if (key === undefined && requested === undefined) {
      const unrouted = Array.from({ length: source.partitions }, (_, p) => p).filter((p) =>
        QueryRoutes.activeOf(routes, p) === undefined
      )
      return {
        self: source.self() ?? null,
        partitions: source.partitions,
        here: [...here].sort((a, b) => a - b),
        instances: QueryRoutes.byEndpoint(routes),
        unrouted
      }
    }
    const partition = yield* partitionFor(source, key ?? "", requested)
    return {
      ...(key === undefined ? {} : { key }),
      partition,
      active: here.has(partition) ? source.self() ?? null : QueryRoutes.activeOf(routes, partition) ?? null,
      standbys: QueryRoutes.standbysOf(routes, partition),
      here: here.has(partition)
    }
  })

/** How often a bound's wait looks again without a commit (a task that restarted moves its start, not its commits). */
const boundPoll = "200 millis"

/**
 * Waits until `partition`'s store reflects `bound` (its records processed
 * and committed), then the partition's store; `NotUpToBound` past the
 * timeout. The partition is looked up again after the wait: it may have
 * moved (`NotHere`) or be restoring (`NotReady`).
 */
const awaitBound = (
  source: Source,
  partition: number,
  bound: PositionBound
): Effect.Effect<StateStore, BadRequest | NotHere | NotReady | NotUpToBound> =>
  Effect.gen(function*() {
    const unknown = bound.bound.filter(({ topic }) => !source.inputs.includes(topic))
    if (unknown.length > 0) {
      return yield* new BadRequest({
        reason: "InvalidParameter",
        message: `position=: ${unknown.map((b) => JSON.stringify(b.topic)).join(", ")} is not an input topic of ` +
          `${source.transformer} (its inputs: ${source.inputs.map((t) => JSON.stringify(t)).join(", ")})`
      })
    }
    yield* storeOf(source, partition)
    const wait: Effect.Effect<void> = Effect.suspend(() => {
      const next = source.nextPositionChange()
      return Positions.reached(source.position(partition), bound.bound)
        ? Effect.void
        : Effect.zipRight(Effect.race(next, Effect.sleep(boundPoll)), wait)
    })
    yield* wait.pipe(
      Effect.timeoutFail({
        duration: bound.timeoutMillis,
        onTimeout: () =>
          new NotUpToBound({ partition, bound: bound.bound, position: source.position(partition), timeoutMillis: bound.timeoutMillis })
      })
    )
    return yield* storeOf(source, partition)
  })

/** A read of a store that is closed under it (its task torn down meanwhile) is a retry, never an answer. */
const reading = <A, E>(partition: number, read: Effect.Effect<A, E>): Effect.Effect<A, NotReady> =>
  Effect.mapError(read, () => new NotReady({ partition, reason: "unavailable", retryAfterMillis }))

/** The kinds of store a query reads. */
type StoreKind = "KeyValueStore" | "WindowStore" | "SessionStore"

/** What each kind of store is asked with. */
const queriedWith: Record<StoreKind, string> = {
  KeyValueStore: "/stores/{store}/keys/{key}, /range or /prefix",
  WindowStore: "/stores/{store}/windows/{key}",
  SessionStore: "/stores/{store}/sessions/{key}"
}

/** Store `name` when it is a store of `kind` here. */
const storeNamed = (source: Source, name: string, kind: StoreKind): Effect.Effect<string, Unknown> => {
  const found = source.keyValueStores.includes(name) ? "KeyValueStore" : source.otherStores.get(name)
  if (found === kind) return Effect.succeed(name)
  const known = [
    ...(kind === "KeyValueStore" ? source.keyValueStores : []),
    ...[...source.otherStores].filter(([, other]) => other === kind).map(([store]) => store)
  ]
  return Effect.fail(
    new Unknown({
      what: "store",
      kind,
      name,
      known,
      detail: found === undefined
        ? undefined
        : `a ${found}: ask it with ${queriedWith[found === "WindowStore" || found === "SessionStore" ? found : "KeyValueStore"]}`
    })
  )
}

const keyValueStore = (source: Source, name: string): Effect.Effect<string, Unknown> => storeNamed(source, name, "KeyValueStore")

/** The largest time a window or session holds. */
const maxSafe = Number.MAX_SAFE_INTEGER

/**
 * Reads up to `limit` of one key's entries (store keys `base` then `times`
 * characters) from `gte` to `lte`, keeping those `keep` accepts. Entries of a
 * longer key that starts with this one and a NUL sort among them and are
 * skipped, so a page reads on until it is full or the range ends.
 */
const keyEntries = <A>(
  store: StateStore,
  bounds: { readonly base: string; readonly times: number; readonly gte: string; readonly lte: string; readonly limit: number },
  keep: (storeKey: string, text: string) => A | undefined
) =>
  Effect.gen(function*() {
    const entries: Array<A> = []
    let gte = bounds.gte
    while (entries.length < bounds.limit) {
      const found = yield* store.range({ gte, lte: bounds.lte, limit: bounds.limit })
      for (const [storeKey, text] of found) {
        if (storeKey.length !== bounds.base.length + bounds.times) continue
        const entry = keep(storeKey, text)
        if (entry === undefined) continue
        entries.push(entry)
        if (entries.length === bounds.limit) break
      }
      const last = found[found.length - 1]
      if (found.length < bounds.limit || last === undefined) break
      gte = `${last[0]}\u0000`
    }
    return entries
  })

/** A key's windows that start from `from` to `to`, after `after`, at most `limit`, in start order. */
const windows = (store: StateStore, name: string, key: string, query: Extract<Query, { readonly _tag: "WindowFetch" }>) => {
  const first = query.after === undefined ? query.from : Math.max(query.from, query.after + 1)
  if (first > query.to || first > maxSafe) return Effect.succeed([])
  const base = `${namespace(name)}${key}\u0000`
  return keyEntries(
    store,
    { base, times: timeWidth, gte: base + encodeTime(first), lte: base + encodeTime(query.to), limit: query.limit },
    (storeKey, text) => ({ start: decodeTime(storeKey, base.length), value: valueOf(text, query.format) })
  )
}

/** A key's sessions that end at or after `earliestEnd` and start at or before `latestStart`, after `after`, at most `limit`, by end then start. */
const sessions = (store: StateStore, name: string, key: string, query: Extract<Query, { readonly _tag: "SessionFetch" }>) => {
  const base = `${namespace(name)}${key}\u0000`
  const lowest = encodeTime(query.earliestEnd) + encodeTime(0)
  // After the cursor's session (end, start): the least key above it.
  const after = query.after === undefined ? lowest : `${encodeTime(query.after.end)}${encodeTime(query.after.start)}\u0000`
  return keyEntries(
    store,
    {
      base,
      times: 2 * timeWidth,
      gte: base + (compare(after, lowest) >= 0 ? after : lowest),
      lte: base + maxTime + maxTime,
      limit: query.limit
    },
    (storeKey, text) => {
      const start = decodeTime(storeKey, base.length + timeWidth)
      return start > query.latestStart
        ? undefined
        : { start, end: decodeTime(storeKey, base.length), value: valueOf(text, query.format) }
    }
  )
}

/** The store-key bounds of a scan of store `name`, after the key `after` (exclusive). */
const storeBounds = (name: string, bounds: Bounds, after: string | undefined) => {
  const base = namespace(name)
  // The least key after `after` is `after` followed by U+0000.
  const atLeast = (from: string) => after === undefined || compare(from, `${after}\u0000`) >= 0 ? from : `${after}\u0000`
  if (bounds._tag === "Range") {
    const gte = base + atLeast(bounds.from ?? "")
    return bounds.to === undefined ? { gte, lt: namespaceEnd(name) } : { gte, lte: base + bounds.to }
  }
  const end = prefixEnd(bounds.prefix)
  return { gte: base + atLeast(bounds.prefix), lt: end === undefined ? namespaceEnd(name) : base + end }
}

/** Answers `query` from `source`: the JSON body of a 200, or why not. */
export const answer = (
  source: Source,
  query: Query,
  bound?: PositionBound | undefined,
  allowStandby: boolean = false
): Effect.Effect<Record<string, unknown>, QueryError> =>
  Effect.gen(function*() {
    if (bound !== undefined && allowStandby) {
      return yield* new BadRequest({
        reason: "InvalidParameter",
        message: "position= and allowStandby=true do not go together: a standby's store has no input position"
      })
    }
    /** What a standby answer says of its store (set when a standby answered). */
    let fromStandby: { readonly standby: { readonly position: number; readonly lag: number } } | Record<never, never> = {}
    /** The store of `partition`, once it reflects the bound (if any); a standby's when allowed and not active here. */
    const storeFor = (partition: number): Effect.Effect<StateStore, QueryError> => {
      const active = bound === undefined ? storeOf(source, partition) : awaitBound(source, partition, bound)
      return !allowStandby ? active : Effect.catchTag(active, "NotHere", (notHere) => {
        const standby = source.standby(partition)
        if (standby === undefined) return Effect.fail(notHere)
        fromStandby = { standby: { position: standby.position, lag: standby.lag } }
        return Effect.succeed(standby.store)
      })
    }
    if (bound !== undefined && (query._tag === "Metadata" || (query._tag === "StoreScan" && query.partition === undefined))) {
      return yield* new BadRequest({
        reason: "InvalidParameter",
        message: "position= bounds a query of one partition: a key's, or a scan's with partition="
      })
    }
    switch (query._tag) {
      case "Metadata":
        return yield* metadata(source, query.key, query.partition)
      case "State": {
        if (query.transformer !== source.transformer || !source.stateful) {
          return yield* new Unknown({
            what: "transformer",
            name: query.transformer,
            known: source.stateful ? [source.transformer] : [],
            detail: query.transformer === source.transformer ? "it keeps no state" : undefined
          })
        }
        const partition = yield* partitionFor(source, query.key, query.partition)
        const store = yield* storeFor(partition)
        const text = yield* reading(partition, store.get(query.key))
        return { transformer: source.transformer, key: query.key, partition, ...found(text, query.format), ...fromStandby }
      }
      case "StoreKey": {
        const name = yield* keyValueStore(source, query.store)
        const partition = yield* partitionFor(source, query.key, query.partition)
        const store = yield* storeFor(partition)
        const text = yield* reading(partition, store.get(namespace(name) + query.key))
        return { store: name, key: query.key, partition, ...found(text, query.format), ...fromStandby }
      }
      case "WindowFetch": {
        const name = yield* storeNamed(source, query.store, "WindowStore")
        const partition = yield* partitionFor(source, query.key, query.partition)
        const store = yield* storeFor(partition)
        const page = yield* reading(partition, windows(store, name, query.key, query))
        const last = page[page.length - 1]
        return {
          store: name,
          key: query.key,
          partition,
          windows: page,
          next: page.length === query.limit && last !== undefined ? last.start : null,
          ...fromStandby
        }
      }
      case "SessionFetch": {
        const name = yield* storeNamed(source, query.store, "SessionStore")
        const partition = yield* partitionFor(source, query.key, query.partition)
        const store = yield* storeFor(partition)
        const page = yield* reading(partition, sessions(store, name, query.key, query))
        const last = page[page.length - 1]
        return {
          store: name,
          key: query.key,
          partition,
          sessions: page,
          next: page.length === query.limit && last !== undefined ? sessionCursorText(last) : null,
          ...fromStandby
        }
      }
      case "StoreScan": {
        const name = yield* keyValueStore(source, query.store)
        const partitions = query.partition === undefined
          ? source.assigned()
          : [yield* partitionFor(source, "", query.partition)]
        // Every partition is ready before any is read: never a page missing a restoring partition's entries.
        const stores = yield* Effect.forEach(
          partitions,
          (partition) => Effect.map(storeFor(partition), (store) => [partition, store] as const)
        )
        const bounds = { ...storeBounds(name, query.bounds, query.after), limit: query.limit }
        const base = namespace(name).length
        const entries: Array<{ readonly key: string; readonly value: unknown; readonly partition: number }> = []
        for (const [partition, store] of stores) {
          for (const [key, text] of yield* reading(partition, store.range(bounds))) {
            entries.push({ key: key.slice(base), value: valueOf(text, query.format), partition })
          }
        }
        const page = entries.sort((a, b) => compare(a.key, b.key)).slice(0, query.limit)
        const last = page[page.length - 1]
        return {
          store: name,
          entries: page,
          next: page.length === query.limit && last !== undefined ? last.key : null,
          partitions,
          complete: partitions.length === source.partitions
        }
      }
    }
  })
