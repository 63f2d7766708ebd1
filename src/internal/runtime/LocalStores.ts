/**
 * The local stores of a runner, as its group subscription announces them:
 * for each partition whose store this instance keeps on disk, the changelog
 * offset the store reflects (its next offset to read). The leader's assignor
 * prefers giving a partition to the member whose copy is the most caught up
 * (`kafka/assignor.ts`).
 *
 * kafkajs asks for the subscription synchronously at each join, so this is
 * an in-process registry that the holders of stores update as they go:
 * running tasks (after their restore and each commit), standbys (after each
 * batch they apply), the closed stores found on disk at start (`scan`), and
 * the cleanup that deletes a store (`remove`).
 *
 * @internal
 */
import { Effect } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as StateStore from "../stores/StateStore.ts"

export interface LocalStores {
  /** The offsets to announce now, by partition. */
  readonly announced: () => ReadonlyMap<number, number>
  /** The store of `partition` reflects its changelog up to `offset` (exclusive). */
  readonly set: (partition: number, offset: number) => void
  /** The store of `partition` is gone, or no longer trusted (a full restore cleared it). */
  readonly remove: (partition: number) => void
}

/** An empty registry. */
export const make = (): LocalStores => {
  const offsets = new Map<number, number>()
  return {
    announced: () => new Map(offsets),
    set: (partition, offset) => {
      offsets.set(partition, offset)
    },
    remove: (partition) => {
      offsets.delete(partition)
    }
  }
}

/** A kept store's folder: the partition's number alone (not a run store, not a temporary folder). */
const keptStore = /^\d+$/

/**
 * Reads once the checkpoint of every kept store under `storeDir` (closed, on
 * disk) into `stores`: opened and closed again; a store another process
 * holds open is skipped (it is not this instance's to offer), and so is one
 * whose checkpoint is missing, unreadable or of another changelog.
 */
export const scan = (storeDir: string, changelog: string, stores: LocalStores): Effect.Effect<void> =>
  Effect.gen(function*() {
    const entries = yield* Effect.promise(() => fs.readdir(storeDir).catch((): Array<string> => []))
    for (const entry of entries.sort()) {
      if (!keptStore.test(entry)) continue
      const partition = Number(entry)
      const folder = path.join(storeDir, entry)
      const checkpoint = yield* Effect.scoped(Effect.flatMap(StateStore.open(folder), (store) => store.checkpoint)).pipe(
        Effect.catchAll((error) =>
          Effect.as(
            StateStore.isLocked(error)
              ? Effect.logDebug(`kept store ${folder} is open in another process: not announced`)
              : Effect.logWarning(`kept store ${folder} could not be read, not announced: ${error.message}`),
            "unreadable" as const
          )
        )
      )
      if (typeof checkpoint === "object" && checkpoint.topic === changelog && checkpoint.partition === partition) {
        stores.set(partition, checkpoint.offset)
      }
    }
  })
