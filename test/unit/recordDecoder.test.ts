/**
 * The record decoder of Skein's kafkajs patch decodes every record as kafkajs does.
 *
 * The patch (`patches/kafkajs+2.2.4.patch`: `protocol/recordBatch/record/v0/decoder.js`, the hot
 * path of every fetch: input records and changelog restores) computes offsets and timestamps with
 * numbers instead of BigInt-backed Longs when they are exact as numbers, and skips the headers'
 * array for a record without headers; the batch decoder (`protocol/recordBatch/v0/decoder.js`)
 * decodes each record in place from the batch's buffer; a fetched batch (`consumer/batch.js`)
 * filters its messages by offset with numbers. kafkajs as published and as patched run side by side (two
 * private copies, `test/helpers/kafkajsCopies.ts`) on records written by kafkajs's own encoder.
 */
import { assert, describe, it } from "@effect/vitest"
import type { KafkajsCopy } from "../helpers/kafkajsCopies.ts"
import { sideBySide } from "../helpers/kafkajsSideBySide.ts"
import { seeded } from "../helpers/seeded.ts"

type RecordDecoder = (decoder: unknown, batchContext: Record<string, unknown>) => unknown
interface Codecs {
  readonly decode: (bytes: Buffer, batchContext: Record<string, unknown>) => unknown
}

const isFunction = (value: unknown): value is (...args: ReadonlyArray<unknown>) => unknown => typeof value === "function"

const load = <A>(copy: KafkajsCopy, file: string, what: string): A => {
  const loaded = copy.load(file)
  if (!isFunction(loaded)) throw new Error(`${file} exports no ${what}`)
  return loaded as unknown as A
}

/** Decodes one record's bytes (its length prefix included) as the batch decoder does. */
const codecsOf = (copy: KafkajsCopy): Codecs => {
  const Decoder = load<new(buffer: Buffer) => { readVarIntBytes: () => Buffer }>(copy, "src/protocol/decoder.js", "class")
  const decodeRecord = load<RecordDecoder>(copy, "src/protocol/recordBatch/record/v0/decoder.js", "function")
  return { decode: (bytes, batchContext) => decodeRecord(new Decoder(new Decoder(bytes).readVarIntBytes()), batchContext) }
}

/**
 * A decoded value with each fetched message as a plain object of kafkajs's fields: the patch's
 * messages read their key and value from the batch's buffer when asked for (getters of a class),
 * kafkajs's hold them. A patched message's `keySize` and `valueSize` must be its key's and value's
 * lengths, and its spans (`batchBuffer`, `keyStart`, `keyLength`, ...) its key's and value's bytes.
 */
const messagesAsFields = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(messagesAsFields)
  if (typeof value !== "object" || value === null || Buffer.isBuffer(value)) return value
  if ("isControlRecord" in value && "batchContext" in value) {
    const m = value as Record<string, unknown>
    const key = m["key"] as Buffer | null
    const val = m["value"] as Buffer | null
    if ("keySize" in value) {
      assert.strictEqual(m["keySize"], key?.length ?? 0, "keySize")
      assert.strictEqual(m["valueSize"], val?.length ?? 0, "valueSize")
      assert.strictEqual(m["offsetNumber"], Number(m["offset"]), "offsetNumber")
      // Where the key and value lie, as Skein's fetched records keep them: the same bytes (-1: none).
      const buffer = m["batchBuffer"] as Buffer
      const span = (start: string, length: string) =>
        m[length] === -1 ? null : buffer.subarray(m[start] as number, (m[start] as number) + (m[length] as number))
      assert.deepStrictEqual(span("keyStart", "keyLength"), key, "keyStart, keyLength")
      assert.deepStrictEqual(span("valueStart", "valueLength"), val, "valueStart, valueLength")
    }
    return {
      magicByte: m["magicByte"],
      attributes: m["attributes"],
      timestamp: m["timestamp"],
      offset: m["offset"],
      key,
      value: val,
      headers: { ...(m["headers"] as object) },
      isControlRecord: m["isControlRecord"],
      batchContext: m["batchContext"]
    }
  }
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, messagesAsFields(v)]))
}

