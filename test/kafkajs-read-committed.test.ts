/**
 * kafkajs 2.2.4 read_committed: aborted transactions of several producers.
 *
 * kafkajs drops aborted records in `consumer/filterAbortedMessages.js` (called by
 * `consumer/batch.js` for every partition of every fetch response). Stock 2.2.4 walks the fetch
 * response's `abortedTransactions` list as if it were sorted by first offset and takes at most ONE
 * entry per record. The broker lists the aborted transactions that overlap the fetched range in
 * the order they ENDED (transaction index order), so:
 *  - a fetch starting after the first offsets of two open aborted transactions (P1 from 10, P2 from
 *    12, fetch from 15, first record P2's) activates only P1 on the first record: P2's aborted
 *    record is delivered;
 *  - when P2 aborts before P1 although P1 began first, P1's records are delivered even when
 *    consuming from the start of its transaction.
 * It also takes any record keyed 0x00000000 for an ABORT marker, control batch or not.
 *
 * The fix (patches/kafkajs+2.2.4.patch, applied by scripts/patch-kafkajs.mjs at install) does what
 * the Java consumer does (CompletedFetch#nextFetchedRecord): aborted transactions ordered by first
 * offset, every one whose first offset is at or below the current record activates its producer
 * (a set: several producers can be aborting at once), that producer's ABORT control record
 * deactivates it, transactional records of active producers are dropped.
 *
 * Unit tests below drive kafkajs's own Batch with synthetic fetch responses; the integration test
 * writes interleaved transactions with several kafkajs transactional producers to one partition of
 * a real broker and consumes it read_committed from every offset.
 */
import { Kafka, logLevel, type Consumer, type Producer, type Transaction } from "kafkajs"
import { createRequire } from "node:module"
import { describe, expect, it } from "vitest"
import { brokers as kafkaBrokers } from "./utils/broker.ts"
import { seeded } from "./helpers/seeded.ts"

// ---------------------------------------------------------------------------------------------
// kafkajs internals (CommonJS, untyped): loaded through Node's require, exactly as kafkajs does.

interface SyntheticBatchContext {
  readonly firstOffset: string
  readonly lastOffsetDelta: number
  readonly producerId: string
  readonly inTransaction: boolean
  readonly isControlBatch: boolean
}

interface SyntheticMessage {
  readonly offset: string
  readonly key: Buffer | null
  readonly value: Buffer | null
  readonly isControlRecord: boolean
  readonly batchContext: SyntheticBatchContext
}

interface AbortedTransaction {
  readonly producerId: string
  readonly firstOffset: string
}

interface PartitionData {
  readonly partition: number
  readonly highWatermark: string
  readonly abortedTransactions: ReadonlyArray<AbortedTransaction>
  readonly messages: ReadonlyArray<SyntheticMessage>
}

interface KafkajsBatch {
  readonly messages: ReadonlyArray<SyntheticMessage>
}

type BatchConstructor = new (topic: string, fetchedOffset: string, partitionData: PartitionData) => KafkajsBatch

const require = createRequire(import.meta.url)

const loadBatch = (): BatchConstructor => {
  const loaded: unknown = require("kafkajs/src/consumer/batch.js")
  if (typeof loaded !== "function") throw new Error("kafkajs/src/consumer/batch.js does not export a class")
  return loaded as BatchConstructor
}

const Batch = loadBatch()

// ---------------------------------------------------------------------------------------------
// A synthetic partition log

const ABORT_KEY = Buffer.from([0, 0, 0, 0]) // control record key: version 0, type 0 (ABORT)
const COMMIT_KEY = Buffer.from([0, 0, 0, 1]) // version 0, type 1 (COMMIT)
const NO_PRODUCER = "-1"

interface LogBatch {
  readonly baseOffset: number
  readonly producerId: string
  readonly inTransaction: boolean
  readonly isControl: boolean
  readonly records: ReadonlyArray<{ readonly key: Buffer | null; readonly value: string }>
}

