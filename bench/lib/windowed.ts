/**
 * The windowed job of the benchmark (bench/README.md, "Windowed job"): its input, the records
 * that close its last windows, the final results it must produce, and the check of a contender's
 * output against them.
 *
 * The job: group the input by a second key read from the value (`g-000123;...`: the text before
 * the first `;`), count per second key in tumbling one-minute windows of event time with a grace
 * period, and emit each window's final result once, when it closes. Output: key
 * `<second key>@<window start ms>`, value the count as a decimal string.
 *
 * Input: record i carries the input key of the count job's seeded key sequence (which only places
 * it in a partition), a second key drawn uniformly from `groupKeys` (its own seed), and the event
 * time (the record's timestamp) `base + i × 60,000 / recordsPerMinute − jitter`, jitter uniform
 * in [0, jitterMs): time advances at a fixed rate per record, a little out of order. `base` is
 * minute-aligned and far enough in the past that every timestamp is (a broker refuses records
 * stamped more than `message.timestamp.after.max.ms`, an hour by default, in the future).
 *
 * Closing the last windows: the repartition topic interleaves the upstream tasks' records, so a
 * downstream task sees event time only roughly in order; `graceMs` must cover that (the check
 * catches a record dropped as late: its window's count comes out short). A jump of event time at
 * the end of the input would make every record still in flight behind it late. So the closers
 * are produced only once the contender has consumed (and committed) the whole input: one record
 * per second key, all at `lastWindowEnd + grace + 1 s`, so every repartition partition that holds
 * a window gets one after all of its input and closes every window. The closers' own windows
 * never close (no record is later), so they emit nothing.
 */
import { createHash } from "node:crypto"
import type { Admin, Consumer, Kafka, Message } from "kafkajs"
import { inputProducer, keyName, type Workload } from "./kafka.ts"
import { mulberry32, sleep } from "./stats.ts"

export const WINDOW_MS = 60_000

export interface WindowedWorkload extends Workload {
  /** Distinct second keys (the grouping's). */
  readonly groupKeys: number
  /** Event time advances one minute per this many records. */
  readonly recordsPerMinute: number
  readonly graceMs: number
  /** Records are up to this much earlier than their place in the sequence. */
  readonly jitterMs: number
  /** Minute-aligned event time of record 0 (ms since the epoch). */
  readonly base: number
}

/** A base for `w`: minute-aligned, with the closers at least two minutes in the past now. */
export const windowedBase = (w: Omit<WindowedWorkload, "base">, now = Date.now()): number => {
  const spanMs = Math.ceil(w.records / w.recordsPerMinute) * WINDOW_MS + WINDOW_MS
  return Math.floor((now - spanMs - w.graceMs - 3 * WINDOW_MS) / WINDOW_MS) * WINDOW_MS
}

export const groupName = (g: number): string => `g-${String(g).padStart(6, "0")}`

/** The windowed input: second key and event time per record (the input keys are the count job's `keySequence`). */
export interface WindowedInput {
  readonly groups: Uint32Array
  readonly times: Float64Array
  /** Event time of every closer (one per second key). */
  readonly closeAt: number
  /** Expected final results: `<second key>@<window start>` → count. */
  readonly expected: ReadonlyMap<string, number>
}

export const windowedInput = (w: WindowedWorkload): WindowedInput => {
  const groupRand = mulberry32(w.seed + 2)
  const jitterRand = mulberry32(w.seed + 3)
  const groups = new Uint32Array(w.records)
  const times = new Float64Array(w.records)
  const expected = new Map<string, number>()
  let last = w.base
  for (let i = 0; i < w.records; i++) {
    const g = Math.floor(groupRand() * w.groupKeys)
    const t = w.base + Math.floor((i * WINDOW_MS) / w.recordsPerMinute) - Math.floor(jitterRand() * w.jitterMs)
    groups[i] = g
    times[i] = t
    if (t > last) last = t
    const k = `${groupName(g)}@${Math.floor(t / WINDOW_MS) * WINDOW_MS}`
    expected.set(k, (expected.get(k) ?? 0) + 1)
  }
  const lastWindowEnd = Math.floor(last / WINDOW_MS) * WINDOW_MS + WINDOW_MS
  return { groups, times, closeAt: lastWindowEnd + w.graceMs + 1000, expected }
}