/** What a decoding gave, its records or its error, as a value to compare. */
const attempt = (decode: () => unknown): unknown => {
  try {
    return { ok: messagesAsFields(decode()) }
  } catch (error) {
    return { error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) }
  }
}

const copies = sideBySide()


describe("kafkajs patch: record decoder", () => {
  it("decodes offsets, timestamps, keys, values and headers as kafkajs does", () => {
    const encodeRecord = load<(record: Record<string, unknown>) => { buffer: Buffer }>(
      copies.original,
      "src/protocol/recordBatch/record/v0/index.js",
      "function"
    )
    const Long = copies.original.load("src/utils/long.js") as { fromString: (s: string) => unknown }
    const original = codecsOf(copies.original)
    const patched = codecsOf(copies.patched)
    const seed = 21
    const next = seeded(seed)
    const pick = <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(next() * xs.length)]!
    // Offsets and timestamps as numbers are exact below 2^53: around it, the patch takes kafkajs's path.
    const firstOffsets = ["0", "1", "35909", "4294967296", "9007199254740000", "9007199254740991", "9007199254740993", "9223372036854775000"]
    const firstTimestamps = ["-1", "0", "1796208721285", "9007199254740990", "9223372036854775000"]
    const deltas: ReadonlyArray<unknown> = [
      0, 1, -1, 63, 64, -64, -65, 8191, 123_456, -123_456, 2 ** 31 - 1, -(2 ** 31),
      Long.fromString("281474976710655"), Long.fromString("-281474976710656"), Long.fromString("281474976710656"),
      Long.fromString("-281474976710657"), Long.fromString("9007199254740993"), Long.fromString("-9223372036854775000")
    ]
    const headerSets: ReadonlyArray<Record<string, unknown>> = [
      {},
      { trace: Buffer.from("abc") },
      { a: Buffer.from("1"), b: [Buffer.from("2"), Buffer.from("3")] },
      { ["__proto__"]: Buffer.from("x"), constructor: Buffer.from("y") },
      { e: Buffer.alloc(0) }
    ]
    const bytes = (length: number) => Buffer.from(Array.from({ length }, () => Math.floor(next() * 256)))
    let compared = 0
    for (let i = 0; i < 3_000; i++) {
      const record = {
        offsetDelta: pick([0, 1, 63, 64, 1_000, 2 ** 20, Math.floor(next() * 2 ** 31)]),
        timestampDelta: pick(deltas),
        key: next() < 0.1 ? null : bytes(Math.floor(next() * 40)),
        value: next() < 0.1 ? null : bytes(Math.floor(next() * 300)),
        headers: pick(headerSets)
      }
      const encoded = encodeRecord(record).buffer
      const context = {
        firstOffset: pick(firstOffsets),
        firstTimestamp: pick(firstTimestamps),
        magicByte: 2,
        isControlBatch: next() < 0.1,
        timestampType: next() < 0.2 ? 1 : 0,
        maxTimestamp: pick(["1796208721999", "0"])
      }
      assert.deepStrictEqual(
        messagesAsFields(patched.decode(encoded, context)),
        messagesAsFields(original.decode(encoded, context)),
        `record ${i} (seed ${seed})`
      )
      compared++
    }
    assert.strictEqual(compared, 3_000)
  })
})

