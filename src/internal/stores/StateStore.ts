/**
 * A task's local state store: LevelDB through classic-level. The only module
 * that imports classic-level.
 *
 * A store holds only committed state: the runtime writes a batch's final
 * values after its transaction commits, so an aborted transaction never
 * reaches the store. Each write carries the store's checkpoint in the same
 * LevelDB batch: a changelog offset at or below the first changelog record the
 * store does not reflect yet, so a task that opens the store again restores
 * only from there. Stores are kept on disk when their task closes; LevelDB's
 * own lock keeps a second process from opening one that is open.
 *
 * Keys: `d` + the state key for data, `m` + a name for the store's own
 * metadata (the checkpoint), so no state key can collide with it.
 *
 * @internal
 */
import { ClassicLevel } from "classic-level"
import { Effect, Either, Schema } from "effect"
import type { Scope } from "effect"
import * as fs from "node:fs/promises"
import { StateStoreError } from "../../SkeinError.ts"
import * as CommitReceipt from "../runtime/CommitReceipt.ts"

/**
 * The bounds of a range scan: from `gte`, to `lt` (exclusive) or `lte`
 * (inclusive); `limit`: at most that many entries (the first ones).
 */
export interface Range {
  readonly gte: string
  readonly lt?: string | undefined
  readonly lte?: string | undefined
  readonly limit?: number | undefined
}

/** One write: a value (encoded text) or a delete. */
export interface StoreWrite {
  readonly key: string
  readonly value: string | null
}

/**
 * Where restoring the store resumes: the changelog (topic and partition) it
 * reflects, and an offset at or below the first record of it not in the store.
 */
export interface Checkpoint {
  readonly topic: string
  readonly partition: number
  readonly offset: number
  /**
   * The commit that wrote the store last, when a commit did (not a restore):
   * its last changelog batch, at `offset`. A restart keeps the store only if
   * the changelog holds that batch (`ChangelogReplay.checkLastCommit`).
   */
  readonly lastCommit?: LastCommit
}

/** A commit's last changelog batch: its record count and their digest (`ChangelogReplay.digest`). */
export interface LastCommit {
  readonly records: number
  readonly digest: string
}

const CheckpointJson = Schema.parseJson(Schema.Struct({
  topic: Schema.String,
  partition: Schema.Int,
  offset: Schema.Int,
  lastCommit: Schema.optionalWith(Schema.Struct({ records: Schema.Int, digest: Schema.String }), { exact: true })
}))

/**
 * The store of task `P`: only a receipt of that task's commit writes it
 * (`CommitReceipt<P>`). `StateStore` alone (`P` = `never`) is a store of a
 * task the type does not name: it reads and replays, and no receipt writes
 * it; `StateStore<P>` is one, so reading code takes any task's store.
 */
