/**
 * A store whose changelog is one of its task's input topics
 * (`Transformer.sourceChangelog`: a table read with `sourceChangelog`, as
 * Kafka Streams' source-topic changelog, `reuse.ktable.source.topics`). No
 * changelog topic is written: the input records are the store's changes.
 *
 * The store reflects the topic up to the task's committed offset there, not
 * to its end: the records after it are still to be processed, in order with
 * the task's other inputs. Its checkpoint names the topic and the committed
 * offset of the commit that wrote it last, so a restart compares it with the
 * committed offset, read after fencing (the source-topic form of the
 * changelog's last-commit check, `ChangelogReplay.checkLastCommit`):
 *
 * - at or below it: the store is kept, and the records from its checkpoint
 *   to the committed offset are applied (a commit whose store write never
 *   happened, a kill in between);
 * - above it: the store took a commit the brokers lost or aborted
 *   (test/chaos/FINDINGS.md #5, #6): state no committed offset backs, so it
 *   is emptied and restored in full.
 *
 * A record is applied as its processing stored it (`SourceChangelog.change`):
 * one that does not decode, has no key or an invalid timestamp changes
 * nothing, where processing dead-lettered, skipped or dropped it. (Kafka
 * Streams restores a source topic's records as they are, KAFKA-8037, so a
 * record its deserialization handler skipped is in the table after a
 * restore; Skein keeps the two the same.)
 *
 * @internal
 */
import { Either, Option } from "effect"
import type * as Topic from "../../Topic.ts"
import type * as Transformer from "../../Transformer.ts"
import type { ChangelogRecord } from "../kafka/changelogReader.ts"
import * as JsonCodec from "../codec/jsonCodec.ts"
import type * as StateStore from "./StateStore.ts"
import type { Start } from "./ChangelogReplay.ts"

/** A record of the source topic as a store write: `undefined` for one processing did not store. */
export type ToWrite = (record: ChangelogRecord) => StateStore.StoreWrite | undefined

/**
 * The store writes of `source`'s records, the state encoded as the batch
 * stores it (`JsonCodec.steps`); a state that does not store is not written,
 * as its record failed in processing.
 */
export const toWrite = <S>(codec: Topic.Codec<S>, source: Transformer.SourceChangelog<S>): ToWrite => {
  const steps = JsonCodec.steps(codec)
  return (record) => {
    const change = source.change({ key: record.key, value: record.value, timestamp: record.timestamp ?? -1 })
    if (change === undefined) return undefined
    if (Option.isNone(change.state)) return { key: change.key, value: null }
    const stored = steps.store(change.state.value)
    return Either.isLeft(stored) ? undefined : { key: change.key, value: stored.right }
  }
}

/**
 * Where restoring from the source topic starts: the store's checkpoint, when
 * it is of this topic's partition, inside its offsets and at or below the
 * task's committed offset; else in full into an emptied store, with why.
 */
export const start = (
  stored: StateStore.Checkpoint | "missing" | "unreadable",
  source: { readonly topic: string; readonly partition: number },
  low: number,
  committed: number
): Start => {
  if (stored === "missing") return { mode: "full", reason: "no local state (no checkpoint)" }
  if (stored === "unreadable") return { mode: "full", reason: "the checkpoint is unreadable" }
  if (stored.topic !== source.topic || stored.partition !== source.partition) {
    return { mode: "full", reason: `the checkpoint is of ${stored.topic}/${stored.partition}` }
  }
  if (stored.offset < low) {
    return {
      mode: "full",
      reason: `the checkpoint ${stored.offset} is below the source topic's earliest offset ${low} (records were deleted)`
    }
  }
  if (stored.offset > committed) {
    return {
      mode: "full",
      reason: `the store reflects ${source.topic} up to offset ${stored.offset}, beyond the committed offset ${committed}: ` +
        "a commit the task saw succeed was lost or aborted by the brokers"
    }
  }
  return { mode: "tail", from: stored.offset }
}

/**
 * The store writes of source records, only the last write of each key (a
 * batch is applied in order, see `ChangelogReplay.writes`).
 */
export const writes = (records: ReadonlyArray<ChangelogRecord>, toWrite: ToWrite): Array<StateStore.StoreWrite> => {
  const seen = new Set<string>()
  const out: Array<StateStore.StoreWrite> = []
  for (let i = records.length - 1; i >= 0; i--) {
    const write = toWrite(records[i]!)
    if (write === undefined || seen.has(write.key)) continue
    seen.add(write.key)
    out.push(write)
  }
  return out.reverse()
}

/**
 * The checkpoint of a commit's store write: the committed offset of the
 * source topic's partition, when the commit moved it (else the store's
 * checkpoint stays: only that topic's records change the store).
 */
export const checkpointAfter = (
  topic: string,
  partition: number,
  offsets: ReadonlyArray<{ readonly topic: string; readonly partition: number; readonly offset: number }>
): StateStore.Checkpoint | undefined => {
  const committed = offsets.find((o) => o.topic === topic && o.partition === partition)
  return committed === undefined ? undefined : { topic, partition, offset: committed.offset }
}
