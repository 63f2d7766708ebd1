/**
 * How many bytes each fetch asks for, so that it brings about the same number
 * of records whatever their size.
 *
 * kafkajs (as the Java consumer) asks for fixed byte sizes: 1 MiB a partition,
 * 10 MiB a fetch. A task's batch is what one fetch brought, so a fixed size in
 * bytes makes a batch of ~8,300 records of 100 bytes but ~2,450 of 400 bytes:
 * larger records made more, smaller transactions, and more changelog writes a
 * record (a batch writes each changed key once). Sized here from the bytes a
 * record of the topic took so far, a partition's fetch brings half its task's
 * share of `maxPollRecords` (what the fixed 1 MiB brings at ~125-byte
 * records), and a fetch at most `maxPollRecords` records' worth. Never less
 * than kafkajs's sizes, never more than 8 MiB a partition and the Java
 * consumer's 50 MiB a fetch (`fetch.max.bytes`).
 *
 * A record's size is its key, value and headers and a record's framing as
 * fetched, uncompressed: a compressed topic's fetch brings more records than
 * the target, up to the same bounds.
 *
 * @internal
 */

/** kafkajs's (and the Java consumer's) fetch size of a partition: the least asked for. */
export const minPartitionBytes = 1024 * 1024
/** The most a partition's fetch asks for. */
export const maxPartitionBytes = 8 * 1024 * 1024
/** kafkajs's fetch size: the least a fetch asks for. */
export const minFetchBytes = 10 * 1024 * 1024
/** The Java consumer's `fetch.max.bytes`: the most a fetch asks for. */
export const maxFetchBytes = 50 * 1024 * 1024
/** A record's framing in a record batch (length, attributes, deltas, lengths; the batch header shared out), about. */
export const recordOverhead = 12

/** A fetched record's parts whose size counts. */
export interface Sized {
  readonly key: Buffer | null
  readonly value: Buffer | null
  /** The key's bytes without a view of them (Skein's patch of kafkajs's fetched messages): read before `key`. */
  readonly keySize?: number
  /** The value's bytes without a view of them, as `keySize`. */
  readonly valueSize?: number
  readonly headers?: Readonly<Record<string, unknown>> | undefined
}

/** The sizes kafkajs's fetch reads (Skein's patch of `consumerGroup.js`), and what they are computed from. */
export interface FetchSizes {
  /** The bytes to ask for from a partition of `topic`. */
  readonly partition: (topic: string, partition: number) => number
  /** The bytes to ask for in one fetch. */
  readonly total: () => number
  /** A fetched batch of `topic`: its records' sizes update the topic's bytes a record. */
  readonly observe: (topic: string, records: ReadonlyArray<Sized>) => void
  /** The tasks this member was assigned (distinct partitions of its inputs): each gets an equal share. */
  readonly assigned: (tasks: number) => void
}

const headerSize = (value: unknown): number =>
  value === null || value === undefined
    ? 0
    : typeof value === "string"
    ? value.length
    : Buffer.isBuffer(value)
    ? value.length
    : Array.isArray(value)
    ? value.reduce((n: number, v) => n + headerSize(v), 0)
    : 0

/** The bytes a record takes in a fetch, uncompressed. */
export const recordSize = (record: Sized): number => {
  let size = recordOverhead + (record.keySize ?? record.key?.length ?? 0) + (record.valueSize ?? record.value?.length ?? 0)
  const headers = record.headers
  if (headers !== undefined) {
    for (const name in headers) size += name.length + 2 + headerSize(headers[name])
  }
  return size
}

const clamp = (n: number, least: number, most: number): number => Math.min(most, Math.max(least, Math.ceil(n)))

/** Fetch sizes for a member that processes at most `maxPollRecords` records at once. */
export const make = (maxPollRecords: number): FetchSizes => {
  let tasks = 1
  /** Bytes a record, by topic: an average over its batches, the latest weighing half. */
  const perRecord = new Map<string, number>()
  let largest = 0
  return {
    partition: (topic) => {
      const bytes = perRecord.get(topic)
      if (bytes === undefined) return minPartitionBytes
      return clamp((maxPollRecords / tasks / 2) * bytes, minPartitionBytes, maxPartitionBytes)
    },
    total: () => largest === 0 ? minFetchBytes : clamp(maxPollRecords * largest, minFetchBytes, maxFetchBytes),
    observe: (topic, records) => {
      if (records.length === 0) return
      let bytes = 0
      for (const record of records) bytes += recordSize(record)
      const latest = bytes / records.length
      const before = perRecord.get(topic)
      perRecord.set(topic, before === undefined ? latest : (before + latest) / 2)
      largest = 0
      for (const size of perRecord.values()) largest = Math.max(largest, size)
    },
    assigned: (count) => {
      tasks = Math.max(1, count)
    }
  }
}
