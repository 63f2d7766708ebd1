/**
 * How a store catches up from its changelog, shared by a task's restore
 * (`Task.ts`) and a standby's tailing (`Standbys.ts`): where to start from
 * the store's checkpoint, and how changelog records become store writes.
 *
 * @internal
 */
import type { Effect } from "effect"
import type { StateStoreError } from "../SkeinError.ts"
import type { ChangelogRecord } from "./kafka/changelogReader.ts"
import type * as StateStore from "./StateStore.ts"

/** Where replaying starts: from the checkpoint (`tail`), or in full into an emptied store, with why. */
export type Start =
  | { readonly mode: "tail"; readonly from: number }
  | { readonly mode: "full"; readonly reason: string }

/**
 * Where to replay from: the store's checkpoint when it is of this changelog
 * partition and inside its offsets, else the earliest offset of an emptied
 * store, with the reason.
 */
export const start = (
  stored: StateStore.Checkpoint | "missing" | "unreadable",
  changelog: { readonly topic: string; readonly partition: number },
  range: { readonly low: number; readonly end: number }
): Start => {
  if (stored === "missing") return { mode: "full", reason: "no local state (no checkpoint)" }
  if (stored === "unreadable") return { mode: "full", reason: "the checkpoint is unreadable" }
  if (stored.topic !== changelog.topic || stored.partition !== changelog.partition) {
    return { mode: "full", reason: `the checkpoint is of ${stored.topic}/${stored.partition}` }
  }
  if (stored.offset < range.low) {
    return {
      mode: "full",
      reason: `the checkpoint ${stored.offset} is below the changelog's earliest offset ${range.low} (records were deleted)`
    }
  }
  if (stored.offset > range.end) {
    return {
      mode: "full",
      reason: `the checkpoint ${stored.offset} is beyond the changelog's end ${range.end} (was the changelog recreated?)`
    }
  }
  return { mode: "tail", from: stored.offset }
}

/**
 * The store writes of changelog records: a record's value, or a delete for a
 * tombstone, only the last record of each key (a batch is applied in order,
 * so the earlier ones would be overwritten within it). A changelog holds a
 * key once per commit that changed it until it is compacted, so a restore's
 * batch repeats most keys many times.
 */
export const writes = (records: ReadonlyArray<ChangelogRecord>): Array<StateStore.StoreWrite> => {
  const seen = new Set<string>()
  const out: Array<StateStore.StoreWrite> = []
  for (let i = records.length - 1; i >= 0; i--) {
    const record = records[i]!
    const key = record.key?.toString("utf8") ?? ""
    if (seen.has(key)) continue
    seen.add(key)
    out.push({ key, value: record.value?.toString("utf8") ?? null })
  }
  return out.reverse()
}

/**
 * Applies changelog records to `store` in one LevelDB batch (see `writes`),
 * with `checkpoint` in the same batch when given.
 */
export const apply = (
  store: StateStore.StateStore,
  records: ReadonlyArray<ChangelogRecord>,
  checkpoint?: StateStore.Checkpoint
): Effect.Effect<void, StateStoreError> => store.replay(writes(records), checkpoint)
