/**
 * Deletes kept stores nobody has used for `stateCleanupDelay` (Kafka Streams'
 * `state.cleanup.delay.ms`): the stores of partitions this instance no longer
 * runs would otherwise stay on disk forever.
 *
 * Runs when a runner starts, before any of its tasks: a store folder whose
 * last change (LevelDB writes a new log file at every open) is older than the
 * delay is deleted, unless another process holds it open. A partition
 * revoked from a long-running instance keeps its store until the next start.
 *
 * @internal
 */
import { Duration, Effect } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as StateStore from "./StateStore.ts"

/** A kept store's folder: its partition number (temporary folders end in `.tmp` and are their task's). */
const keptStore = /^\d+$/

/** Deletes the stores under `storeDir` unused for `delay`; returns the partitions deleted. */
export const run = (storeDir: string, delay: Duration.Duration): Effect.Effect<ReadonlyArray<number>> =>
  Effect.gen(function*() {
    const entries = yield* Effect.promise(() => fs.readdir(storeDir).catch((): Array<string> => []))
    const deleted: Array<number> = []
    for (const entry of entries.filter((name) => keptStore.test(name))) {
      const folder = path.join(storeDir, entry)
      const changed = yield* Effect.promise(() => fs.stat(folder).then((s) => s.mtimeMs, () => undefined))
      if (changed === undefined || Date.now() - changed < Duration.toMillis(delay)) continue
      // Opened and closed first: LevelDB's lock tells whether another process uses it.
      const free = yield* Effect.scoped(StateStore.open(folder)).pipe(
        Effect.as(true),
        Effect.catchAll((error) =>
          Effect.as(
            Effect.logWarning(`kept store ${folder} not deleted: ${error.message}`),
            false
          )
        )
      )
      if (!free) continue
      yield* StateStore.remove(folder)
      deleted.push(Number(entry))
      yield* Effect.logInfo(
        `deleted the kept store of partition ${entry} (${folder}): unused for more than ${Duration.format(delay)} ` +
          "(stateCleanupDelay)"
      )
    }
    return deleted
  })
