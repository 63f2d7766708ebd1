/**
 * Deletes kept stores nobody has used for `stateCleanupDelay` (Kafka Streams'
 * `state.cleanup.delay.ms`): the stores of partitions this instance no longer
 * runs would otherwise stay on disk forever.
 *
 * A sweep looks at every folder of a partition under a runner's store
 * folder: its kept store `<p>`, a durable workflow's run store `<p>.runs`,
 * and the temporary folders (`<p>.<uuid>.tmp`, `<p>.runs.<uuid>.tmp`) a
 * killed process left behind. It deletes one when its partition is not in
 * use by this instance, its last use (the folder's modification time:
 * LevelDB changes it at open, the store's close sets it) is older than the
 * delay, and no other process holds it open (LevelDB's lock).
 *
 * A runner sweeps before its first task starts (`atStart`), then every
 * `stateCleanupDelay` while it runs (`whileRunning`, from its task manager,
 * sparing the partitions it is assigned or has a task of).
 *
 * @internal
 */
import { Duration, Effect } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as StateStore from "./StateStore.ts"

/** A store folder of partition `$1`: its kept store, its run store (`.runs`), or a temporary one of either. */
const storeFolder = /^(\d+)(\.runs)?(\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp)?$/

/** One folder a sweep deleted. */
export interface Deleted {
  readonly partition: number
  /** The folder's name under the store folder (`3`, `3.runs`, `3.<uuid>.tmp`). */
  readonly folder: string
}

const describeFolder = (match: RegExpExecArray): string =>
  `${match[3] === undefined ? "" : "temporary "}${match[2] === undefined ? "kept store" : "run store"}`

/**
 * Deletes the store folders under `storeDir` unused for `delay` whose
 * partition is not `inUse`; logs each with `why`. Returns the folders deleted.
 */
const sweep = (
  storeDir: string,
  delay: Duration.Duration,
  inUse: (partition: number) => boolean,
  why: string
): Effect.Effect<ReadonlyArray<Deleted>> =>
  Effect.gen(function*() {
    const entries = yield* Effect.promise(() => fs.readdir(storeDir).catch((): Array<string> => []))
    const deleted: Array<Deleted> = []
    for (const entry of entries.sort()) {
      const match = storeFolder.exec(entry)
      if (match === null) continue
      const partition = Number(match[1])
      if (inUse(partition)) continue
      const folder = path.join(storeDir, entry)
      const changed = yield* Effect.promise(() => fs.stat(folder).then((s) => s.mtimeMs, () => undefined))
      if (changed === undefined || Date.now() - changed < Duration.toMillis(delay)) continue
      // Opened and closed first: LevelDB's lock tells whether another process uses it.
      const free = yield* Effect.scoped(StateStore.open(folder)).pipe(
        Effect.as(true),
        Effect.catchAll((error) =>
          Effect.as(
            Effect.logWarning(`${describeFolder(match)} ${folder} not deleted: ${error.message}`),
            false
          )
        )
      )
      if (!free) continue
      yield* StateStore.remove(folder)
      deleted.push({ partition, folder: entry })
      yield* Effect.logInfo(`deleted the ${describeFolder(match)} of partition ${partition} (${folder}): ${why}`)
    }
    yield* Effect.logDebug(`swept the stores under ${storeDir}: ${deleted.length} deleted`)
    return deleted
  })

/** At a runner's start, before any task: deletes every store folder under `storeDir` unused for `delay`. */
export const atStart = (storeDir: string, delay: Duration.Duration): Effect.Effect<ReadonlyArray<Deleted>> =>
  sweep(storeDir, delay, () => false, `unused for more than ${Duration.format(delay)} (stateCleanupDelay)`)

/**
 * While a runner runs: deletes the store folders unused for `delay` of the
 * partitions not `inUse` (assigned to this instance, or with a task starting
 * or running). The caller runs it where no task starts or stops meanwhile.
 */
export const whileRunning = (
  storeDir: string,
  delay: Duration.Duration,
  inUse: (partition: number) => boolean
): Effect.Effect<ReadonlyArray<Deleted>> =>
  sweep(
    storeDir,
    delay,
    inUse,
    `the partition is not assigned to this instance and the store was unused for more than ${Duration.format(delay)} ` +
      "(stateCleanupDelay)"
  )