describe("kafkajs patch: a damaged record", () => {
  it("the same record or the same error as kafkajs when its timestamp delta or offset delta is damaged", () => {
    const encodeRecord = load<(record: Record<string, unknown>) => { buffer: Buffer }>(
      copies.original,
      "src/protocol/recordBatch/record/v0/index.js",
      "function"
    )
    const original = codecsOf(copies.original)
    const patched = codecsOf(copies.patched)
    const seed = 9
    const next = seeded(seed)
    const context = { firstOffset: "700635774", firstTimestamp: "1796208721285", magicByte: 2, timestampType: 0 }
    for (let i = 0; i < 2_000; i++) {
      const encoded = Buffer.from(encodeRecord({
        offsetDelta: Math.floor(next() * 5_000),
        timestampDelta: Math.floor(next() * 100),
        key: Buffer.from(`key-${i}`),
        value: Buffer.from(`value-${i}`)
      }).buffer)
      // After the length (1 byte here) and the attributes: the timestamp delta and offset delta varints.
      const at = 2 + Math.floor(next() * 5)
      encoded[at] = Math.floor(next() * 256)
      if (next() < 0.5) encoded[at + 1] = 0x80 | Math.floor(next() * 128)
      assert.deepStrictEqual(
        attempt(() => patched.decode(encoded, context)),
        attempt(() => original.decode(encoded, context)),
        `record ${i}, damaged at ${at} (seed ${seed})`
      )
    }
  })
})

describe("kafkajs patch: record batch decoder", () => {
  const batchCodecsOf = (copy: KafkajsCopy) => {
    const Decoder = load<new(buffer: Buffer) => unknown>(copy, "src/protocol/decoder.js", "class")
    const decodeBatch = load<(decoder: unknown) => Promise<unknown>>(copy, "src/protocol/recordBatch/v0/decoder.js", "function")
    return (bytes: Buffer) => decodeBatch(new Decoder(bytes))
  }

  it("decodes whole batches as kafkajs does", async () => {
    const Record = load<(record: Record<string, unknown>) => unknown>(copies.original, "src/protocol/recordBatch/record/v0/index.js", "function")
    const { RecordBatch } = copies.original.load("src/protocol/recordBatch/v0/index.js") as {
      readonly RecordBatch: (batch: Record<string, unknown>) => Promise<{ readonly buffer: Buffer }>
    }
    const Long = copies.original.load("src/utils/long.js") as { fromValue: (value: number) => unknown }
    const original = batchCodecsOf(copies.original)
    const patched = batchCodecsOf(copies.patched)
    const seed = 5
    const next = seeded(seed)
    const bytes = (length: number) => Buffer.from(Array.from({ length }, () => Math.floor(next() * 256)))
    for (let b = 0; b < 60; b++) {
      const count = 1 + Math.floor(next() * 40)
      const records = Array.from({ length: count }, (_, i) =>
        Record({
          offsetDelta: i,
          timestampDelta: Math.floor(i / 3),
          key: next() < 0.1 ? null : bytes(Math.floor(next() * 20)),
          value: next() < 0.1 ? null : bytes(Math.floor(next() * 200)),
          headers: next() < 0.3 ? { h: bytes(5), g: [bytes(2), bytes(3)] } : {}
        }))
      const batch = (await RecordBatch({
        firstOffset: Long.fromValue(Math.floor(next() * 1e9)),
        firstTimestamp: 1_796_208_721_285,
        maxTimestamp: 1_796_208_721_285 + count,
        lastOffsetDelta: count - 1,
        transactional: next() < 0.5,
        records
      })).buffer
      assert.deepStrictEqual(messagesAsFields(await patched(batch)), messagesAsFields(await original(batch)), `batch ${b} (seed ${seed})`)
    }
  })
})