interface TxnIndexEntry {
  readonly producerId: string
  readonly firstOffset: number
  readonly lastOffset: number
}

/** Builds a partition log the way a broker does, and answers fetches the way a broker does. */
class SyntheticLog {
  readonly batches: Array<LogBatch> = []
  /** Aborted transactions in the order they ended (the broker's transaction index order). */
  readonly txnIndex: Array<TxnIndexEntry> = []
  /** Values of data records that a read_committed consumer must see. */
  readonly visible = new Set<string>()
  private readonly open = new Map<string, { firstOffset: number; values: Array<string> }>()
  private next = 0

  get endOffset(): number {
    return this.next
  }

  /** A data batch; transactional when `producerId` has a transaction open (opened if `txn`). */
  append(producerId: string, values: ReadonlyArray<string>, options: { readonly txn?: boolean; readonly key?: Buffer } = {}) {
    const inTransaction = options.txn === true
    if (inTransaction && !this.open.has(producerId)) this.open.set(producerId, { firstOffset: this.next, values: [] })
    this.batches.push({
      baseOffset: this.next,
      producerId,
      inTransaction,
      isControl: false,
      records: values.map((value) => ({ key: options.key ?? null, value }))
    })
    this.next += values.length
    if (inTransaction) this.open.get(producerId)?.values.push(...values)
    else for (const value of values) this.visible.add(value)
  }

  commit(producerId: string) {
    this.end(producerId, "commit")
  }

  abort(producerId: string) {
    this.end(producerId, "abort")
  }

  private end(producerId: string, outcome: "commit" | "abort") {
    const txn = this.open.get(producerId)
    if (txn === undefined) throw new Error(`producer ${producerId} has no open transaction`)
    this.open.delete(producerId)
    const markerOffset = this.next
    this.batches.push({
      baseOffset: markerOffset,
      producerId,
      inTransaction: true,
      isControl: true,
      records: [{ key: outcome === "abort" ? ABORT_KEY : COMMIT_KEY, value: `${outcome}-${producerId}` }]
    })
    this.next += 1
    if (outcome === "abort") this.txnIndex.push({ producerId, firstOffset: txn.firstOffset, lastOffset: markerOffset })
    else for (const value of txn.values) this.visible.add(value)
  }

  /**
   * The partition data of a Fetch at `fetchOffset` returning at most `maxBatches` record batches:
   * whole batches from the one containing `fetchOffset`, and the aborted transactions overlapping
   * the returned range, in transaction index order (Log#collectAbortedTransactions).
   */
  fetch(fetchOffset: number, maxBatches: number): PartitionData {
    const first = this.batches.findIndex((b) => b.baseOffset + b.records.length > fetchOffset)
    const batches = first < 0 ? [] : this.batches.slice(first, first + maxBatches)
    const last = batches[batches.length - 1]
    const upperBound = last === undefined ? fetchOffset : last.baseOffset + last.records.length
    return {
      partition: 0,
      highWatermark: String(this.next),
      abortedTransactions: this.txnIndex
        .filter((t) => t.lastOffset >= fetchOffset && t.firstOffset < upperBound)
        .map((t) => ({ producerId: t.producerId, firstOffset: String(t.firstOffset) })),
      messages: batches.flatMap((b) =>
        b.records.map((r, i) => ({
          offset: String(b.baseOffset + i),
          key: r.key,
          value: Buffer.from(r.value),
          isControlRecord: b.isControl,
          batchContext: {
            firstOffset: String(b.baseOffset),
            lastOffsetDelta: b.records.length - 1,
            producerId: b.producerId,
            inTransaction: b.inTransaction,
            isControlBatch: b.isControl
          }
        }))
      )
    }
  }

  /** Values a read_committed fetch at `fetchOffset` must deliver, in offset order. */
  expected(partitionData: PartitionData, fetchOffset: number): Array<string> {
    return partitionData.messages
      .filter((m) => Number(m.offset) >= fetchOffset && !m.isControlRecord)
      .map((m) => String(m.value))
      .filter((v) => this.visible.has(v))
  }
}

