/**
 * A raw Kafka reader for the verifier: the Kafka wire protocol spoken over
 * `node:net` (Metadata v4, Fetch v4, ListOffsets v1 for where a partition
 * starts), and the record batch format v2 parsed
 * by hand. It shares no code with Skein or kafkajs, so a bug there cannot
 * hide itself here.
 *
 * Transactions are resolved from the log itself, not from the broker's
 * aborted-transaction index: a partition is read uncommitted up to its high
 * watermark, every transactional batch is held back per producer id until
 * that producer's next control marker in the partition decides it (COMMIT:
 * the records count, ABORT: they are dropped). Whatever is still undecided at
 * the end belongs to an open transaction.
 */
import { Data, Duration, Effect, Schedule } from "effect"
import type { Scope } from "effect"
import * as Net from "node:net"
import * as Zlib from "node:zlib"

/** A failure of the raw reader. */
export class WireError extends Data.TaggedError("WireError")<{ readonly message: string }> {}

const fail = (message: string) => new WireError({ message })

// ---------------------------------------------------------------------------
// encoding

class Writer {
  private readonly chunks: Array<Buffer> = []
  int8(n: number) {
    const b = Buffer.alloc(1)
    b.writeInt8(n)
    this.chunks.push(b)
    return this
  }
  int16(n: number) {
    const b = Buffer.alloc(2)
    b.writeInt16BE(n)
    this.chunks.push(b)
    return this
  }
  int32(n: number) {
    const b = Buffer.alloc(4)
    b.writeInt32BE(n)
    this.chunks.push(b)
    return this
  }
  int64(n: bigint) {
    const b = Buffer.alloc(8)
    b.writeBigInt64BE(n)
    this.chunks.push(b)
    return this
  }
  string(s: string | null) {
    if (s === null) return this.int16(-1)
    const b = Buffer.from(s, "utf8")
    this.int16(b.length)
    this.chunks.push(b)
    return this
  }
  array<A>(items: ReadonlyArray<A>, f: (w: Writer, item: A) => void) {
    this.int32(items.length)
    for (const item of items) f(this, item)
    return this
  }
  bool(b: boolean) {
    return this.int8(b ? 1 : 0)
  }
  build(): Buffer {
    return Buffer.concat(this.chunks)
  }
}

class Reader {
  offset = 0
  constructor(readonly buffer: Buffer) {}
  get remaining() {
    return this.buffer.length - this.offset
  }
  private need(n: number) {
    if (this.offset + n > this.buffer.length) throw fail(`short read: need ${n} at ${this.offset}/${this.buffer.length}`)
  }
  int8() {
    this.need(1)
    const v = this.buffer.readInt8(this.offset)
    this.offset += 1
    return v
  }
  int16() {
    this.need(2)
    const v = this.buffer.readInt16BE(this.offset)
    this.offset += 2
    return v
  }
  int32() {
    this.need(4)
    const v = this.buffer.readInt32BE(this.offset)
    this.offset += 4
    return v
  }
  uint32() {
    this.need(4)
    const v = this.buffer.readUInt32BE(this.offset)
    this.offset += 4
    return v
  }
  int64() {
    this.need(8)
    const v = this.buffer.readBigInt64BE(this.offset)
    this.offset += 8
    return v
  }
  bytes(n: number): Buffer {
    this.need(n)
    const v = this.buffer.subarray(this.offset, this.offset + n)
    this.offset += n
    return v
  }
  string(): string | null {
    const n = this.int16()
    return n < 0 ? null : this.bytes(n).toString("utf8")
  }
  array<A>(f: (r: Reader) => A): Array<A> {
    const n = this.int32()
    const out: Array<A> = []
    for (let i = 0; i < n; i++) out.push(f(this))
    return out
  }
  bool() {
    return this.int8() !== 0
  }
  /** Unsigned LEB128 then zigzag-decoded (Kafka's varint / varlong, as a number). */
  varint(): number {
    let result = 0n
    let shift = 0n
    for (;;) {
      this.need(1)
      const byte = this.buffer[this.offset++] ?? 0
      result |= BigInt(byte & 0x7f) << shift
      if ((byte & 0x80) === 0) break
      shift += 7n
      if (shift > 63n) throw fail("varint too long")
    }
    return Number((result >> 1n) ^ -(result & 1n))
  }
}

