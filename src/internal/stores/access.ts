/**
 * How a transform reaches its transformer's named stores: a batch's view of
 * the task's store (`Overlay`: the committed store with the writes of the
 * batch's finished units on top), and one unit's view on top of that
 * (`Unit`: a record's or a fired timer's transform attempt), handed to the
 * transform through the `current` FiberRef.
 *
 * A unit's writes stay in the unit until it finishes: a failed attempt (a
 * retry, a skipped or dead-lettered record) leaves nothing behind. A
 * finished unit's writes go to the batch's overlay, so the batch's later
 * units read them (read-your-writes), and with the unit into the batch's cut:
 * they reach the changelog (one record per key per transaction) and the
 * store only when the transaction commits. A batch that aborts is dropped
 * with its overlay, so no read ever sees an aborted transaction's writes.
 *
 * @internal
 */
import { Effect, FiberRef, Option } from "effect"
import type { StateStoreError } from "../../SkeinError.ts"
import type { Range, StateStore, StoreWrite } from "./StateStore.ts"
import { compare } from "./keys.ts"

/** The kinds of named store. */
export type Kind = "KeyValueStore" | "WindowStore" | "SessionStore"

/** A named store as a transformer declares it: its name, kind and what its Schemas encode. */
export interface Declaration {
  readonly name: string
  readonly kind: Kind
  /** The stored form of its keys and values, as text: a change of it fails the task's start (`schemas.ts`). */
  readonly schema: string
}

/** Where a unit comes from, for errors that name it. */
export interface Source {
  readonly topic: string
  readonly partition: number
  readonly offset: number
}

/** What a unit's transform reads and writes its stores through. */
export interface Access {
  readonly transformer: string
  readonly partition: number
  /** The task's store path, for errors. */
  readonly path: string
  readonly source: Source
  /** The declaration of store `name` by the running transformer, if it declares one. */
  readonly declared: (name: string) => Declaration | undefined
  readonly get: (key: string) => Effect.Effect<string | undefined, StateStoreError>
  /** Stages a write (`null`: a delete). */
  readonly put: (key: string, value: string | null) => Effect.Effect<void>
  /** The entries in `range` as the unit sees them, in key order. */
  readonly range: (range: Range) => Effect.Effect<ReadonlyArray<readonly [string, string]>, StateStoreError>
}

/** The running unit's access; `None` outside a transform (or `onTimer`) of a transformer with stores. */
export const current: FiberRef.FiberRef<Option.Option<Access>> = FiberRef.unsafeMake(Option.none<Access>())

const inRange = (key: string, { gte, lt, lte }: Range): boolean =>
  compare(key, gte) >= 0 && (lte === undefined ? lt === undefined || compare(key, lt) < 0 : compare(key, lte) <= 0)

/** `base` with `layer`'s writes in `range` applied: entries in key order. */
const merge = (
  base: ReadonlyArray<readonly [string, string]>,
  layer: ReadonlyMap<string, string | null>,
  range: Range
): ReadonlyArray<readonly [string, string]> => {
  let touched = false
  for (const key of layer.keys()) {
    if (inRange(key, range)) {
      touched = true
      break
    }
  }
  if (!touched) return base
  const entries = new Map(base)
  for (const [key, value] of layer) {
    if (!inRange(key, range)) continue
    if (value === null) entries.delete(key)
    else entries.set(key, value)
  }
  return [...entries].sort(([a], [b]) => compare(a, b))
}

/** One unit's view: its own writes on the batch's. */
export interface Unit extends Access {
  /** Ends the unit: its writes in order (one per key); later writes are a defect. */
  readonly close: () => ReadonlyArray<StoreWrite>
}

/** A batch's view of the task's store: the committed entries and the batch's finished units' writes. */
export class Overlay {
  private readonly writes = new Map<string, string | null>()
  private readonly byName: ReadonlyMap<string, Declaration>

  constructor(
    private readonly store: StateStore,
    declarations: ReadonlyArray<Declaration>,
    private readonly where: { readonly transformer: string; readonly partition: number }
  ) {
    this.byName = new Map(declarations.map((d) => [d.name, d]))
  }

  /** A finished unit's writes: later units of the batch read them. */
  apply(writes: ReadonlyArray<StoreWrite>): void {
    for (const write of writes) this.writes.set(write.key, write.value)
  }

  /** A new unit on top of the batch's view. */
  unit(source: Source): Unit {
    const own = new Map<string, string | null>()
    let closed = false
    const store = this.store
    const batch = this.writes
    const where = this.where
    const byName = this.byName
    const open = (what: string): Effect.Effect<void> =>
      closed
        ? Effect.dieMessage(
          `${where.transformer}: a store ${what} after its transform returned (from ${source.topic}/${source.partition}@` +
            `${source.offset}): use stores only inside the transform's own Effect, not in a fiber it left running`
        )
        : Effect.void
    return {
      transformer: where.transformer,
      partition: where.partition,
      path: store.path,
      source,
      declared: (name) => byName.get(name),
      get: (key) =>
        Effect.zipRight(
          open("read"),
          Effect.suspend(() => {
            const mine = own.get(key)
            if (mine !== undefined) return Effect.succeed(mine ?? undefined)
            const staged = batch.get(key)
            if (staged !== undefined) return Effect.succeed(staged ?? undefined)
            return store.get(key)
          })
        ),
      put: (key, value) =>
        Effect.zipRight(
          open("write"),
          Effect.sync(() => {
            // A key written again moves to the end: the unit's writes stay in write order.
            own.delete(key)
            own.set(key, value)
          })
        ),
      range: (range) =>
        Effect.zipRight(
          open("scan"),
          Effect.map(store.range(range), (committed) => merge(merge(committed, batch, range), own, range))
        ),
      close: () => {
        closed = true
        return [...own].map(([key, value]) => ({ key, value }))
      }
    }
  }
}