const delivered = (log: SyntheticLog, fetchOffset: number, maxBatches = Number.MAX_SAFE_INTEGER) => {
  const partitionData = log.fetch(fetchOffset, maxBatches)
  const batch = new Batch("topic", String(fetchOffset), partitionData)
  return { actual: batch.messages.map((m) => String(m.value)), expected: log.expected(partitionData, fetchOffset) }
}


const P1 = "1001"
const P2 = "1002"
const P3 = "1003"

describe("kafkajs read_committed filtering (unit, synthetic fetch responses)", () => {
  it("the notes' case: P1 aborting from 10, P2 from 12, fetch from 15 starting with a P2 record", () => {
    const log = new SyntheticLog()
    for (let i = 0; i < 10; i++) log.append(NO_PRODUCER, [`n${i}`]) // 0..9
    log.append(P1, ["p1-a"], { txn: true }) // 10
    log.append(NO_PRODUCER, ["n10"]) // 11
    log.append(P2, ["p2-a"], { txn: true }) // 12
    log.append(P1, ["p1-b"], { txn: true }) // 13
    log.append(NO_PRODUCER, ["n14"]) // 14
    log.append(P2, ["p2-b"], { txn: true }) // 15  <- first record of the fetch
    log.append(P1, ["p1-c"], { txn: true }) // 16
    log.abort(P1) // 17
    log.append(P2, ["p2-c"], { txn: true }) // 18
    log.abort(P2) // 19
    log.append(NO_PRODUCER, ["n20"]) // 20

    const fetch = log.fetch(15, 100)
    expect(fetch.abortedTransactions).toEqual([
      { producerId: P1, firstOffset: "10" },
      { producerId: P2, firstOffset: "12" }
    ])
    expect(delivered(log, 15).actual).toEqual(["n20"])
    for (let s = 0; s < log.endOffset; s++) {
      const { actual, expected } = delivered(log, s)
      expect({ s, delivered: actual }).toEqual({ s, delivered: expected })
    }
  })

  it("aborted transactions listed in the order they ended, not the order they began", () => {
    const log = new SyntheticLog()
    log.append(P1, ["p1-a"], { txn: true }) // 0
    log.append(P2, ["p2-a"], { txn: true }) // 1
    log.append(P1, ["p1-b"], { txn: true }) // 2
    log.abort(P2) // 3: P2 ends first, so the broker lists P2 before P1
    log.append(NO_PRODUCER, ["n4"]) // 4
    log.abort(P1) // 5
    expect(log.fetch(0, 100).abortedTransactions.map((t) => t.producerId)).toEqual([P2, P1])
    expect(delivered(log, 0).actual).toEqual(["n4"])
  })

  it("a producer's ABORT marker ends only that producer's aborted transaction", () => {
    const log = new SyntheticLog()
    log.append(P1, ["p1-a"], { txn: true }) // 0
    log.append(P2, ["p2-a"], { txn: true }) // 1
    log.append(P3, ["p3-c"], { txn: true }) // 2
    log.abort(P1) // 3
    log.append(P2, ["p2-b"], { txn: true }) // 4: still aborted
    log.append(P1, ["p1-c"], { txn: true }) // 5: P1's next transaction, committed
    log.commit(P3) // 6
    log.abort(P2) // 7
    log.commit(P1) // 8
    log.append(P1, ["p1-d"], { txn: true }) // 9: P1 aborts again
    log.append(P3, ["p3-d"], { txn: true }) // 10
    log.abort(P1) // 11
    log.commit(P3) // 12
    for (let s = 0; s < log.endOffset; s++) {
      for (const maxBatches of [1, 2, 3, 100]) {
        const { actual, expected } = delivered(log, s, maxBatches)
        expect({ s, maxBatches, delivered: actual }).toEqual({ s, maxBatches, delivered: expected })
      }
    }
    expect(delivered(log, 0).actual).toEqual(["p3-c", "p1-c", "p3-d"])
  })

  it("a data record keyed 0x00000000 is not an ABORT marker", () => {
    const log = new SyntheticLog()
    log.append(P1, ["p1-a"], { txn: true }) // 0
    log.append(P1, ["p1-b"], { txn: true, key: ABORT_KEY }) // 1: data record, key looks like a marker
    log.append(P1, ["p1-c"], { txn: true }) // 2
    log.abort(P1) // 3
    log.append(P2, ["p2-a"], { txn: true, key: ABORT_KEY }) // 4: committed, key looks like a marker
    log.commit(P2) // 5
    expect(delivered(log, 0).actual).toEqual(["p2-a"])
  })

  it("multi-record batches fetched from the middle", () => {
    const log = new SyntheticLog()
    log.append(P1, ["p1-a", "p1-b", "p1-c"], { txn: true }) // 0..2
    log.append(P2, ["p2-a", "p2-b", "p2-c"], { txn: true }) // 3..5
    log.append(P3, ["p3-a", "p3-b"], { txn: true }) // 6..7
    log.append(P2, ["p2-d", "p2-e"], { txn: true }) // 8..9
    log.abort(P2) // 10
    log.commit(P3) // 11
    log.append(P1, ["p1-d"], { txn: true }) // 12
    log.abort(P1) // 13
    for (let s = 0; s < log.endOffset; s++) {
      const { actual, expected } = delivered(log, s)
      expect({ s, delivered: actual }).toEqual({ s, delivered: expected })
    }
    expect(delivered(log, 4).actual).toEqual(["p3-a", "p3-b"])
  })

  it("randomized interleavings of transactional, idempotent and plain producers, every fetch offset", () => {
    const producers = ["1001", "1002", "1003", "1004"]
    const IDEMPOTENT = "2001" // producer id, never transactional
    for (let seed = 1; seed <= 200; seed++) {
      const random = seeded(seed)
      const log = new SyntheticLog()
      const open = new Set<string>()
      let n = 0
      for (let step = 0; step < 60; step++) {
        const r = random()
        const values = Array.from({ length: 1 + Math.floor(random() * 3) }, () => `v${n++}`)
        if (r < 0.1) log.append(NO_PRODUCER, values)
        else if (r < 0.15) log.append(IDEMPOTENT, values)
        else {
          const producerId = producers[Math.floor(random() * producers.length)] ?? "1001"
          const end = random()
          if (open.has(producerId) && end < 0.35) {
            open.delete(producerId)
            if (end < 0.2) log.abort(producerId)
            else log.commit(producerId)
          } else {
            open.add(producerId)
            log.append(producerId, values, random() < 0.1 ? { txn: true, key: ABORT_KEY } : { txn: true })
          }
        }
      }
      for (const producerId of open) {
        if (random() < 0.5) log.abort(producerId)
        else log.commit(producerId)
      }
      for (let s = 0; s < log.endOffset; s++) {
        for (const maxBatches of [1, 4, Number.MAX_SAFE_INTEGER]) {
          const { actual, expected } = delivered(log, s, maxBatches)
          if (actual.join() !== expected.join()) {
            expect({ seed, s, maxBatches, delivered: actual }).toEqual({ seed, s, maxBatches, delivered: expected })
          }
        }
      }
    }
  })
})

