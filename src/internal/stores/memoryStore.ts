/**
 * A task's state store in memory, for `TestDriver`: the `StateStore`
 * interface over a `Map`, with the same semantics as the LevelDB store
 * (atomic writes with their checkpoint, a delete as a `null` value, `clear`
 * removing the checkpoint too). Never fails.
 *
 * @internal
 */
import { Effect } from "effect"
import * as CommitReceipt from "../runtime/CommitReceipt.ts"
import { compare } from "./keys.ts"
import type { Checkpoint, StateStore } from "./StateStore.ts"

/** A store kept in memory for task `partition` (as `StateStore.open`); `path` only names it in errors. */
export const make = <P extends number = never>(path: string, partition?: P): StateStore<P> => {
  const data = new Map<string, string>()
  let checkpoint: Checkpoint | undefined
  const replay: StateStore<P>["replay"] = (writes, next) =>
    Effect.sync(() => {
      for (const w of writes) {
        if (w.value === null) data.delete(w.key)
        else data.set(w.key, w.value)
      }
      if (next !== undefined) checkpoint = next
    })
  return {
    path,
    get: (key) => Effect.sync(() => data.get(key)),
    getMany: (keys) => Effect.sync(() => keys.map((key) => data.get(key))),
    write: (receipt, writes, next) =>
      Effect.suspend(() =>
        CommitReceipt.spend(receipt, partition, next) ? replay(writes, next) : CommitReceipt.missing(path, partition, receipt)
      ),
    replay,
    checkpoint: Effect.sync(() => checkpoint ?? "missing"),
    clear: Effect.sync(() => {
      data.clear()
      checkpoint = undefined
    }),
    count: Effect.sync(() => data.size),
    keys: (prefix) => Effect.sync(() => [...data.keys()].filter((key) => key.startsWith(prefix)).sort()),
    entries: (prefix, { after, limit }) =>
      Effect.sync(() =>
        [...data.keys()]
          .filter((key) => key.startsWith(prefix) && (after === undefined || key > after))
          .sort()
          .slice(0, limit)
          .map((key) => [key, data.get(key) ?? ""] as const)
      ),
    // In LevelDB's order (the keys' UTF-8 bytes), as the store on disk scans.
    range: ({ gte, limit, lt, lte }) =>
      Effect.sync(() =>
        [...data.entries()]
          .filter(([key]) =>
            compare(key, gte) >= 0 && (lte === undefined ? lt === undefined || compare(key, lt) < 0 : compare(key, lte) <= 0)
          )
          .sort(([a], [b]) => compare(a, b))
          .slice(0, limit)
      )
  }
}