// ---------------------------------------------------------------------------
// connections

interface Pending {
  readonly resolve: (body: Buffer) => void
  readonly reject: (error: Error) => void
}

/** One broker connection: pipelined requests matched to responses by correlation id. */
class Connection {
  private correlation = 0
  private readonly pending = new Map<number, Pending>()
  private buffered: Buffer = Buffer.alloc(0)
  private closed: Error | undefined

  private constructor(private readonly socket: Net.Socket) {
    socket.on("data", (data: Buffer) => this.onData(data))
    socket.on("error", (error) => this.fail(error))
    socket.on("close", () => this.fail(fail("connection closed")))
  }

  static open(host: string, port: number, timeoutMs: number): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const socket = Net.connect({ host, port })
      const timer = setTimeout(() => {
        socket.destroy()
        reject(fail(`connect ${host}:${port} timed out`))
      }, timeoutMs)
      socket.once("connect", () => {
        clearTimeout(timer)
        resolve(new Connection(socket))
      })
      socket.once("error", (error) => {
        clearTimeout(timer)
        reject(error)
      })
    })
  }

  private fail(error: Error) {
    if (this.closed !== undefined) return
    this.closed = error
    for (const p of this.pending.values()) p.reject(error)
    this.pending.clear()
  }

  private onData(data: Buffer) {
    this.buffered = this.buffered.length === 0 ? data : Buffer.concat([this.buffered, data])
    while (this.buffered.length >= 4) {
      const size = this.buffered.readInt32BE(0)
      if (this.buffered.length < 4 + size) return
      const frame = this.buffered.subarray(4, 4 + size)
      this.buffered = this.buffered.subarray(4 + size)
      const id = frame.readInt32BE(0)
      const waiter = this.pending.get(id)
      this.pending.delete(id)
      waiter?.resolve(frame.subarray(4))
    }
  }

  request(apiKey: number, apiVersion: number, body: Buffer, timeoutMs: number): Promise<Buffer> {
    if (this.closed !== undefined) return Promise.reject(this.closed)
    const id = ++this.correlation
    const header = new Writer().int16(apiKey).int16(apiVersion).int32(id).string("skein-chaos-verifier").build()
    const size = Buffer.alloc(4)
    size.writeInt32BE(header.length + body.length)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id)
        reject(fail(`request ${apiKey} v${apiVersion} timed out`))
      }, timeoutMs)
      this.pending.set(id, {
        resolve: (b) => {
          clearTimeout(timer)
          resolve(b)
        },
        reject: (e) => {
          clearTimeout(timer)
          reject(e)
        }
      })
      this.socket.write(Buffer.concat([size, header, body]))
    })
  }

  close() {
    this.fail(fail("closed"))
    this.socket.destroy()
  }
}

// ---------------------------------------------------------------------------
// protocol messages

const API_FETCH = 1
const API_LIST_OFFSETS = 2
const API_METADATA = 3
const OFFSET_OUT_OF_RANGE = 1

interface PartitionMetadata {
  readonly partition: number
  readonly leader: number
  readonly error: number
}

interface Metadata {
  readonly brokers: ReadonlyMap<number, { readonly host: string; readonly port: number }>
  readonly topics: ReadonlyMap<string, { readonly error: number; readonly partitions: ReadonlyArray<PartitionMetadata> }>
}

const metadataRequest = (topics: ReadonlyArray<string>) =>
  new Writer().array(topics, (w, t) => w.string(t)).bool(false).build()

const parseMetadata = (body: Buffer): Metadata => {
  const r = new Reader(body)
  r.int32() // throttle
  const brokers = new Map<number, { host: string; port: number }>()
  r.array((b) => {
    const id = b.int32()
    const host = b.string() ?? ""
    const port = b.int32()
    b.string() // rack
    brokers.set(id, { host, port })
  })
  r.string() // cluster id
  r.int32() // controller
  const topics = new Map<string, { error: number; partitions: Array<PartitionMetadata> }>()
  r.array((t) => {
    const error = t.int16()
    const name = t.string() ?? ""
    t.bool() // internal
    const partitions = t.array((p) => {
      const perror = p.int16()
      const partition = p.int32()
      const leader = p.int32()
      p.array((x) => x.int32()) // replicas
      p.array((x) => x.int32()) // isr
      return { partition, leader, error: perror }
    })
    partitions.sort((a, b) => a.partition - b.partition)
    topics.set(name, { error, partitions })
  })
  return { brokers, topics }
}