// ---------------------------------------------------------------------------------------------
// Integration: several kafkajs transactional producers, one partition, a real broker.

type TxnActor = "T1" | "T2" | "T3"
type PlainActor = "N" | "I" // N: plain producer (no producer id); I: idempotent, not transactional
type Actor = TxnActor | PlainActor

type Step =
  | { readonly op: "send"; readonly by: Actor; readonly values: ReadonlyArray<string>; readonly key?: Buffer }
  | { readonly op: "commit" | "abort"; readonly by: TxnActor }

const send = (by: Actor, ...values: ReadonlyArray<string>): Step => ({ op: "send", by, values })
const sendKeyed = (by: Actor, key: Buffer, ...values: ReadonlyArray<string>): Step => ({ op: "send", by, values, key })
const commit = (by: TxnActor): Step => ({ op: "commit", by })
const abort = (by: TxnActor): Step => ({ op: "abort", by })

const TXN_ACTORS: ReadonlyArray<TxnActor> = ["T1", "T2", "T3"]

interface LoggedRecord {
  readonly offset: number
  readonly value: string
  readonly by: Actor
  committed: boolean | undefined // undefined while its transaction is open
}

interface Written {
  readonly topic: string
  readonly records: ReadonlyArray<LoggedRecord>
  /** Log end offset: data records plus one control record per ended transaction. */
  readonly endOffset: number
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const waitFor = async (what: string, check: () => Promise<boolean>, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(20)
  }
}

