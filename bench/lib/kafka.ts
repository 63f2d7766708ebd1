/**
 * Kafka-side helpers of the benchmark harness: topics, the deterministic input, the output
 * watermark timeline, read_committed verification and the fixed-rate latency probe.
 * All of it uses kafkajs from the harness process.
 */
import { Kafka, logLevel, type Admin, type Consumer, type Producer, type Message } from "kafkajs"
import { kafkajsSecurity, plaintext, type BenchSecurity } from "./security.ts"
import { mulberry32, sleep } from "./stats.ts"

process.env["KAFKAJS_NO_PARTITIONER_WARNING"] = "1"

export interface Workload {
  readonly records: number
  readonly partitions: number
  readonly keys: number
  readonly valueBytes: number
  readonly seed: number
}

export const keyName = (i: number): string => `key-${String(i).padStart(6, "0")}`
const keyIndex = (k: string): number => Number.parseInt(k.slice(4), 10)

/** The harness's kafkajs client, connecting with the SKEIN_* security settings (`securityFromEnv`). */
export const makeKafka = (brokers: string, clientId: string, security: BenchSecurity = plaintext): Kafka =>
  new Kafka({
    clientId,
    brokers: brokers.split(","),
    logLevel: logLevel.NOTHING,
    retry: { retries: 10, initialRetryTime: 100 },
    ...kafkajsSecurity(security),
  })

export const createTopics = async (
  admin: Admin,
  topics: ReadonlyArray<string>,
  partitions: number,
  config?: Readonly<Record<string, string>>,
): Promise<void> => {
  const configEntries = config === undefined ? undefined : Object.entries(config).map(([name, value]) => ({ name, value }))
  await admin.createTopics({
    waitForLeaders: false,
    topics: topics.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: 1, ...(configEntries === undefined ? {} : { configEntries }) })),
  })
  // Wait until every partition has a leader (kafkajs' own waitForLeaders gives up on
  // UNKNOWN_TOPIC_OR_PARTITION while the metadata propagates).
  const deadline = Date.now() + 60_000
  for (;;) {
    const ok = await admin
      .fetchTopicMetadata({ topics: [...topics] })
      .then((md) => md.topics.every((t) => t.partitions.length === partitions && t.partitions.every((p) => p.leader >= 0)))
      .catch(() => false)
    if (ok) return
    if (Date.now() > deadline) throw new Error(`topics ${topics.join(", ")} have no leaders after 60 s`)
    await sleep(200)
  }
}

/** Deletes the given topics plus every topic whose name starts with one of the prefixes. */
export const deleteTopics = async (admin: Admin, prefixes: ReadonlyArray<string>): Promise<void> => {
  const all = await admin.listTopics()
  const doomed = all.filter((t) => prefixes.some((p) => t.startsWith(p)))
  if (doomed.length > 0) await admin.deleteTopics({ topics: doomed, timeout: 30_000 }).catch(() => undefined)
}

/** The key sequence of the input: the same for every contender and run. */
export const keySequence = (w: Workload): Uint32Array => {
  const rand = mulberry32(w.seed)
  const seq = new Uint32Array(w.records)
  for (let i = 0; i < w.records; i++) seq[i] = Math.floor(rand() * w.keys)
  return seq
}

export const expectedCounts = (w: Workload, seq: Uint32Array): Int32Array => {
  const counts = new Int32Array(w.keys)
  for (let i = 0; i < seq.length; i++) counts[seq[i] ?? 0]! += 1
  return counts
}

const valueBuffer = (bytes: number): Buffer => {
  const rand = mulberry32(7)
  const b = Buffer.alloc(bytes)
  for (let i = 0; i < bytes; i++) b[i] = 97 + Math.floor(rand() * 26)
  return b
}

/**
 * An idempotent producer: a plain kafkajs producer retries a whole request when one of its
 * partitions fails (e.g. a leader not yet known right after the topic was created), writing the
 * other partitions' records twice; the broker drops such retries of an idempotent producer.
 * Give it one `send` at a time: kafkajs's idempotent producer numbers concurrent sends' batches
 * out of order now and then (OUT_OF_ORDER_SEQUENCE_NUMBER, tulios/kafkajs#598).
 */
export const inputProducer = (kafka: Kafka): Producer => kafka.producer({ allowAutoTopicCreation: false, idempotent: true })