/** `READ_UNCOMMITTED` (0) or `READ_COMMITTED` (1). */
export type Isolation = 0 | 1

interface FetchedPartition {
  readonly error: number
  readonly highWatermark: bigint
  readonly lastStableOffset: bigint
  readonly records: Buffer | null
}

const fetchRequest = (topic: string, partition: number, offset: bigint, isolation: Isolation, maxBytes: number) =>
  new Writer()
    .int32(-1) // replica id
    .int32(100) // max wait
    .int32(0) // min bytes
    .int32(maxBytes)
    .int8(isolation)
    .array([topic], (w, t) =>
      w.string(t).array([partition], (pw, p) => pw.int32(p).int64(offset).int32(maxBytes)))
    .build()

const parseFetch = (body: Buffer): FetchedPartition => {
  const r = new Reader(body)
  r.int32() // throttle
  const topics = r.array((t) => {
    t.string()
    return t.array((p) => {
      p.int32() // partition
      const error = p.int16()
      const highWatermark = p.int64()
      const lastStableOffset = p.int64()
      const aborted = p.int32()
      for (let i = 0; i < aborted; i++) {
        p.int64()
        p.int64()
      }
      const size = p.int32()
      const records = size < 0 ? null : p.bytes(size)
      return { error, highWatermark, lastStableOffset, records }
    })
  })
  const found = topics[0]?.[0]
  if (found === undefined) throw fail("fetch response without the partition")
  return found
}

/** ListOffsets v1 for the partition's earliest offset (timestamp -2): where its log starts. */
const earliestRequest = (topic: string, partition: number) =>
  new Writer()
    .int32(-1) // replica id
    .array([topic], (w, t) => w.string(t).array([partition], (pw, p) => pw.int32(p).int64(-2n)))
    .build()

const parseListOffsets = (body: Buffer): { readonly error: number; readonly offset: bigint } => {
  const r = new Reader(body)
  const topics = r.array((t) => {
    t.string()
    return t.array((p) => {
      p.int32() // partition
      const error = p.int16()
      p.int64() // timestamp
      const offset = p.int64()
      return { error, offset }
    })
  })
  const found = topics[0]?.[0]
  if (found === undefined) throw fail("list offsets response without the partition")
  return found
}

// ---------------------------------------------------------------------------
// record batches

/** One data record as stored in the log. */
export interface LogRecord {
  readonly offset: number
  /** The record's timestamp (CreateTime; the batch's max timestamp for LogAppendTime). */
  readonly timestamp: number
  readonly key: string | null
  readonly value: string | null
}

/** A record batch (v2) as stored in the log. */
export interface LogBatch {
  readonly baseOffset: number
  readonly lastOffset: number
  readonly producerId: bigint
  readonly transactional: boolean
  readonly control: boolean
  /** For a control batch: 0 ABORT, 1 COMMIT. */
  readonly controlType: number
  readonly records: ReadonlyArray<LogRecord>
}

const parseRecords = (r: Reader, count: number, baseOffset: number, timestampOf: (delta: number) => number): Array<{
  offset: number
  timestamp: number
  key: Buffer | null
  value: Buffer | null
}> => {
  const out: Array<{ offset: number; timestamp: number; key: Buffer | null; value: Buffer | null }> = []
  for (let i = 0; i < count; i++) {
    const length = r.varint()
    const end = r.offset + length
    r.int8() // attributes
    const timestamp = timestampOf(r.varint())
    const offsetDelta = r.varint()
    const keyLength = r.varint()
    const key = keyLength < 0 ? null : r.bytes(keyLength)
    const valueLength = r.varint()
    const value = valueLength < 0 ? null : r.bytes(valueLength)
    const headers = r.varint()
    for (let h = 0; h < headers; h++) {
      const hk = r.varint()
      r.bytes(Math.max(0, hk))
      const hv = r.varint()
      if (hv > 0) r.bytes(hv)
    }
    if (r.offset !== end) throw fail(`record length mismatch at offset ${baseOffset + offsetDelta}`)
    out.push({ offset: baseOffset + offsetDelta, timestamp, key, value })
  }
  return out
}