/**
 * The partition's log end offset, control records included, as seen by a read_uncommitted consumer.
 * (admin.fetchTopicOffsets gives the last stable offset, which does not move while another
 * transaction is open.)
 */
const watchLogEnd = async (kafka: Kafka, topic: string) => {
  const consumer = kafka.consumer({ groupId: `${topic}-log-end`, readUncommitted: true, maxWaitTimeInMs: 20 })
  let end = 0
  consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
    // lastOffset counts control records (filtered out of batch.messages, not of the batch)
    if (payload.topic === topic) end = Math.max(end, Number(payload.lastOffset) + 1)
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({ autoCommit: false, eachBatch: async () => {} })
  return { logEnd: () => end, stop: () => consumer.disconnect() }
}

/**
 * Runs `steps` in order, each awaited. After a commit/abort it waits until the control record is
 * in the log (the coordinator writes markers asynchronously after EndTxn), so that the layout of
 * the partition is exactly the order of the steps.
 */
const writeScenario = async (kafka: Kafka, name: string, steps: ReadonlyArray<Step>): Promise<Written> => {
  const topic = `kafkajs-read-committed-${name}-${Date.now()}-${Math.floor(Math.random() * 1e9)}`
  const admin = kafka.admin()
  await admin.connect()
  const producers = new Map<Actor, Producer>()
  let stopWatcher = async () => {}
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 1 }], waitForLeaders: true })
    const retry = { initialRetryTime: 25, maxRetryTime: 500, retries: 30 }
    for (const actor of TXN_ACTORS) {
      producers.set(
        actor,
        kafka.producer({ transactionalId: `${topic}-${actor}`, idempotent: true, maxInFlightRequests: 1, retry })
      )
    }
    producers.set("N", kafka.producer({ retry }))
    producers.set("I", kafka.producer({ idempotent: true, maxInFlightRequests: 1, retry }))
    for (const producer of producers.values()) await producer.connect()

    const producerOf = (actor: Actor): Producer => {
      const producer = producers.get(actor)
      if (producer === undefined) throw new Error(`no producer ${actor}`)
      return producer
    }
    const watcher = await watchLogEnd(kafka, topic)
    stopWatcher = watcher.stop
    const logEndOffset = async () => watcher.logEnd()

    const transactions = new Map<TxnActor, { txn: Transaction; records: Array<LoggedRecord> }>()
    const records: Array<LoggedRecord> = []
    let next = 0
    for (const step of steps) {
      if (step.op === "send") {
        const messages = step.values.map((value) => ({ partition: 0, key: step.key ?? null, value }))
        let sink: { send: Producer["send"] } = producerOf(step.by)
        let txnRecords: Array<LoggedRecord> | undefined
        if (step.by === "T1" || step.by === "T2" || step.by === "T3") {
          let open = transactions.get(step.by)
          if (open === undefined) {
            open = { txn: await producerOf(step.by).transaction(), records: [] }
            transactions.set(step.by, open)
          }
          sink = open.txn
          txnRecords = open.records
        }
        const [metadata] = await sink.send({ topic, acks: -1, messages })
        const baseOffset = Number(metadata?.baseOffset ?? Number.NaN)
        if (baseOffset !== next) throw new Error(`${step.by} ${step.values.join()}: expected offset ${next}, got ${baseOffset}`)
        step.values.forEach((value, i) => {
          const record: LoggedRecord = { offset: baseOffset + i, value, by: step.by, committed: txnRecords ? undefined : true }
          records.push(record)
          txnRecords?.push(record)
        })
        next += step.values.length
      } else {
        const open = transactions.get(step.by)
        if (open === undefined) throw new Error(`${step.by} has no open transaction`)
        transactions.delete(step.by)
        if (step.op === "commit") await open.txn.commit()
        else await open.txn.abort()
        for (const record of open.records) record.committed = step.op === "commit"
        next += 1 // the control record
        await waitFor(`${step.by}'s ${step.op.toUpperCase()} marker at offset ${next - 1}`, async () => (await logEndOffset()) >= next)
        const end = await logEndOffset()
        if (end !== next) throw new Error(`after ${step.by} ${step.op}: log end offset ${end}, expected ${next}`)
      }
    }
    if (transactions.size > 0) throw new Error(`scenario leaves transactions open: ${[...transactions.keys()].join()}`)
    return { topic, records, endOffset: next }
  } finally {
    await stopWatcher()
    for (const producer of producers.values()) await producer.disconnect()
    await admin.disconnect()
  }
}

