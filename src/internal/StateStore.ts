/**
 * A task's local state store: LevelDB through classic-level. The only module
 * that imports classic-level.
 *
 * A store holds only committed state: the runtime writes a batch's final
 * values after its transaction commits, so an aborted transaction never
 * reaches the store. Stores never outlive their task: closing one deletes it,
 * and a new task restores from the changelog.
 *
 * @internal
 */
import { ClassicLevel } from "classic-level"
import { Effect } from "effect"
import type { Scope } from "effect"
import * as fs from "node:fs/promises"
import { StateStoreError } from "../SkeinError.ts"

/** One write: a value (encoded text) or a delete. */
export interface StoreWrite {
  readonly key: string
  readonly value: string | null
}

export interface StateStore {
  readonly path: string
  readonly get: (key: string) => Effect.Effect<string | undefined, StateStoreError>
  /** Reads several keys in one call (`undefined` for a missing key). */
  readonly getMany: (keys: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string | undefined>, StateStoreError>
  /** Applies writes atomically (one LevelDB batch). */
  readonly write: (writes: ReadonlyArray<StoreWrite>) => Effect.Effect<void, StateStoreError>
  /** Number of keys, for tests and metrics. */
  readonly count: Effect.Effect<number, StateStoreError>
}

const attempt = <A>(operation: string, path: string, f: () => Promise<A>) =>
  Effect.tryPromise({ try: f, catch: (cause) => new StateStoreError({ operation, path, cause }) })

/** Opens a fresh, empty store at `path`; closes and deletes it when the scope closes. */
export const open = (path: string): Effect.Effect<StateStore, StateStoreError, Scope.Scope> =>
  Effect.acquireRelease(
    attempt("open", path, async () => {
      await fs.rm(path, { recursive: true, force: true })
      await fs.mkdir(path, { recursive: true })
      const db = new ClassicLevel<string, string>(path, { keyEncoding: "utf8", valueEncoding: "utf8" })
      await db.open()
      return db
    }),
    (db) =>
      Effect.promise(async () => {
        await db.close().catch(() => undefined)
        await fs.rm(path, { recursive: true, force: true }).catch(() => undefined)
      })
  ).pipe(Effect.map((db): StateStore => ({
    path,
    get: (key) => attempt("get", path, () => db.get(key)),
    getMany: (keys) => attempt("getMany", path, () => db.getMany([...keys])),
    write: (writes) =>
      writes.length === 0 ? Effect.void : attempt("write", path, () =>
        db.batch(writes.map((w) =>
          w.value === null
            ? { type: "del" as const, key: w.key }
            : { type: "put" as const, key: w.key, value: w.value }
        ))),
    count: attempt("count", path, async () => {
      let n = 0
      for await (const _ of db.keys()) n++
      return n
    })
  })))

/** True when a store directory exists at `path` (for tests of stateless transformers). */
export const exists = (path: string): Effect.Effect<boolean> =>
  Effect.promise(() => fs.stat(path).then(() => true, () => false))