/** Writes the whole input (acks=all) and returns when every record is acknowledged. */
export const preload = async (kafka: Kafka, topic: string, w: Workload, seq: Uint32Array): Promise<number> => {
  const producer = inputProducer(kafka)
  await producer.connect()
  const value = valueBuffer(w.valueBytes)
  // Each partition's share of a send is one record batch, which the broker refuses above
  // `message.max.bytes` (1 MiB by default): about 800 KB per partition at most (keys are
  // uniform), 20,000 records per send at the default 100-byte values.
  const batch = Math.max(1, Math.min(20_000, Math.floor((800_000 * w.partitions) / (w.valueBytes + 40))))
  const t0 = performance.now()
  try {
    for (let start = 0; start < w.records; start += batch) {
      const end = Math.min(w.records, start + batch)
      const messages: Message[] = new Array(end - start)
      for (let i = start; i < end; i++) messages[i - start] = { key: keyName(seq[i] ?? 0), value }
      await producer.send({ topic, messages, acks: -1 })
    }
  } finally {
    await producer.disconnect()
  }
  return (performance.now() - t0) / 1000
}

export const sumHigh = async (admin: Admin, topic: string): Promise<number> => {
  // kafkajs' admin sends ListOffsets without an isolation level, i.e. READ_UNCOMMITTED: `high`
  // is the high watermark. Once processing is over it includes the last commit marker, so the
  // moment it reaches its final value is the moment the last output was committed.
  const offs = await admin.fetchTopicOffsets(topic)
  return offs.reduce((s, o) => s + Number(o.high), 0)
}

/** Is every input partition's committed group offset at the input's end? */
export const groupCaughtUp = async (
  admin: Admin,
  group: string,
  topic: string,
  inputEnds: ReadonlyMap<number, number>,
): Promise<boolean> => {
  const res = await admin.fetchOffsets({ groupId: group, topics: [topic] })
  const parts = res[0]?.partitions ?? []
  for (const [p, end] of inputEnds) {
    const c = parts.find((x) => x.partition === p)
    if (c === undefined || Number(c.offset) < end) return false
  }
  return true
}

export const topicEnds = async (admin: Admin, topic: string): Promise<Map<number, number>> => {
  const offs = await admin.fetchTopicOffsets(topic)
  return new Map(offs.map((o) => [o.partition, Number(o.high)]))
}

/** Samples the output's high watermark sum every `everyMs` until stopped. */
export class WatermarkTimeline {
  private readonly samples: Array<{ t: number; v: number }> = []
  private running = true
  private readonly loop: Promise<void>
  constructor(admin: Admin, topic: string, everyMs: number) {
    this.loop = (async () => {
      while (this.running) {
        const t0 = Date.now()
        const v = await sumHigh(admin, topic).catch(() => undefined)
        if (v !== undefined) this.samples.push({ t: Date.now(), v })
        const spent = Date.now() - t0
        if (spent < everyMs) await sleep(everyMs - spent)
      }
    })()
  }
  async stop(): Promise<void> {
    this.running = false
    await this.loop
  }
  last(): number | undefined {
    return this.samples[this.samples.length - 1]?.v
  }
  /** First sample time at which the watermark had reached `value`. */
  reachedAt(value: number): number | undefined {
    return this.samples.find((s) => s.v >= value)?.t
  }
}

export interface Verification {
  readonly records: number
  readonly duplicates: number
  readonly gaps: number
  readonly keysWrong: number
  readonly complete: boolean
  readonly exact: boolean
}

/**
 * Reads the output topic read_committed from the beginning and checks that each key's values
 * run 1, 2, ..., expected[key]. Returns when every key's final count was seen AND the read
 * reached the output's end (the high watermark when the check started), so duplicates or extra
 * counts behind the last expected output are counted too; or when nothing new arrived for
 * `idleMs` (e.g. the end is behind a transaction left open by a killed contender).
 * Completion does not need exactly-once: a value at or below the key's last one is counted as a
 * duplicate (at-least-once) and only a missing or wrong count makes the output incomplete.
 */
export const verifyOutput = async (
  kafka: Kafka,
  topic: string,
  expected: Int32Array,
  idleMs: number,
): Promise<Verification> => {
  const last = new Int32Array(expected.length)
  let remaining = 0
  for (let k = 0; k < expected.length; k++) if ((expected[k] ?? 0) > 0) remaining++
  let records = 0
  let duplicates = 0
  let gaps = 0
  let lastProgress = Date.now()
  const admin = kafka.admin()
  await admin.connect()
  const ends = await admin.fetchTopicOffsets(topic).finally(() => admin.disconnect())
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
        if (m.key === null || m.value === null) continue
        const k = keyIndex(m.key.toString())
        const v = Number.parseInt(m.value.toString(), 10)
        records++
        const prev = last[k] ?? 0
        if (v <= prev) duplicates++
        else {
          if (v > prev + 1) gaps++
          last[k] = v
          if (v === expected[k]) remaining--
        }
      }
      lastProgress = Date.now()
    },
  })
  while ((remaining > 0 || !atEnd()) && Date.now() - lastProgress < idleMs) await sleep(100)
  await consumer.disconnect()
  let keysWrong = 0
  for (let k = 0; k < expected.length; k++) if (last[k] !== expected[k]) keysWrong++
  const complete = keysWrong === 0 && gaps === 0
  const total = expected.reduce((s, c) => s + c, 0)
  return { records, duplicates, gaps, keysWrong, complete, exact: complete && duplicates === 0 && records === total }
}