interface ConsumeOptions {
  readonly label: string
  readonly maxBytes?: number
}

/**
 * One read_committed kafkajs consumer reads the partition from every offset in turn: it seeks to
 * `start`, collects what eachBatch delivers until a batch (possibly one left empty by filtering)
 * reaches the end of the log, then seeks to `start + 1`. The fetch loop is sequential for a single
 * partition (fetch, process, fetch), so each seek takes effect on the next fetch.
 * Returns, for every start offset, the first offset the consumer was handed and the delivered values.
 */
const consumeFromEveryOffset = async (kafka: Kafka, written: Written, options: ConsumeOptions) => {
  const { topic, endOffset } = written
  const consumer: Consumer = kafka.consumer({
    groupId: `${topic}-${options.label}`,
    readUncommitted: false,
    maxWaitTimeInMs: 50,
    ...(options.maxBytes === undefined ? {} : { maxBytes: options.maxBytes, maxBytesPerPartition: options.maxBytes })
  })
  const runs = new Map<number, { readonly firstOffset: string | null; readonly values: ReadonlyArray<string> }>()
  let start = 0
  let firstOffset: string | null | undefined
  let values: Array<string> = []
  let settle: { resolve: () => void; reject: (error: Error) => void } | undefined
  const finished = new Promise<void>((resolve, reject) => {
    settle = { resolve, reject }
  })

  consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
    if (payload.topic !== topic || start >= endOffset) return
    if (firstOffset === undefined) firstOffset = payload.firstOffset
    if (Number(payload.lastOffset) < endOffset - 1) return
    runs.set(start, { firstOffset, values })
    start += 1
    firstOffset = undefined
    values = []
    if (start >= endOffset) settle?.resolve()
    else consumer.seek({ topic, partition: 0, offset: String(start) })
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => settle?.reject(payload.error))

  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        if (batch.topic !== topic) return
        for (const message of batch.messages) values.push(message.value?.toString() ?? "<null>")
      }
    })
    const timeout = setTimeout(
      () => settle?.reject(new Error(`${options.label}: stuck reading from offset ${start} of ${endOffset}`)),
      90_000
    )
    try {
      await finished
    } finally {
      clearTimeout(timeout)
    }
  } finally {
    await consumer.disconnect()
  }
  return runs
}