export interface StateStore<P extends number = never> {
  readonly path: string
  readonly get: (key: string) => Effect.Effect<string | undefined, StateStoreError>
  /** Reads several keys in one call (`undefined` for a missing key). */
  readonly getMany: (keys: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string | undefined>, StateStoreError>
  /**
   * Applies a commit's writes atomically (one LevelDB batch), with the new
   * checkpoint when given. Requires the receipt of a commit of the store's
   * own task (spent by the write): state reaches the store only after its
   * commit, and a commit of another task writes none of it.
   */
  readonly write: (
    receipt: CommitReceipt.CommitReceipt<P>,
    writes: ReadonlyArray<StoreWrite>,
    checkpoint?: Checkpoint
  ) => Effect.Effect<void, StateStoreError>
  /**
   * Applies writes read back from the store's changelog (a restore, a
   * standby: committed records, read read_committed) atomically, with the new
   * checkpoint when given.
   */
  readonly replay: (writes: ReadonlyArray<StoreWrite>, checkpoint?: Checkpoint) => Effect.Effect<void, StateStoreError>
  /** The checkpoint last written: `"missing"` for a new (or cleared) store, `"unreadable"` when it does not decode. */
  readonly checkpoint: Effect.Effect<Checkpoint | "missing" | "unreadable", StateStoreError>
  /** Deletes every key and the checkpoint (before a full restore). */
  readonly clear: Effect.Effect<void, StateStoreError>
  /** Number of keys, for tests and metrics. */
  readonly count: Effect.Effect<number, StateStoreError>
  /** The keys that start with `prefix`, in key order. */
  readonly keys: (prefix: string) => Effect.Effect<ReadonlyArray<string>, StateStoreError>
  /** At most `limit` entries whose keys start with `prefix` and sort after `after` (when given), in key order. */
  readonly entries: (
    prefix: string,
    options: { readonly after?: string | undefined; readonly limit: number }
  ) => Effect.Effect<ReadonlyArray<readonly [string, string]>, StateStoreError>
  /** Every entry whose key lies in `range`, in key order (the UTF-8 bytes of the keys). */
  readonly range: (range: Range) => Effect.Effect<ReadonlyArray<readonly [string, string]>, StateStoreError>
}

const attempt = <A>(operation: string, path: string, f: () => Promise<A>) =>
  Effect.tryPromise({ try: f, catch: (cause) => new StateStoreError({ operation, path, cause }) })

const dataKey = (key: string): string => `d${key}`
const checkpointKey = "mcheckpoint"

/** True for LevelDB's answer to opening a store another process (or handle) holds open. */
export const isLocked = (error: StateStoreError): boolean => {
  for (let cause: unknown = error.cause; typeof cause === "object" && cause !== null; cause = Reflect.get(cause, "cause")) {
    if (Reflect.get(cause, "code") === "LEVEL_LOCKED") return true
  }
  return false
}

/**
 * Opens the store at `path`, creating it when missing and keeping what it
 * holds; closes it (kept on disk, its folder's modification time set to
 * now) when the scope closes. Fails with a
 * `StateStoreError` that `isLocked` recognises when another process has it open.
 * `partition`: the task whose commits write it (`StateStore<P>`); without
 * one, a store that only reads and replays (a standby's, a scan's).
 */
export const open = <P extends number = never>(
  path: string,
  partition?: P
): Effect.Effect<StateStore<P>, StateStoreError, Scope.Scope> =>
  Effect.acquireRelease(
    attempt("open", path, async () => {
      await fs.mkdir(path, { recursive: true })
      const db = new ClassicLevel<string, string>(path, { keyEncoding: "utf8", valueEncoding: "utf8" })
      await db.open()
      return db
    }),
    // The folder's modification time says when the store was last used (`StoreCleanup`): LevelDB
    // changes it at open (a new log file), the close sets it.
    (db) =>
      Effect.promise(async () => {
        await db.close().catch(() => undefined)
        const now = new Date()
        await fs.utimes(path, now, now).catch(() => undefined)
      })
  ).pipe(Effect.map((db): StateStore<P> => {
    // One atomic write, made as a chained batch: each operation goes to LevelDB's batch as it is
    // added, where an array of operations is read back property by property (about 3x the main
    // thread's time an operation, and a commit writes one per changed key).
    const replay: StateStore<P>["replay"] = (writes, checkpoint) =>
      writes.length === 0 && checkpoint === undefined ? Effect.void : attempt("write", path, async () => {
        const batch = db.batch()
        try {
          for (const w of writes) {
            if (w.value === null) batch.del(dataKey(w.key))
            else batch.put(dataKey(w.key), w.value)
          }
          if (checkpoint !== undefined) batch.put(checkpointKey, Schema.encodeSync(CheckpointJson)(checkpoint))
        } catch (error) {
          // Nothing was written: the batch is released, the failure is the write's.
          await batch.close()
          throw error
        }
        await batch.write()
      })
    return {
      path,
      get: (key) => attempt("get", path, () => db.get(dataKey(key))),
      getMany: (keys) => attempt("getMany", path, () => db.getMany(keys.map(dataKey))),
      write: (receipt, writes, checkpoint) =>
        Effect.suspend(() =>
          CommitReceipt.spend(receipt, partition, checkpoint) ? replay(writes, checkpoint) : CommitReceipt.missing(path, partition, receipt)
        ),
      replay,
      checkpoint: attempt("get", path, () => db.get(checkpointKey)).pipe(
        Effect.map((text) =>
          text === undefined
            ? "missing"
            : Either.getOrElse(Schema.decodeUnknownEither(CheckpointJson)(text), () => "unreadable" as const)
        )
      ),
      clear: attempt("clear", path, () => db.clear()),
      count: attempt("count", path, async () => {
        let n = 0
        for await (const _ of db.keys({ gte: "d", lt: "e" })) n++
        return n
      }),
      keys: (prefix) =>
        attempt("keys", path, async () => {
          const found: Array<string> = []
          // Every key with the prefix sorts between it and it followed by the highest code unit.
          for await (const key of db.keys({ gte: dataKey(prefix), lt: dataKey(`${prefix}\uffff`) })) found.push(key.slice(1))
          return found
        }),
      entries: (prefix, { after, limit }) =>
        attempt("entries", path, async () => {
          const found: Array<readonly [string, string]> = []
          const range = after === undefined
            ? { gte: dataKey(prefix), lt: dataKey(`${prefix}\uffff`), limit }
            : { gt: dataKey(after), lt: dataKey(`${prefix}\uffff`), limit }
          for await (const [key, value] of db.iterator(range)) found.push([key.slice(1), value])
          return found
        }),
      range: ({ gte, limit, lt, lte }) =>
        attempt("range", path, async () => {
          const found: Array<readonly [string, string]> = []
          const bounds = lte === undefined
            ? { gte: dataKey(gte), lt: lt === undefined ? "e" : dataKey(lt), limit: limit ?? -1 }
            : { gte: dataKey(gte), lte: dataKey(lte), limit: limit ?? -1 }
          for await (const [key, value] of db.iterator(bounds)) found.push([key.slice(1), value])
          return found
        })
    }
  }))

/** Deletes the store folder at `path` (it must not be open). */
export const remove = (path: string): Effect.Effect<void> =>
  Effect.promise(() => fs.rm(path, { recursive: true, force: true }).catch(() => undefined))

/** True when a store directory exists at `path` (for tests of stateless transformers). */
export const exists = (path: string): Effect.Effect<boolean> =>
  Effect.promise(() => fs.stat(path).then(() => true, () => false))