/** Parses the complete v2 batches of a fetch response's records (a trailing partial batch is ignored). */
export const parseBatches = (data: Buffer): Array<LogBatch> => {
  const batches: Array<LogBatch> = []
  let position = 0
  while (data.length - position >= 12) {
    const baseOffset = Number(data.readBigInt64BE(position))
    const batchLength = data.readInt32BE(position + 8)
    if (data.length - position < 12 + batchLength) break
    const r = new Reader(data.subarray(position + 12, position + 12 + batchLength))
    position += 12 + batchLength
    r.int32() // partition leader epoch
    const magic = r.int8()
    if (magic !== 2) throw fail(`unsupported record batch magic ${magic} at offset ${baseOffset}`)
    r.uint32() // crc
    const attributes = r.int16()
    const lastOffsetDelta = r.int32()
    const baseTimestamp = Number(r.int64())
    const maxTimestamp = Number(r.int64())
    const producerId = r.int64()
    r.int16() // producer epoch
    r.int32() // base sequence
    const count = r.int32()
    const compression = attributes & 0x07
    const transactional = (attributes & 0x10) !== 0
    const control = (attributes & 0x20) !== 0
    let body: Reader
    if (compression === 0) body = r
    else if (compression === 1) body = new Reader(Zlib.gunzipSync(r.bytes(r.remaining)))
    else throw fail(`unsupported compression codec ${compression} at offset ${baseOffset}`)
    const logAppendTime = (attributes & 0x08) !== 0
    const raw = parseRecords(body, count, baseOffset, (delta) => (logAppendTime ? maxTimestamp : baseTimestamp + delta))
    let controlType = -1
    if (control) {
      const key = raw[0]?.key
      if (key === null || key === undefined || key.length < 4) throw fail(`control batch without a key at ${baseOffset}`)
      controlType = key.readInt16BE(2)
    }
    batches.push({
      baseOffset,
      lastOffset: baseOffset + lastOffsetDelta,
      producerId,
      transactional,
      control,
      controlType,
      records: control ? [] : raw.map((x) => ({
        offset: x.offset,
        timestamp: x.timestamp,
        key: x.key === null ? null : x.key.toString("utf8"),
        value: x.value === null ? null : x.value.toString("utf8")
      }))
    })
  }
  return batches
}

/** A partition as the log says it is: its committed records and its transactions. */
export interface PartitionLog {
  readonly topic: string
  readonly partition: number
  readonly highWatermark: number
  readonly lastStableOffset: number
  /** Non-transactional records and records of committed transactions, in offset order. */
  readonly records: ReadonlyArray<LogRecord>
  readonly committedTransactions: number
  readonly abortedTransactions: number
  /** Records dropped because their transaction aborted. */
  readonly abortedRecords: number
  /** Producers with transactional records not yet decided by a marker (open transactions). */
  readonly openTransactions: number
  /** How the transaction of the first transactional batch read ended (`none`: no transactional batch). */
  readonly firstTransaction: "committed" | "aborted" | "open" | "none"
}

/** Resolves transactions from the log: committed records in offset order, plus counts. */
export const resolveTransactions = (
  topic: string,
  partition: number,
  batches: ReadonlyArray<LogBatch>,
  ends: { readonly highWatermark: number; readonly lastStableOffset: number }
): PartitionLog => {
  // Held back per producer until its marker; committed batches are released in offset order below.
  const open = new Map<bigint, Array<LogBatch>>()
  const kept: Array<LogBatch> = []
  let committedTransactions = 0
  let abortedTransactions = 0
  let abortedRecords = 0
  let firstProducer: bigint | undefined
  let firstTransaction: PartitionLog["firstTransaction"] = "none"
  for (const batch of batches) {
    if (batch.control) {
      const held = open.get(batch.producerId) ?? []
      open.delete(batch.producerId)
      if (batch.producerId === firstProducer && firstTransaction === "open") {
        firstTransaction = batch.controlType === 1 ? "committed" : "aborted"
      }
      if (batch.controlType === 1) {
        committedTransactions++
        kept.push(...held)
      } else {
        abortedTransactions++
        abortedRecords += held.reduce((n, b) => n + b.records.length, 0)
      }
    } else if (batch.transactional) {
      if (firstProducer === undefined) {
        firstProducer = batch.producerId
        firstTransaction = "open"
      }
      const held = open.get(batch.producerId) ?? []
      held.push(batch)
      open.set(batch.producerId, held)
    } else {
      kept.push(batch)
    }
  }
  kept.sort((a, b) => a.baseOffset - b.baseOffset)
  return {
    topic,
    partition,
    highWatermark: ends.highWatermark,
    lastStableOffset: ends.lastStableOffset,
    records: kept.flatMap((b) => b.records),
    committedTransactions,
    abortedTransactions,
    abortedRecords,
    openTransactions: open.size,
    firstTransaction
  }
}

