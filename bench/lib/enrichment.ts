/**
 * The enrichment job of the benchmark (bench/README.md, "Enrichment job"): a stream joined to a
 * table on its key. Its inputs, the joined result each stream record must produce, and the check
 * of a contender's output against them.
 *
 * The job: a left join of the stream with the table read from a compacted topic; each stream
 * record's output keeps its key, and its value is the stream value's id (the text before its
 * first `;`), `|`, and the table's value for the key (`-` when the table has none).
 *
 * The table: `tableKeys` keys (`key-000000` ...), each written once (`c-000123/r-07/v1`), then an
 * update of every 10th key (`.../v2`, the value the join must see) and a tombstone of every
 * 1,000th (deleted: the join sees none, `-`). So the table's topic holds tableKeys × 1.101
 * records and the table `tableKeys` − tableKeys/1,000 live keys.
 *
 * The stream: `records` records, record i keyed by the seeded uniform sequence over the table's
 * keys (the count job's `keySequence` with `keys` = tableKeys), value `o-0000123;` (i) + filler up
 * to `valueBytes`. Both topics have the same partition count and are written by the same kafkajs
 * producer (the Java-compatible murmur2 partitioner), so a key's table and stream records are on
 * the same partition number: co-partitioned.
 *
 * Record i's expected output: key `key-<seq[i]>`, value `o-<i>|<the key's final table value>`.
 */
import { createHash } from "node:crypto"
import type { Admin, Consumer, Kafka, Message } from "kafkajs"
import { inputProducer, keyName, type Workload } from "./kafka.ts"
import { mulberry32, sleep } from "./stats.ts"

export interface EnrichmentWorkload extends Workload {
  /** Keys of the table (the stream's keys are drawn from them). */
  readonly tableKeys: number
}

/** Every 10th key gets a second version; every 1,000th is deleted after it. */
const UPDATE_EVERY = 10
const DELETE_EVERY = 1000

const region = (k: number): string => `r-${String((k * 7) % 50).padStart(2, "0")}`
const tableValue = (k: number, version: number): string => `c-${String(k).padStart(6, "0")}/${region(k)}/v${version}`

/** The key's final value in the table; `undefined`: deleted. */
export const finalTableValue = (k: number): string | undefined =>
  k % DELETE_EVERY === 0 ? undefined : tableValue(k, k % UPDATE_EVERY === 0 ? 2 : 1)

/** The table topic's records in order: every key once, the updates, the tombstones. */
export const tableRecordCount = (tableKeys: number): number =>
  tableKeys + Math.ceil(tableKeys / UPDATE_EVERY) + Math.ceil(tableKeys / DELETE_EVERY)

const tableRecord = (tableKeys: number, j: number): Message => {
  if (j < tableKeys) return { key: keyName(j), value: tableValue(j, 1) }
  const updates = Math.ceil(tableKeys / UPDATE_EVERY)
  if (j < tableKeys + updates) {
    const k = (j - tableKeys) * UPDATE_EVERY
    return { key: keyName(k), value: tableValue(k, 2) }
  }
  return { key: keyName((j - tableKeys - updates) * DELETE_EVERY), value: null }
}

/** The id a stream record's value starts with (before its `;`). */
export const streamId = (i: number): string => `o-${String(i).padStart(7, "0")}`

/** The value record i's output must have. */
export const expectedValue = (i: number, key: number): string => `${streamId(i)}|${finalTableValue(key) ?? "-"}`

const send = async (kafka: Kafka, topic: string, partitions: number, recordBytes: number, count: number, message: (i: number) => Message): Promise<number> => {
  const producer = inputProducer(kafka)
  await producer.connect()
  // As `preload`: at most ~800 KB per partition per send (the broker's message.max.bytes).
  const batch = Math.max(1, Math.min(20_000, Math.floor((800_000 * partitions) / recordBytes)))
  const t0 = performance.now()
  try {
    for (let start = 0; start < count; start += batch) {
      const end = Math.min(count, start + batch)
      const messages: Message[] = new Array(end - start)
      for (let i = start; i < end; i++) messages[i - start] = message(i)
      await producer.send({ topic, messages, acks: -1 })
    }
  } finally {
    await producer.disconnect()
  }
  return (performance.now() - t0) / 1000
}

/** Writes the table's topic (acks=all, idempotent); returns the seconds it took. */
export const preloadTable = (kafka: Kafka, topic: string, w: EnrichmentWorkload): Promise<number> =>
  send(kafka, topic, w.partitions, 80, tableRecordCount(w.tableKeys), (j) => tableRecord(w.tableKeys, j))