/** Every deviation from exactly-once delivery of committed records, as readable lines. */
const deviations = (written: Written, label: string, runs: ReadonlyMap<number, { readonly firstOffset: string | null; readonly values: ReadonlyArray<string> }>) => {
  const byValue = new Map(written.records.map((r) => [r.value, r]))
  const problems: Array<string> = []
  for (let start = 0; start < written.endOffset; start++) {
    const run = runs.get(start)
    const where = `${label}, from offset ${start}`
    if (run === undefined) {
      problems.push(`${where}: not consumed`)
      continue
    }
    if (run.firstOffset !== String(start)) problems.push(`${where}: first fetched offset ${run.firstOffset}`)
    const expected = written.records.filter((r) => r.offset >= start && r.committed === true).map((r) => r.value)
    for (const value of run.values) {
      const record = byValue.get(value)
      if (record !== undefined && record.committed === false) {
        problems.push(`${where}: delivered ABORTED ${value} (offset ${record.offset}, ${record.by})`)
      }
    }
    const committedDelivered = run.values.filter((v) => byValue.get(v)?.committed === true)
    if (committedDelivered.join() !== expected.join()) {
      problems.push(`${where}: committed records ${JSON.stringify(committedDelivered)}, expected ${JSON.stringify(expected)}`)
    }
  }
  return problems
}

const checkScenario = async (name: string, steps: ReadonlyArray<Step>) => {
  const kafka = new Kafka({
    clientId: `skein-test-${name}`,
    brokers: [...kafkaBrokers()],
    logLevel: logLevel.NOTHING,
    retry: { initialRetryTime: 50, retries: 10 }
  })
  const written = await writeScenario(kafka, name, steps)
  const problems: Array<string> = []
  for (const options of [{ label: "default fetch size" }, { label: "one batch per fetch", maxBytes: 1 }]) {
    problems.push(...deviations(written, options.label, await consumeFromEveryOffset(kafka, written, options)))
  }
  return { written, problems }
}

describe("kafkajs read_committed against a broker", () => {
  // Stock kafkajs leaks here, among others: from offset 0 (the broker lists T2's aborted
  // transaction before T1's, as T2 ended first, so T1's first record is not recognised) and from
  // offset 16 (the notes' case: T1 aborting from 0, T3 from 14, the fetch starts with a T3 record
  // and only T1 is activated).
  it("overlapping aborted transactions of several producers are never delivered", async () => {
    const { written, problems } = await checkScenario("overlapping", [
      send("T1", "t1-a0"), //                     0   T1 aborted txn begins
      send("T2", "t2-a0"), //                     1   T2 aborted txn begins
      send("N", "n0"), //                         2
      send("T3", "t3-c0"), //                     3   T3 committed txn begins
      send("T2", "t2-a1", "t2-a2"), //            4-5 (one batch)
      send("T1", "t1-a1"), //                     6
      send("I", "i0"), //                         7   idempotent, not transactional
      send("T3", "t3-c1"), //                     8
      abort("T2"), //                             9   T2 ends before T1 although it began after it
      send("T1", "t1-a2"), //                     10
      send("N", "n1"), //                         11
      commit("T3"), //                            12
      send("T2", "t2-c0"), //                     13  T2's next txn, committed
      send("T3", "t3-a0"), //                     14  T3 aborted txn begins, overlapping T1's
      send("T1", "t1-a3"), //                     15
      send("T3", "t3-a1", "t3-a2"), //            16-17
      abort("T1"), //                             18
      send("T2", "t2-c1"), //                     19
      send("T3", "t3-a3"), //                     20
      commit("T2"), //                            21
      send("N", "n2"), //                         22
      abort("T3"), //                             23
      send("T1", "t1-c0"), //                     24
      send("T3", "t3-c2"), //                     25
      commit("T1"), //                            26
      commit("T3") //                             27
    ])
    expect(written.endOffset).toBe(28)
    expect(written.records.filter((r) => r.committed === true).map((r) => r.value)).toEqual([
      "n0", "t3-c0", "i0", "t3-c1", "n1", "t2-c0", "t2-c1", "n2", "t1-c0", "t3-c2"
    ])
    expect(problems).toEqual([])
  })

  it("a data record keyed like an ABORT marker does not end an aborted transaction", async () => {
    const { problems } = await checkScenario("marker-key", [
      send("T1", "t1-a0"),
      sendKeyed("T1", Buffer.from([0, 0, 0, 0]), "t1-a1"),
      send("T2", "t2-c0"),
      send("T1", "t1-a2"),
      abort("T1"),
      commit("T2")
    ])
    expect(problems).toEqual([])
  })
})