export interface LatencyResult {
  readonly sent: number
  readonly measured: number
  readonly missing: number
  readonly p50: number
  readonly p99: number
  readonly max: number
}

/**
 * Fixed-rate latency probe. Waits until the contender answers a probe record, then sends
 * `rate` records/s for warmup + measure seconds. Latency of a record = the moment its output
 * (key, count) is read read_committed - the moment the record was handed to the producer.
 * Outputs are matched to inputs by (key, running count), so no timestamp propagation is needed.
 */
export const measureLatency = async (
  kafka: Kafka,
  input: string,
  output: string,
  w: Workload,
  opts: { rate: number; warmupSec: number; measureSec: number; readyTimeoutMs: number; isAlive: () => boolean },
): Promise<LatencyResult> => {
  const sendTimes: number[][] = Array.from({ length: w.keys }, () => [])
  const latencies: number[] = []
  const seen: number[] = new Array<number>(w.keys).fill(0)
  let measureFrom = Number.POSITIVE_INFINITY
  let measuredExpected = 0
  let anyOutput = false
  const consumer = kafka.consumer({ groupId: `bench-lat-${output}-${Date.now()}`, readUncommitted: false, maxWaitTimeInMs: 50 })
  await consumer.connect()
  await consumer.subscribe({ topic: output, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      const now = performance.now()
      for (const m of batch.messages) {
        if (m.key === null || m.value === null) continue
        anyOutput = true
        const k = keyIndex(m.key.toString())
        const c = Number.parseInt(m.value.toString(), 10)
        if (c <= (seen[k] ?? 0)) continue // at-least-once duplicate
        seen[k] = c
        const sentAt = sendTimes[k]?.[c - 1]
        if (sentAt !== undefined && sentAt >= measureFrom) latencies.push(now - sentAt)
      }
    },
  })
  const producer: Producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const value = valueBuffer(w.valueBytes)
  const rand = mulberry32(w.seed + 1)
  let sent = 0
  const send = (n: number, measuring: boolean): void => {
    const messages: Message[] = []
    const now = performance.now()
    for (let i = 0; i < n; i++) {
      const k = Math.floor(rand() * w.keys)
      sendTimes[k]?.push(now)
      messages.push({ key: keyName(k), value })
    }
    sent += n
    if (measuring) measuredExpected += n
    void producer.send({ topic: input, messages, acks: -1 }).catch(() => undefined)
  }
  try {
    // Readiness: one probe record every 250 ms until an output shows up.
    const readyBy = Date.now() + opts.readyTimeoutMs
    while (!anyOutput) {
      if (Date.now() > readyBy || !opts.isAlive()) throw new Error("contender produced no output for the probe")
      send(1, false)
      await sleep(250)
    }
    const t0 = performance.now()
    const totalMs = (opts.warmupSec + opts.measureSec) * 1000
    let due = 0
    for (;;) {
      const el = performance.now() - t0
      if (el >= totalMs) break
      const target = Math.floor((el / 1000) * opts.rate)
      const n = target - due
      if (n > 0) {
        const measuring = el >= opts.warmupSec * 1000
        if (measuring && measureFrom === Number.POSITIVE_INFINITY) measureFrom = performance.now()
        send(n, measuring)
        due = target
      }
      await sleep(5)
    }
    // Drain: wait for the outputs of every measured record.
    const drainBy = Date.now() + 30_000
    while (latencies.length < measuredExpected && Date.now() < drainBy && opts.isAlive()) await sleep(100)
  } finally {
    await producer.disconnect().catch(() => undefined)
    await consumer.disconnect().catch(() => undefined)
  }
  const sorted = latencies.slice().sort((a, b) => a - b)
  const pct = (p: number): number =>
    sorted.length === 0 ? Number.NaN : (sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN)
  return {
    sent,
    measured: sorted.length,
    missing: Math.max(0, measuredExpected - sorted.length),
    p50: pct(50),
    p99: pct(99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
  }
}