/** Writes the stream's records (acks=all, idempotent), `seq` their keys; returns the seconds it took. */
export const preloadStream = (kafka: Kafka, topic: string, w: EnrichmentWorkload, seq: Uint32Array): Promise<number> => {
  const rand = mulberry32(7)
  const filler = Buffer.alloc(Math.max(0, w.valueBytes))
  for (let i = 0; i < filler.length; i++) filler[i] = 97 + Math.floor(rand() * 26)
  return send(kafka, topic, w.partitions, w.valueBytes + 40, w.records, (i) => {
    const head = Buffer.from(`${streamId(i)};`)
    return { key: keyName(seq[i] ?? 0), value: Buffer.concat([head, filler.subarray(0, Math.max(0, w.valueBytes - head.length))]) }
  })
}

export interface JoinedCheck {
  readonly exact: boolean
  /** Output records read. */
  readonly records: number
  /** Stream records without an output. */
  readonly missing: number
  /** Outputs of a stream record beyond its first. */
  readonly duplicates: number
  /** Outputs with another key or value than their stream record's expected one. */
  readonly wrong: number
  /** Outputs whose value names no stream record. */
  readonly malformed: number
  /**
   * sha256 (first 16 hex digits) of the outputs read, one line `<key>=<value>` per stream record
   * in the stream's order (the first output of each): equal digests = equal joined results.
   */
  readonly digest: string
  readonly summary: string
}

/**
 * Reads the output read_committed from the beginning to its end (the high watermark now: the
 * contender is stopped) or until nothing new arrived for `idleMs`, and checks it: every stream
 * record's joined result once, with its key and the table's final value for the key.
 */
export const checkJoined = async (kafka: Kafka, admin: Admin, topic: string, w: EnrichmentWorkload, seq: Uint32Array, idleMs: number): Promise<JoinedCheck> => {
  const seen = new Uint8Array(w.records)
  const got: Array<string | undefined> = new Array<string | undefined>(w.records)
  let records = 0
  let duplicates = 0
  let wrong = 0
  let malformed = 0
  const samples: string[] = []
  let lastProgress = Date.now()
  const ends = await admin.fetchTopicOffsets(topic)
  const positions = new Map(ends.map((o) => [o.partition, Number(o.low)]))
  const atEnd = (): boolean => ends.every((o) => (positions.get(o.partition) ?? 0) >= Number(o.high))
  const consumer: Consumer = kafka.consumer({
    groupId: `bench-verify-${topic}-${Date.now()}`,
    readUncommitted: false,
    maxBytes: 50 * 1024 * 1024,
    maxBytesPerPartition: 10 * 1024 * 1024,
  })
  // Also emitted for batches of only control records or aborted records, which eachBatch never sees.
  consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
    positions.set(payload.partition, Math.max(positions.get(payload.partition) ?? 0, Number(payload.lastOffset) + 1))
    lastProgress = Date.now()
  })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      for (const m of batch.messages) {
        records++
        const key = m.key?.toString() ?? ""
        const value = m.value?.toString() ?? ""
        const i = value.startsWith("o-") ? Number.parseInt(value.slice(2, value.indexOf("|")), 10) : Number.NaN
        if (!Number.isInteger(i) || i < 0 || i >= w.records) {
          malformed++
          if (samples.length < 3) samples.push(`${key}=${value} (no stream record)`)
          continue
        }
        if ((seen[i] ?? 0) > 0) {
          duplicates++
          continue
        }
        seen[i] = 1
        got[i] = `${key}=${value}`
        const k = seq[i] ?? 0
        const want = expectedValue(i, k)
        if (key !== keyName(k) || value !== want) {
          wrong++
          if (samples.length < 3) samples.push(`${key}=${value} (expected ${keyName(k)}=${want})`)
        }
      }
      lastProgress = Date.now()
    },
  })
  while (!atEnd() && Date.now() - lastProgress < idleMs) await sleep(100)
  await consumer.disconnect()
  let missing = 0
  const hash = createHash("sha256")
  for (let i = 0; i < w.records; i++) {
    const line = got[i]
    if (line === undefined) missing++
    else hash.update(`${line}\n`)
  }
  const digest = hash.digest("hex").slice(0, 16)
  const exact = missing === 0 && duplicates === 0 && wrong === 0 && malformed === 0
  const n = (x: number): string => x.toLocaleString("en-US")
  const summary = exact
    ? `exact (${n(w.records)} joined results, digest ${digest})`
    : `WRONG: ${n(missing)} missing, ${n(wrong)} wrong, ${n(duplicates)} duplicates, ${n(malformed)} malformed of ${n(records)} records ` +
      `(digest ${digest})${samples.length > 0 ? `; e.g. ${samples.join(", ")}` : ""}`
  return { exact, records, missing, duplicates, wrong, malformed, digest, summary }
}
