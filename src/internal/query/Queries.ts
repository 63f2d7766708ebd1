/**
 * Answers queries from a run's committed state: the stores of its active
 * tasks. A task's store holds only what its transactions committed (the
 * runtime writes it after each commit: `StateStore`, `CommitReceipt`), and
 * queries read the store itself, never a batch in flight nor the state cache,
 * so a write whose transaction has not committed is never an answer.
 *
 * A key belongs to one partition (the producer's default partitioner over its
 * text, or the request's `partition`): answered when that partition's task is
 * active here, `NotHere` when the partition is not assigned here, `NotReady`
 * while it restores (or its store cannot be read: the task is moving).
 *
 * @internal
 */
import { Effect } from "effect"
import * as QueryRoutes from "../QueryRoutes.ts"
import type { StateStore } from "../StateStore.ts"
import { compare, namespace, namespaceEnd, prefixEnd } from "../stores/keys.ts"
import { partitionOf } from "./partitioner.ts"
import { BadRequest, NotHere, NotReady, Unknown } from "./QueryError.ts"
import type { QueryError } from "./QueryError.ts"
import type { Bounds, Query } from "./request.ts"

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

/** A key's value, or that it has none. */
const found = (text: string | undefined) =>
  text === undefined ? { found: false, value: null } : { found: true, value: jsonOf(text) }

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

/** A read of a store that is closed under it (its task torn down meanwhile) is a retry, never an answer. */
const reading = <A, E>(partition: number, read: Effect.Effect<A, E>): Effect.Effect<A, NotReady> =>
  Effect.mapError(read, () => new NotReady({ partition, reason: "unavailable", retryAfterMillis }))

const keyValueStore = (source: Source, name: string): Effect.Effect<string, Unknown> => {
  if (source.keyValueStores.includes(name)) return Effect.succeed(name)
  const kind = source.otherStores.get(name)
  return Effect.fail(
    new Unknown({
      what: "store",
      name,
      known: source.keyValueStores,
      detail: kind === undefined ? undefined : `a ${kind}: only KeyValueStores are queried so far`
    })
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
export const answer = (source: Source, query: Query): Effect.Effect<Record<string, unknown>, QueryError> =>
  Effect.gen(function*() {
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
        const store = yield* storeOf(source, partition)
        const text = yield* reading(partition, store.get(query.key))
        return { transformer: source.transformer, key: query.key, partition, ...found(text) }
      }
      case "StoreKey": {
        const name = yield* keyValueStore(source, query.store)
        const partition = yield* partitionFor(source, query.key, query.partition)
        const store = yield* storeOf(source, partition)
        const text = yield* reading(partition, store.get(namespace(name) + query.key))
        return { store: name, key: query.key, partition, ...found(text) }
      }
      case "StoreScan": {
        const name = yield* keyValueStore(source, query.store)
        const partitions = query.partition === undefined
          ? source.assigned()
          : [yield* partitionFor(source, "", query.partition)]
        // Every partition is ready before any is read: never a page missing a restoring partition's entries.
        const stores = yield* Effect.forEach(
          partitions,
          (partition) => Effect.map(storeOf(source, partition), (store) => [partition, store] as const)
        )
        const bounds = { ...storeBounds(name, query.bounds, query.after), limit: query.limit }
        const base = namespace(name).length
        const entries: Array<{ readonly key: string; readonly value: unknown; readonly partition: number }> = []
        for (const [partition, store] of stores) {
          for (const [key, text] of yield* reading(partition, store.range(bounds))) {
            entries.push({ key: key.slice(base), value: jsonOf(text), partition })
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
