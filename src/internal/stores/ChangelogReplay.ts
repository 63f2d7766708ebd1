/**
 * How a store catches up from its changelog, shared by a task's restore
 * (`Task.ts`) and a standby's tailing (`Standbys.ts`): where to start from
 * the store's checkpoint, whether the changelog holds the store's last
 * commit, and how changelog records become store writes.
 *
 * @internal
 */
import type { Effect } from "effect"
import type { StateStoreError } from "../../SkeinError.ts"
import type { ChangelogRecord } from "../kafka/changelogReader.ts"
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

/**
 * A digest of a commit's changelog records (keys and values, in order):
 * 32-bit FNV-1a over their UTF-16 code units, as 8 hex digits.
 */
export const digest = (entries: Iterable<{ readonly key: string; readonly value: string | null }>): string => {
  let hash = 0x811c9dc5
  const mix = (text: string) => {
    for (let i = 0; i < text.length; i++) {
      hash ^= text.charCodeAt(i)
      hash = Math.imul(hash, 0x01000193)
    }
  }
  for (const { key, value } of entries) {
    mix(key)
    mix(value === null ? "\u0000\u0001" : `\u0000${value}`)
    mix("\u0000")
  }
  return (hash >>> 0).toString(16).padStart(8, "0")
}

/** Whether the changelog holds a store's last commit: not known yet, it does, or it does not. */
export type LastCommitFound = "pending" | "held" | "lost"

/**
 * Checks, from the changelog records read on from a store's checkpoint, that
 * the changelog holds the commit that wrote the store last (its last batch:
 * `lastCommit.records` committed records from the checkpoint's offset, with
 * its digest). A client can see a commit succeed that the brokers then lose
 * (test/chaos/FINDINGS.md #5, #6); a store that took it holds state no
 * committed record backs, and is not kept. `undefined` when the checkpoint
 * names no commit (a restore or a standby wrote it: only committed records).
 */
export interface LastCommitCheck {
  /** The offset the check needs the changelog to reach (exclusive). */
  readonly until: number
  /** Feeds records in offset order, and the position after them. */
  readonly feed: (records: ReadonlyArray<ChangelogRecord>, next: number) => LastCommitFound
  /** The reading ended at `end`: the verdict on what was fed. */
  readonly end: (end: number) => "held" | "lost"
  /** What the changelog should hold, for messages. */
  readonly describe: string
}

export const checkLastCommit = (checkpoint: StateStore.Checkpoint): LastCommitCheck | undefined => {
  const last = checkpoint.lastCommit
  if (last === undefined) return undefined
  const from = checkpoint.offset
  const until = from + last.records
  const found: Array<{ key: string; value: string | null }> = []
  let verdict: LastCommitFound = "pending"
  const decide = (): "held" | "lost" =>
    found.length === last.records && digest(found) === last.digest ? "held" : "lost"
  return {
    until,
    describe: `${last.records} records at offset ${from}`,
    feed: (records, next) => {
      if (verdict !== "pending") return verdict
      for (const record of records) {
        if (record.offset < from) continue
        if (record.offset >= until) {
          verdict = decide()
          return verdict
        }
        found.push({ key: record.key?.toString("utf8") ?? "", value: record.value?.toString("utf8") ?? null })
      }
      if (next >= until) verdict = decide()
      return verdict
    },
    end: (end) => {
      if (verdict === "pending") verdict = end < until ? "lost" : decide()
      return verdict
    }
  }
}

/** Why a store is not kept when the changelog does not hold its last commit. */
export const lostReason = (check: LastCommitCheck): string =>
  `the changelog does not hold the store's last commit (${check.describe}): a commit the task saw succeed ` +
  `was lost or aborted by the brokers`
