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
import type { PartitionOffset } from "../../TopicPartition.ts"
import type { Slice } from "./batch.ts"
import type { BatchOutcome, FetchedRecord, PartitionBatch } from "../kafka/consumer.ts"

/** A partition batch being consumed across polls. */
export interface Cursor {
  readonly batch: PartitionBatch
  index: number
}

/** One buffered batch's part of a slice: its records `[cursor.index, end)`. */
export interface SlicePart {
  readonly cursor: Cursor
  readonly end: number
}

/**
 * One topic-partition's records in a task's batch: consecutive buffered
 * batches of it, in offset order (one slice per topic-partition, so the
 * batch's cut and its committed offset are one per partition).
 */
export interface PollSlice {
  readonly parts: ReadonlyArray<SlicePart>
}

/** How many records a slice holds. */
export const size = (slice: PollSlice): number => slice.parts.reduce((n, part) => n + part.end - part.cursor.index, 0)

/** A slice's records and the offset to commit once they are all processed. */
export const records = (slice: PollSlice): Slice => {
  const last = slice.parts[slice.parts.length - 1]!
  const batch = last.cursor.batch
  const all: Array<FetchedRecord> = []
  for (const { cursor, end } of slice.parts) {
    for (let i = cursor.index; i < end; i++) all.push(cursor.batch.records[i]!)
  }
  return {
    topic: batch.topic,
    partition: batch.partition,
    records: all,
    endOffset: last.end >= batch.records.length ? batch.nextOffset : (batch.records[last.end]?.offset ?? batch.nextOffset)
  }
}

/** Moves a slice's cursors past its first `kept` records, in order. */
export const advance = (slice: PollSlice, kept: number): void => {
  let remaining = kept
  for (const { cursor, end } of slice.parts) {
    const step = Math.min(remaining, end - cursor.index)
    cursor.index += step
    remaining -= step
    if (remaining === 0) return
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
  /** The partitions (task numbers) with records not yet taken. */
  readonly waiting: () => ReadonlySet<number>
  /** Records buffered and not yet processed, of one input topic-partition. */
  readonly buffered: (topic: string, partition: number) => number
  /** Where an input topic-partition continues (its next fetch's offset), if its task reads it. */
  readonly position: (topic: string, partition: number) => number | undefined
  /** At most `max` buffered records, fairly across partitions. */
  readonly take: (max: number) => ReadonlyArray<PollSlice>
  /** At most `max` buffered records of task `partition`, fairly across its input topics. */
  readonly takeFor: (partition: number, max: number) => ReadonlyArray<PollSlice>
  /** Completes and removes the fully processed batches. */
  readonly completeProcessed: () => void
  /** Drops the batches of `partition` (its task stopped) and forgets where it was. */
  readonly dropPartition: (partition: number, outcome: BatchOutcome) => void
  /** Drops every batch and expectation (every task stopped). */
  readonly dropAll: (outcome: BatchOutcome) => void
}

/**
 * At most `max` records of `cursors`, an equal share of each topic-partition
 * in turn, from where each is: a topic-partition's records come from its
 * buffered batches in offset order, one slice per topic-partition.
 */
const fairly = (cursors: ReadonlyArray<Cursor>, max: number): ReadonlyArray<PollSlice> => {
  const byPartition = new Map<string, Array<Cursor>>()
  for (const cursor of cursors) {
    if (cursor.index >= cursor.batch.records.length) continue
    const key = keyOf(cursor.batch.topic, cursor.batch.partition)
    const list = byPartition.get(key)
    if (list === undefined) byPartition.set(key, [cursor])
    else list.push(cursor)
  }
  const slices = [...byPartition.values()].map((list) => ({ list, parts: [] as Array<{ cursor: Cursor; end: number }> }))
  /** Takes up to `n` more records of a topic-partition, continuing into its next batch; returns how many. */
  const takeFrom = (slice: (typeof slices)[number], n: number): number => {
    let taken = 0
    while (taken < n) {
      const part = slice.parts[slice.parts.length - 1]
      if (part !== undefined && part.end < part.cursor.batch.records.length) {
        const step = Math.min(n - taken, part.cursor.batch.records.length - part.end)
        part.end += step
        taken += step
        continue
      }
      const next = slice.list[slice.parts.length]
      if (next === undefined) break
      slice.parts.push({ cursor: next, end: next.index })
    }
    return taken
  }
  let remaining = max
  let progressed = true
  while (remaining > 0 && progressed) {
    progressed = false
    const share = Math.max(1, Math.floor(remaining / Math.max(1, slices.length)))
    for (const slice of slices) {
      const taken = takeFrom(slice, Math.min(share, remaining))
      if (taken > 0) {
        remaining -= taken
        progressed = true
      }
    }
  }
  return slices
    .map((slice) => ({ parts: slice.parts.filter((part) => part.end > part.cursor.index) }))
    .filter((slice) => slice.parts.length > 0)
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
    waiting: () => {
      const partitions = new Set<number>()
      for (const cursor of cursors) if (cursor.index < cursor.batch.records.length) partitions.add(cursor.batch.partition)
      return partitions
    },
    buffered: (topic, partition) => {
      let n = 0
      for (const cursor of cursors) {
        if (cursor.batch.partition === partition && cursor.batch.topic === topic) n += cursor.batch.records.length - cursor.index
      }
      return n
    },
    position: (topic, partition) => expected.get(keyOf(topic, partition)),
    take: (max) => fairly(cursors, max),
    takeFor: (partition, max) => fairly(cursors.filter((cursor) => cursor.batch.partition === partition), max),
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