// ---------------------------------------------------------------------------
// the client

/** End offsets of a partition: high watermark and last stable offset. */
export interface Ends {
  readonly partition: number
  readonly highWatermark: number
  readonly lastStableOffset: number
}

export interface WireClient {
  /** Partition count of a topic. */
  readonly partitions: (topic: string) => Effect.Effect<number, WireError>
  /** High watermark and last stable offset of every partition of a topic. */
  readonly ends: (topic: string) => Effect.Effect<ReadonlyArray<Ends>, WireError>
  /** Reads every partition of a topic up to its high watermark and resolves its transactions. */
  readonly read: (topic: string) => Effect.Effect<ReadonlyArray<PartitionLog>, WireError>
  /** Reads one partition from `offset` up to its high watermark and resolves its transactions. */
  readonly readFrom: (topic: string, partition: number, offset: number) => Effect.Effect<PartitionLog, WireError>
}

const REQUEST_TIMEOUT_MS = 30_000
const NO_ERROR = 0

const toWireError = (cause: unknown): WireError =>
  cause instanceof WireError ? cause : fail(cause instanceof Error ? cause.message : String(cause))

/** A raw client for `brokers`, closed with its scope. */
export const make = (brokers: ReadonlyArray<string>): Effect.Effect<WireClient, never, Scope.Scope> =>
  Effect.gen(function*() {
    const connections = new Map<string, Promise<Connection>>()
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        for (const c of connections.values()) await c.then((x) => x.close(), () => undefined)
        connections.clear()
      })
    )
    const connect = (address: string): Promise<Connection> => {
      const existing = connections.get(address)
      if (existing !== undefined) return existing
      const [host = "127.0.0.1", port = "9092"] = address.split(":")
      const opened = Connection.open(host, Number(port), 10_000)
      connections.set(address, opened)
      opened.catch(() => connections.delete(address))
      return opened
    }
    const call = async (address: string, apiKey: number, version: number, body: Buffer) => {
      const connection = await connect(address)
      try {
        return await connection.request(apiKey, version, body, REQUEST_TIMEOUT_MS)
      } catch (error) {
        connections.delete(address)
        connection.close()
        throw error
      }
    }

    /** Metadata from the first broker that answers. */
    const metadata = async (topics: ReadonlyArray<string>): Promise<Metadata> => {
      let last: unknown = fail("no brokers")
      for (const address of brokers) {
        try {
          return parseMetadata(await call(address, API_METADATA, 4, metadataRequest(topics)))
        } catch (error) {
          last = error
        }
      }
      throw last
    }

    const topicMetadata = async (topic: string) => {
      const meta = await metadata([topic])
      const found = meta.topics.get(topic)
      if (found === undefined || found.error !== NO_ERROR) {
        throw fail(`metadata of ${topic}: error ${found?.error ?? "missing"}`)
      }
      return { meta, partitions: found.partitions }
    }

    const leaderAddress = (meta: Metadata, p: PartitionMetadata) => {
      const broker = meta.brokers.get(p.leader)
      if (p.error !== NO_ERROR || broker === undefined) {
        throw fail(`partition ${p.partition} has no leader (error ${p.error})`)
      }
      return `${broker.host}:${broker.port}`
    }

    const fetchRaw = async (topic: string, partition: number, offset: bigint, isolation: Isolation, maxBytes: number) => {
      const { meta, partitions } = await topicMetadata(topic)
      const p = partitions.find((x) => x.partition === partition)
      if (p === undefined) throw fail(`${topic} has no partition ${partition}`)
      return parseFetch(
        await call(leaderAddress(meta, p), API_FETCH, 4, fetchRequest(topic, partition, offset, isolation, maxBytes))
      )
    }

    /** Where the partition's log starts (above 0 once records were deleted: a purged repartition topic). */
    const earliestOnce = async (topic: string, partition: number): Promise<bigint> => {
      const { meta, partitions } = await topicMetadata(topic)
      const p = partitions.find((x) => x.partition === partition)
      if (p === undefined) throw fail(`${topic} has no partition ${partition}`)
      const result = parseListOffsets(await call(leaderAddress(meta, p), API_LIST_OFFSETS, 1, earliestRequest(topic, partition)))
      if (result.error !== NO_ERROR) throw fail(`earliest offset of ${topic}-${partition}: error ${result.error}`)
      return result.offset
    }

    /**
     * A fetch at `offset`, or at the log's start when the records before it were deleted (a
     * purged repartition topic); `from` is where it read.
     */
    const fetchOnce = async (topic: string, partition: number, offset: bigint, isolation: Isolation, maxBytes: number) => {
      let from = offset
      let result = await fetchRaw(topic, partition, from, isolation, maxBytes)
      if (result.error === OFFSET_OUT_OF_RANGE) {
        const earliest = await earliestOnce(topic, partition)
        if (earliest > offset) {
          from = earliest
          result = await fetchRaw(topic, partition, from, isolation, maxBytes)
        }
      }
      if (result.error !== NO_ERROR) throw fail(`fetch ${topic}-${partition}@${from}: error ${result.error}`)
      return { ...result, from }
    }

    // Leaders move while brokers restart: retry a while.
    const retrying = <A>(what: string, f: () => Promise<A>): Effect.Effect<A, WireError> =>
      Effect.tryPromise({ try: f, catch: toWireError }).pipe(
        Effect.retry(Schedule.spaced(Duration.millis(500)).pipe(Schedule.intersect(Schedule.recurs(60)))),
        Effect.mapError((e) => fail(`${what}: ${e.message}`))
      )

    const partitionsOf = (topic: string) => retrying(`partitions of ${topic}`, async () => (await topicMetadata(topic)).partitions)

    const ends = (topic: string) =>
      Effect.flatMap(partitionsOf(topic), (partitions) =>
        Effect.forEach(partitions, (p) =>
          retrying(`ends of ${topic}-${p.partition}`, async () => {
            const r = await fetchOnce(topic, p.partition, 0n, 0, 1)
            return {
              partition: p.partition,
              highWatermark: Number(r.highWatermark),
              lastStableOffset: Number(r.lastStableOffset)
            }
          })))

    const readPartition = (topic: string, partition: number, from: number): Effect.Effect<PartitionLog, WireError> =>
      Effect.gen(function*() {
        const batches: Array<LogBatch> = []
        let offset = BigInt(from)
        let hw = -1n
        let lso = -1n
        for (;;) {
          const at = offset
          const result = yield* retrying(`fetch ${topic}-${partition}@${at}`, () =>
            fetchOnce(topic, partition, at, 0, 8 * 1024 * 1024))
          // Records before the log's start were deleted (a purged repartition topic): read from there.
          offset = result.from
          if (hw < 0n) {
            hw = result.highWatermark
            lso = result.lastStableOffset
          }
          if (offset >= hw) break
          const parsed = result.records === null ? [] : yield* Effect.try({
            try: () => parseBatches(result.records ?? Buffer.alloc(0)),
            catch: toWireError
          })
          for (const batch of parsed) {
            if (BigInt(batch.lastOffset) < offset) continue
            if (BigInt(batch.lastOffset) >= hw) break
            batches.push(batch)
            offset = BigInt(batch.lastOffset) + 1n
          }
          if (offset >= hw) break
          if (parsed.length === 0 || offset === at) {
            return yield* fail(`no progress reading ${topic}-${partition} at ${at} (high watermark ${hw})`)
          }
        }
        return resolveTransactions(topic, partition, batches, {
          highWatermark: Number(hw),
          lastStableOffset: Number(lso)
        })
      })

    return {
      partitions: (topic) => Effect.map(partitionsOf(topic), (p) => p.length),
      ends,
      read: (topic) =>
        Effect.flatMap(partitionsOf(topic), (partitions) =>
          Effect.forEach(partitions, (p) => readPartition(topic, p.partition, 0), { concurrency: 4 })),
      readFrom: readPartition
    }
  })