/** Value bytes of each second key: `g-000123;` then filler up to the workload's value size. */
const groupValues = (w: WindowedWorkload): ReadonlyArray<Buffer> => {
  const rand = mulberry32(7)
  const filler = Buffer.alloc(Math.max(0, w.valueBytes))
  for (let i = 0; i < filler.length; i++) filler[i] = 97 + Math.floor(rand() * 26)
  return Array.from({ length: w.groupKeys }, (_, g) => {
    const head = Buffer.from(`${groupName(g)};`)
    return Buffer.concat([head, filler.subarray(0, Math.max(0, w.valueBytes - head.length))])
  })
}

const send = async (kafka: Kafka, topic: string, w: WindowedWorkload, count: number, message: (i: number) => Message): Promise<number> => {
  const producer = inputProducer(kafka)
  await producer.connect()
  // As `preload`: at most ~800 KB per partition per send (the broker's message.max.bytes).
  const batch = Math.max(1, Math.min(20_000, Math.floor((800_000 * w.partitions) / (w.valueBytes + 60))))
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

/** Writes the input (acks=all, idempotent), each record stamped with its event time; returns the seconds it took. */
export const preloadWindowed = (kafka: Kafka, topic: string, w: WindowedWorkload, seq: Uint32Array, input: WindowedInput): Promise<number> => {
  const values = groupValues(w)
  return send(kafka, topic, w, w.records, (i) => ({
    key: keyName(seq[i] ?? 0),
    value: values[input.groups[i] ?? 0] ?? null,
    timestamp: String(input.times[i] ?? w.base),
  }))
}

/** Writes the closers: one record per second key at `closeAt`, spread over the input's partitions by their input keys. */
export const produceClosers = (kafka: Kafka, topic: string, w: WindowedWorkload, input: WindowedInput): Promise<number> => {
  const values = groupValues(w)
  return send(kafka, topic, w, w.groupKeys, (g) => ({
    key: keyName(g % w.keys),
    value: values[g] ?? null,
    timestamp: String(input.closeAt),
  }))
}

/**
 * Has some consumer group of the contender (a name starting with `prefix`: Kafka Streams' is the
 * application id, Skein's `{applicationId}-{sub-topology}`) committed every input partition at
 * its end? Returns that group, or undefined.
 */
export const inputConsumedBy = async (
  admin: Admin,
  prefix: string,
  topic: string,
  ends: ReadonlyMap<number, number>,
  known: string | undefined,
): Promise<string | undefined> => {
  const candidates = known !== undefined
    ? [known]
    : (await admin.listGroups()).groups.map((g) => g.groupId).filter((g) => g === prefix || g.startsWith(`${prefix}-`))
  for (const groupId of candidates) {
    const res = await admin.fetchOffsets({ groupId, topics: [topic] })
    const parts = res[0]?.partitions ?? []
    const done = [...ends].every(([p, end]) => {
      const c = parts.find((x) => x.partition === p)
      return c !== undefined && Number(c.offset) >= end
    })
    if (done) return groupId
  }
  return undefined
}

/**
 * Reads a contender's final results read_committed from the output's beginning while it runs,
 * and checks them once it is stopped. A result is `<second key>@<window start>` → count.
 */
export class ResultsReader {
  private readonly consumer: Consumer
  private readonly seen = new Map<string, number>()
  private readonly positions = new Map<number, number>()
  private duplicates = 0
  private malformed = 0
  private lastProgress = Date.now()
  records = 0

  private constructor(consumer: Consumer) {
    this.consumer = consumer
  }

  static async start(kafka: Kafka, topic: string): Promise<ResultsReader> {
    const consumer = kafka.consumer({ groupId: `bench-results-${topic}-${Date.now()}`, readUncommitted: false, maxWaitTimeInMs: 250 })
    const reader = new ResultsReader(consumer)
    // Also emitted for batches of only control records or aborted records, which eachBatch never sees.
    consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
      reader.positions.set(payload.partition, Math.max(reader.positions.get(payload.partition) ?? 0, Number(payload.lastOffset) + 1))
      reader.lastProgress = Date.now()
    })
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) {
          reader.records++
          const key = m.key?.toString()
          const value = m.value === null ? Number.NaN : Number.parseInt(m.value.toString(), 10)
          if (key === undefined || !key.includes("@") || !Number.isFinite(value)) {
            reader.malformed++
            continue
          }
          if (reader.seen.has(key)) reader.duplicates++
          reader.seen.set(key, value)
        }
        reader.lastProgress = Date.now()
      },
    })
    return reader
  }

  /**
   * Waits until the reader is at the output's end (its high watermark now, the contender
   * stopped) or nothing new arrived for `idleMs`, stops it, and checks the results against
   * `expected`: each expected window once with its count, nothing else.
   */
  async finish(admin: Admin, topic: string, expected: ReadonlyMap<string, number>, base: number, idleMs: number): Promise<ResultsCheck> {
    const ends = await admin.fetchTopicOffsets(topic)
    const atEnd = (): boolean => ends.every((o) => (this.positions.get(o.partition) ?? Number(o.low)) >= Number(o.high))
    this.lastProgress = Date.now()
    while (!atEnd() && Date.now() - this.lastProgress < idleMs) await sleep(100)
    await this.consumer.disconnect()
    return checkResults(this.seen, expected, base, { duplicates: this.duplicates, malformed: this.malformed, records: this.records })
  }

  async close(): Promise<void> {
    await this.consumer.disconnect().catch(() => undefined)
  }
}