describe("kafkajs patch: a fetched batch's offset filter", () => {
  type BatchClass = new(topic: string, fetchedOffset: string, partitionData: Record<string, unknown>) => {
    readonly messages: ReadonlyArray<{ readonly offset: string }>
    readonly messagesWithinOffset: ReadonlyArray<{ readonly offset: string }>
  }

  it("keeps the messages at or after the fetched offset, as kafkajs does, around 2^53 too", () => {
    const Original = load<BatchClass>(copies.original, "src/consumer/batch.js", "class")
    const Patched = load<BatchClass>(copies.patched, "src/consumer/batch.js", "class")
    const Long = copies.original.load("src/utils/long.js") as { fromString: (s: string) => { add: (n: number) => { toString: () => string } } }
    // A compressed batch may start before the fetched offset; offsets beyond 2^53 take kafkajs's Long comparison.
    const bases = ["0", "35909", "9007199254740980", "9007199254740991", "9223372036854775000"]
    for (const base of bases) {
      const offsets = Array.from({ length: 30 }, (_, i) => Long.fromString(base).add(i).toString())
      const plain = offsets.map((offset) => ({ offset, key: null, value: null, isControlRecord: false, batchContext: {} }))
      // The patched record decoder's messages also carry their offset as a number (inexact past 2^53).
      const decoded = plain.map((message) => ({ ...message, offsetNumber: Number(message.offset) }))
      for (const [messages, fetched] of [plain, decoded].flatMap((messages) =>
        [offsets[0]!, offsets[7]!, offsets[29]!, Long.fromString(base).add(30).toString()].map((fetched) => [messages, fetched] as const)
      )) {
        const data = { partition: 0, highWatermark: "0", abortedTransactions: [], messages }
        const patched = new Patched("t", fetched, data)
        const original = new Original("t", fetched, data)
        assert.deepStrictEqual(patched.messagesWithinOffset.map((m) => m.offset), original.messagesWithinOffset.map((m) => m.offset), `base ${base}, fetched ${fetched}`)
        assert.deepStrictEqual(patched.messages.map((m) => m.offset), original.messages.map((m) => m.offset), `base ${base}, fetched ${fetched}`)
      }
    }
  })

  it("a batch that let go of its messages answers what kafkajs's runner asks after eachBatch as before", () => {
    type Summary = Record<string, unknown>
    interface Released {
      readonly messages: ReadonlyArray<unknown>
      readonly releaseMessages: () => void
    }
    const Patched = load<new(topic: string, fetchedOffset: string, partitionData: Record<string, unknown>) => Released>(
      copies.patched,
      "src/consumer/batch.js",
      "class"
    )
    const call = (batch: object, method: string): unknown => {
      const f: unknown = Reflect.get(batch, method)
      if (!isFunction(f)) throw new Error(`the batch has no ${method}`)
      return Reflect.apply(f, batch, [])
    }
    // What the runner reads once eachBatch returns (its resolveOffset, END_BATCH_PROCESS, the lag).
    const summary = (batch: Released): Summary => ({
      size: batch.messages.length,
      ...Object.fromEntries(
        ["firstOffset", "lastOffset", "isEmpty", "isEmptyIncludingFiltered", "isEmptyDueToFiltering", "isEmptyControlRecord",
          "isEmptyDueToLogCompactedMessages", "offsetLag", "offsetLagLow"].map((method) => [method, call(batch, method)])
      )
    })
    const message = (offset: number, isControlRecord = false) => ({
      offset: String(offset), offsetNumber: offset, key: null, value: null, isControlRecord, batchContext: {}
    })
    const cases: ReadonlyArray<readonly [string, ReadonlyArray<ReturnType<typeof message>>, string]> = [
      ["records", [10, 11, 12].map((o) => message(o)), "10"],
      ["records past the fetched offset", [8, 9, 10, 11].map((o) => message(o)), "10"],
      ["records and a control record", [message(10), message(11), message(12, true)], "10"],
      ["only a control record", [message(12, true)], "12"],
      ["nothing within the fetched offset", [message(3)], "10"],
      ["empty", [], "10"]
    ]
    for (const [label, messages, fetched] of cases) {
      const data = { partition: 0, highWatermark: "20", abortedTransactions: [], messages }
      const batch = new Patched("t", fetched, data)
      const before = summary(batch)
      batch.releaseMessages()
      assert.deepStrictEqual(summary(batch), before, label)
      if (before["size"] !== 0) assert.isTrue(batch.messages.every((m) => m === undefined), `${label}: no message held`)
    }
  })
})
