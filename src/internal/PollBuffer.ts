/**
 * The fetched partition batches waiting to be processed, and where each
 * input partition is expected to continue.
 *
 * A task's partitions start at their committed offsets; each accepted batch
 * moves the expectation to the batch's end. A batch that does not start
 * where its partition is expected to continue is never processed: it was
 * fetched before a seek (stale), or the client skipped records (retention
 * deleted them: an `OffsetOutOfRange` the runner must report, never a skip).
 *
 * @internal
 */
import type { PartitionOffset } from "../TopicPartition.ts"
import type { Slice } from "./batch.ts"
import type { BatchOutcome, PartitionBatch } from "./kafka/consumer.ts"

/** A partition batch being consumed across polls. */
export interface Cursor {
  readonly batch: PartitionBatch
  index: number
}

/** One cursor's records in a poll: `[cursor.index, end)`. */
export interface PollSlice {
  readonly cursor: Cursor
  readonly end: number
}

/** A poll slice's records and the offset to commit once they are all processed. */
export const records = (slice: PollSlice): Slice => {
  const { cursor, end } = slice
  const batch = cursor.batch
  return {
    topic: batch.topic,
    partition: batch.partition,
    records: batch.records.slice(cursor.index, end),
    endOffset: end >= batch.records.length ? batch.nextOffset : (batch.records[end]?.offset ?? batch.nextOffset)
  }
}

/** Why a batch was accepted or not. */
export type Arrival =
  | { readonly _tag: "Accepted" }
  | { readonly _tag: "Stale" }
  | { readonly _tag: "Gap"; readonly expected: number; readonly fetched: number }

const keyOf = (topic: string, partition: number) => `${topic}\u0000${partition}`

export interface PollBuffer {
  /** The task of `partition` starts reading its inputs at these offsets. */
  readonly expect: (offsets: ReadonlyArray<PartitionOffset>) => void
  /** Checks where `batch` starts and buffers it if it continues its partition. */
  readonly offer: (batch: PartitionBatch) => Arrival
  /** The client moved past filtered records (aborted or control records only). */
  readonly filtered: (topic: string, partition: number, nextOffset: number) => void
  readonly isEmpty: () => boolean
  /** At most `max` buffered records, fairly across partitions. */
  readonly take: (max: number) => ReadonlyArray<PollSlice>
  /** Completes and removes the fully processed batches. */
  readonly completeProcessed: () => void
  /** Drops the batches of `partition` (its task stopped) and forgets where it was. */
  readonly dropPartition: (partition: number, outcome: BatchOutcome) => void
  /** Drops every batch and expectation (every task stopped). */
  readonly dropAll: (outcome: BatchOutcome) => void
}

export const make = (): PollBuffer => {
  let cursors: Array<Cursor> = []
  const expected = new Map<string, number>()
  return {
    expect: (offsets) => {
      for (const o of offsets) expected.set(keyOf(o.topic, o.partition), o.offset)
    },
    offer: (batch) => {
      const key = keyOf(batch.topic, batch.partition)
      const next = expected.get(key)
      if (next === undefined || batch.isStale()) return { _tag: "Stale" }
      if (batch.fetchedOffset !== next) return { _tag: "Gap", expected: next, fetched: batch.fetchedOffset }
      expected.set(key, Math.max(next, batch.nextOffset))
      cursors.push({ batch, index: 0 })
      return { _tag: "Accepted" }
    },
    filtered: (topic, partition, nextOffset) => {
      const key = keyOf(topic, partition)
      const next = expected.get(key)
      if (next !== undefined) expected.set(key, Math.max(next, nextOffset))
    },
    isEmpty: () => cursors.length === 0,
    take: (max) => {
      const slices: Array<{ cursor: Cursor; end: number }> = cursors.map((cursor) => ({ cursor, end: cursor.index }))
      let remaining = max
      let progressed = true
      while (remaining > 0 && progressed) {
        progressed = false
        const share = Math.max(1, Math.floor(remaining / Math.max(1, slices.length)))
        for (const slice of slices) {
          const available = slice.cursor.batch.records.length - slice.end
          const take = Math.min(available, share, remaining)
          if (take > 0) {
            slice.end += take
            remaining -= take
            progressed = true
          }
        }
      }
      return slices.filter((s) => s.end > s.cursor.index)
    },
    completeProcessed: () => {
      cursors = cursors.filter((cursor) => {
        if (cursor.index < cursor.batch.records.length) return true
        cursor.batch.complete("Committed")
        return false
      })
    },
    dropPartition: (partition, outcome) => {
      cursors = cursors.filter((cursor) => {
        if (cursor.batch.partition !== partition) return true
        cursor.batch.complete(outcome)
        return false
      })
      for (const key of [...expected.keys()]) {
        if (key.endsWith(`\u0000${partition}`)) expected.delete(key)
      }
    },
    dropAll: (outcome) => {
      for (const cursor of cursors) cursor.batch.complete(outcome)
      cursors = []
      expected.clear()
    }
  }
}