export interface ResultsCheck {
  readonly exact: boolean
  /** Records read (results, duplicates and malformed ones). */
  readonly records: number
  readonly missing: number
  readonly wrong: number
  readonly unexpected: number
  readonly duplicates: number
  readonly malformed: number
  /**
   * sha256 (first 16 hex digits) of the sorted lines `<second key>@<window start − base>=<count>`
   * of the results read: equal digests = equal sets of final results (window starts relative to
   * the input's base, so runs of different invocations compare too).
   */
  readonly digest: string
  /** For the report: `exact (n results, digest)` or what is off. */
  readonly summary: string
}

export const checkResults = (
  seen: ReadonlyMap<string, number>,
  expected: ReadonlyMap<string, number>,
  base: number,
  counts: { readonly duplicates: number; readonly malformed: number; readonly records: number },
): ResultsCheck => {
  let missing = 0
  let wrong = 0
  let unexpected = 0
  for (const [k, n] of expected) {
    const got = seen.get(k)
    if (got === undefined) missing++
    else if (got !== n) wrong++
  }
  for (const k of seen.keys()) if (!expected.has(k)) unexpected++
  const lines = [...seen].map(([k, n]) => {
    const at = k.lastIndexOf("@")
    return `${k.slice(0, at)}@${Number(k.slice(at + 1)) - base}=${n}`
  }).sort()
  const digest = createHash("sha256").update(lines.join("\n")).digest("hex").slice(0, 16)
  const exact = missing === 0 && wrong === 0 && unexpected === 0 && counts.duplicates === 0 && counts.malformed === 0
  const summary = exact
    ? `exact (${seen.size.toLocaleString("en-US")} results, digest ${digest})`
    : `WRONG: ${missing} missing, ${wrong} wrong counts, ${unexpected} unexpected, ${counts.duplicates} duplicates, ` +
      `${counts.malformed} malformed of ${counts.records.toLocaleString("en-US")} records (digest ${digest})`
  return { exact, records: counts.records, missing, wrong, unexpected, duplicates: counts.duplicates, malformed: counts.malformed, digest, summary }
}
