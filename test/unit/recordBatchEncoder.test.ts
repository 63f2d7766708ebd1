/**
 * The lean produce encoder of Skein's kafkajs patch writes exactly kafkajs's bytes.
 *
 * The patch (`patches/kafkajs+2.2.4.patch`: `protocol/requests/produce/v3/request.js`,
 * `protocol/recordBatch/v0/index.js`, `protocol/recordBatch/crc32C/crc32C.js`,
 * `protocol/request.js`) encodes uncompressed produce requests in one buffer instead of through
 * kafkajs's per-record encoders. Each test runs kafkajs as published and kafkajs as patched side
 * by side (two private copies, see `test/helpers/kafkajsCopies.ts`) on the same input, with the
 * same clock, and compares every byte of the request: the Produce v3-v7 body (`encode()`) and the
 * framed request that goes on the wire (`protocol/request.js`). Inputs the lean encoder does not
 * take must reach kafkajs's own code, with its bytes or its error.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { copyKafkajs, type KafkajsCopy } from "../helpers/kafkajsCopies.ts"

interface Encoded {
  readonly buffer: Buffer
}

interface Request {
  readonly apiKey: number
  readonly apiVersion: number
  readonly encode: () => Promise<Encoded>
}

interface ProduceArgs {
  readonly acks: number
  readonly timeout: number
  readonly transactionalId?: string | null
  readonly producerId?: unknown
  readonly producerEpoch?: unknown
  readonly compression?: number
  readonly topicData: ReadonlyArray<unknown>
}

interface Kafkajs {
  readonly produce: (args: ProduceArgs) => Request
  readonly frame: (args: { correlationId: number; clientId: string | null; request: Request }) => Promise<Encoded>
  readonly crc32C: (buffer: Buffer, start?: number, end?: number) => number
  readonly Long: { readonly fromValue: (value: bigint | number | string) => unknown }
  readonly Compression: { readonly GZIP: number; readonly None: number }
}

const kafkajsOf = (copy: KafkajsCopy): Kafkajs => ({
  produce: copy.load("src/protocol/requests/produce/v3/request.js") as Kafkajs["produce"],
  frame: copy.load("src/protocol/request.js") as Kafkajs["frame"],
  crc32C: copy.load("src/protocol/recordBatch/crc32C/crc32C.js") as Kafkajs["crc32C"],
  Long: copy.load("src/utils/long.js") as Kafkajs["Long"],
  Compression: (copy.load("src/protocol/message/compression/index.js") as { Types: Kafkajs["Compression"] }).Types
})

let originalCopy: KafkajsCopy
let patchedCopy: KafkajsCopy
let original: Kafkajs
let patched: Kafkajs
/** Record batches the lean encoder wrote (its writer, wrapped, counts them). */
let leanBatches = 0

beforeAll(() => {
  originalCopy = copyKafkajs("original")
  patchedCopy = copyKafkajs("patched")
  original = kafkajsOf(originalCopy)
  patched = kafkajsOf(patchedCopy)
  const batchModule = patchedCopy.load("src/protocol/recordBatch/v0/index.js") as {
    writeUncompressedBatch: (...args: ReadonlyArray<unknown>) => number
  }
  const write = batchModule.writeUncompressedBatch
  batchModule.writeUncompressedBatch = (...args) => {
    leanBatches++
    return write(...args)
  }
})

afterAll(() => {
  originalCopy?.remove()
  patchedCopy?.remove()
})

/** mulberry32: a small seeded generator, so a failure can be replayed from its seed. */
const random = (seed: number) => {
  let state = seed >>> 0
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (n: number): number => Math.floor(next() * n)
  const pick = <A>(values: ReadonlyArray<A>): A => values[int(values.length)] as A
  const bytes = (n: number): Buffer => {
    const buffer = Buffer.allocUnsafe(n)
    for (let i = 0; i < n; i++) buffer[i] = int(256)
    return buffer
  }
  return { next, int, pick, bytes }
}
type Random = ReturnType<typeof random>

const now = 1_764_547_200_000 // 2025-12-01

/** The result of an encoding: its bytes, or the message of the error it threw. */
type Outcome = { readonly bytes: Buffer } | { readonly error: string }

const outcome = async (f: () => Promise<Encoded>): Promise<Outcome> => {
  try {
    return { bytes: (await f()).buffer }
  } catch (error) {
    return { error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) }
  }
}

/** Runs `f` with Date.now() answering `at` (both encoders call it once per partition). */
const at = async <A>(time: number, f: () => Promise<A>): Promise<A> => {
  const realNow = Date.now
  Date.now = () => time
  try {
    return await f()
  } finally {
    Date.now = realNow
  }
}

const firstDifference = (a: Buffer, b: Buffer): number => {
  const length = Math.min(a.length, b.length)
  for (let i = 0; i < length; i++) if (a[i] !== b[i]) return i
  return length
}

const assertSame = (expected: Outcome, actual: Outcome, what: string): void => {
  if ("error" in expected || "error" in actual) {
    assert.deepStrictEqual(actual, expected, what)
    return
  }
  if (!expected.bytes.equals(actual.bytes)) {
    assert.fail(
      `${what}: ${actual.bytes.length} bytes instead of kafkajs's ${expected.bytes.length}, first difference at byte ${
        firstDifference(expected.bytes, actual.bytes)
      }`
    )
  }
}

interface Case {
  readonly args: (kafkajs: Kafkajs) => ProduceArgs
  readonly time: number
  readonly clientId: string | null
  /** The lean encoder must have written this many batches (undefined: it must not have been used). */
  readonly batches: number | undefined
}

/** Encodes `c` with both and compares the request body and the framed request, byte for byte. */
const compare = async (c: Case, what: string): Promise<Outcome> => {
  const expected = await at(c.time, () => outcome(() => original.produce(c.args(original)).encode()))
  const before = leanBatches
  const actual = await at(c.time, () => outcome(() => patched.produce(c.args(patched)).encode()))
  assert.strictEqual(leanBatches - before, c.batches ?? 0, `${what}: record batches the lean encoder wrote`)
  assertSame(expected, actual, `${what}: produce request body`)
  const frame = (kafkajs: Kafkajs) => () =>
    kafkajs.frame({ correlationId: 12_345, clientId: c.clientId, request: kafkajs.produce(c.args(kafkajs)) })
  assertSame(await at(c.time, () => outcome(frame(original))), await at(c.time, () => outcome(frame(patched))), `${what}: framed request`)
  return expected
}

const unicode = ["é", "✓", "日本", "😀", "\ud800", "\udfff"] // the last two: lone surrogates

const randomString = (r: Random, length: number, ascii: boolean): string => {
  let s = ""
  while (s.length < length) s += ascii || r.next() < 0.8 ? String.fromCharCode(32 + r.int(95)) : r.pick(unicode)
  return s
}

const randomBytesValue = (r: Random, large: boolean): string | Buffer | null | undefined => {
  switch (r.int(large ? 10 : 9)) {
    case 0:
      return null
    case 1:
      return r.pick([undefined, ""])
    case 2:
      return Buffer.alloc(0)
    case 3:
      return r.bytes(8)
    case 4:
      return r.bytes(100)
    case 5:
      return randomString(r, r.int(40), true)
    case 6:
      return randomString(r, r.int(300), false)
    case 7:
      return r.bytes(r.int(3000))
    case 8:
      return randomString(r, 200 + r.int(200), true)
    default:
      return r.next() < 0.5 ? r.bytes(r.int(100_001)) : randomString(r, r.int(50_000), r.next() < 0.5)
  }
}

const headerValue = (r: Random): string | Buffer =>
  r.pick<() => string | Buffer>([
    () => "",
    () => randomString(r, r.int(20), true),
    () => randomString(r, r.int(80), false),
    () => r.bytes(r.int(40)),
    () => `00-${r.bytes(16).toString("hex")}-${r.bytes(8).toString("hex")}-01`
  ])()

const randomHeaders = (r: Random): Record<string, string | Buffer | ReadonlyArray<string | Buffer>> | undefined => {
  if (r.next() < 0.4) return undefined
  const headers: Record<string, string | Buffer | ReadonlyArray<string | Buffer>> = {}
  const names = r.int(5)
  for (let n = 0; n < names; n++) {
    // integer-like names come first in Object.keys, whatever the insertion order
    const name = r.pick(["traceparent", "source", "ünïcode", "x", "", "10", "2", randomString(r, r.int(40), false)])
    headers[name] = r.next() < 0.3
      ? Array.from({ length: r.int(4) }, () => headerValue(r)) // a repeated name (or none, empty)
      : headerValue(r)
  }
  return headers
}

type Timestamps = (r: Random, i: number) => string | number | null | undefined

const timestampModes: ReadonlyArray<readonly [string, Timestamps]> = [
  ["none", () => undefined],
  ["current ms as strings (Skein's)", (r) => String(now - r.int(60_000))],
  ["current ms as numbers", (r) => now + r.int(60_000) - 30_000],
  ["all equal", () => String(now)],
  ["old (2005) and current", (r) => r.pick([String(1_111_111_111_111), now - r.int(1000)])],
  ["some missing, some in the future", (r) => r.pick([undefined, null, String(now + 3_600_000 + r.int(1000))])],
  // kafkajs sorts timestamps as strings: "999999999999" (12 digits, 2001) sorts after "1764...";
  // a falsy timestamp (0, "") is replaced by Date.now() in the delta, not in the sort
  ["different lengths (sorted as strings)", (r) => r.pick([999_999_999_999, "999999999999", String(now), 1000, "0", 0])],
  ["numbers and strings mixed", (r) => r.pick([now + r.int(10), String(now + r.int(10)), "0001764547200000"])]
]

const randomCase = (r: Random, records: number): Case => {
  const [, timestamp] = r.pick(timestampModes)
  const topics = 1 + r.int(3)
  const topicData = Array.from({ length: topics }, (_, t) => {
    const partitions = 1 + r.int(records > 1000 ? 12 : 4)
    return {
      topic: r.pick([`topic-${t}`, `tópico-${t}`, `${"t".repeat(200)}-${t}`]),
      partitions: Array.from({ length: partitions }, (_, p) => {
        const count = Math.max(1, Math.round(records / (topics * partitions)))
        const large = r.next() < 0.05
        const messages = Array.from({ length: count }, (_, i) => {
          const message: Record<string, unknown> = {
            key: randomBytesValue(r, false),
            value: randomBytesValue(r, large && i < 20),
            partition: p
          }
          const headers = randomHeaders(r)
          if (headers !== undefined) message["headers"] = headers
          const ts = timestamp(r, i)
          if (ts !== undefined) message["timestamp"] = ts
          return message
        })
        const entry: Record<string, unknown> = { partition: r.next() < 0.5 ? String(p) : p, messages }
        const sequence = r.pick([undefined, 0, 17, 2 ** 31 - 1 - count])
        if (sequence !== undefined) entry["firstSequence"] = sequence
        return entry
      })
    }
  })
  const batches = topicData.reduce((n, t) => n + t.partitions.length, 0)
  const transactionalId = r.pick([undefined, null, "skein-app-3", "ünïcode-txn"])
  const producerId = r.pick<bigint | number | undefined>([undefined, -1, 0, 4_711, 2n ** 62n + 12_345n, -(2n ** 63n)])
  const producerEpoch = r.pick([undefined, 0, 5, 32_767])
  const acks = r.pick([-1, 0, 1])
  return {
    args: (kafkajs) => ({
      acks,
      timeout: 30_000,
      ...(transactionalId !== undefined ? { transactionalId } : {}),
      ...(producerId !== undefined ? { producerId: kafkajs.Long.fromValue(producerId) } : {}),
      ...(producerEpoch !== undefined ? { producerEpoch } : {}),
      compression: kafkajs.Compression.None,
      topicData
    }),
    time: now + r.int(1000),
    clientId: r.pick(["skein", null, "clïent-ü"]),
    batches
  }
}

describe("lean produce encoder (kafkajs patch)", () => {
  it("CRC32C, slicing-by-16 over a byte range, equals kafkajs's byte-at-a-time CRC32C", () => {
    const r = random(1)
    const pool = r.bytes(1 << 16)
    assert.strictEqual(patched.crc32C(Buffer.from("123456789")).toString(16), "e3069283") // the check value
    for (let length = 0; length < 600; length++) {
      const start = r.int(64)
      const buffer = pool.subarray(start, start + length) // any alignment
      assert.strictEqual(patched.crc32C(buffer), original.crc32C(buffer), `length ${length}`)
      const from = r.int(length + 1)
      const to = from + r.int(length - from + 1)
      assert.strictEqual(patched.crc32C(buffer, from, to), original.crc32C(buffer.subarray(from, to)), `${from}..${to}`)
    }
    assert.strictEqual(patched.crc32C(pool), original.crc32C(pool))
  })

  it("every generated uncompressed request: the same bytes as kafkajs (1 to 5,000 records, values up to 100 kB)", async () => {
    const sizes = [1, 1, 2, 3, 5, 10, 30, 100, 300, 1000, 2500, 5000]
    for (let seed = 1; seed <= 120; seed++) {
      const r = random(seed)
      const records = sizes[seed % sizes.length] ?? 1
      const expected = await compare(randomCase(r, records), `seed ${seed} (${records} records)`)
      assert.isTrue("bytes" in expected, `seed ${seed}: kafkajs encoded it`)
    }
  })

  it("each timestamp mode, transactional or idempotent or neither", async () => {
    for (const [mode, timestamp] of timestampModes) {
      for (const transactionalId of [null, "txn"]) {
        for (const producer of [undefined, { id: 2n ** 53n + 1n, epoch: 7, sequence: 1_000 }]) {
          const r = random(mode.length)
          const messages = Array.from({ length: 200 }, (_, i) => {
            const message: Record<string, unknown> = { key: r.bytes(8), value: r.bytes(100) }
            const ts = timestamp(r, i)
            if (ts !== undefined) message["timestamp"] = ts
            return message
          })
          await compare({
            args: (kafkajs) => ({
              acks: -1,
              timeout: 30_000,
              transactionalId,
              ...(producer !== undefined
                ? { producerId: kafkajs.Long.fromValue(producer.id), producerEpoch: producer.epoch }
                : {}),
              topicData: [{
                topic: "out",
                partitions: [{ partition: "3", messages, ...(producer !== undefined ? { firstSequence: producer.sequence } : {}) }]
              }]
            }),
            time: now,
            clientId: "skein",
            batches: 1
          }, `${mode}, transactionalId ${transactionalId}, producer ${producer?.id ?? "none"}`)
        }
      }
    }
  })

  it("Skein's shape: 5,000 records of 8-byte keys and 100-byte values over 12 partitions, with traceparent headers", async () => {
    const r = random(7)
    const partitions = Array.from({ length: 12 }, (_, p) => ({
      partition: String(p),
      firstSequence: 100 * p,
      messages: Array.from({ length: 417 }, () => ({
        key: r.bytes(8),
        value: r.bytes(100),
        partition: p,
        timestamp: String(now - r.int(5000)),
        headers: { traceparent: `00-${r.bytes(16).toString("hex")}-${r.bytes(8).toString("hex")}-01` }
      }))
    }))
    await compare({
      args: (kafkajs) => ({
        acks: -1,
        timeout: 30_000,
        transactionalId: "app-task-3",
        producerId: kafkajs.Long.fromValue(1_001),
        producerEpoch: 2,
        topicData: [{ topic: "app-output", partitions }]
      }),
      time: now,
      clientId: "skein",
      batches: 12
    }, "Skein's shape")
  })

  it("a request of more records than the kept scratch space (70,000), then a small one", async () => {
    const r = random(11)
    const big = Array.from({ length: 3 }, (_, p) => ({
      partition: p,
      messages: Array.from({ length: 23_334 }, (_, i) => ({ key: null, value: r.bytes(4), timestamp: now + i }))
    }))
    const small = [{ partition: 0, messages: [{ key: "k", value: "v" }] }]
    for (const [what, partitions] of [["70,000 records", big], ["then 1", small]] as const) {
      await compare({
        args: () => ({ acks: -1, timeout: 30_000, topicData: [{ topic: "t", partitions }] }),
        time: now,
        clientId: "skein",
        batches: partitions.length
      }, what)
    }
  })

  it("an empty partition and a request without topics", async () => {
    for (const topicData of [[], [{ topic: "t", partitions: [] }], [{ topic: "t", partitions: [{ partition: 0, messages: [] }] }]]) {
      const batches = topicData.reduce((n, t) => n + t.partitions.length, 0)
      await compare({ args: () => ({ acks: 1, timeout: 5_000, topicData }), time: now, clientId: "skein", batches }, JSON.stringify(topicData))
    }
  })

  it("a client id too long for the room left in front of the request is framed by copying", async () => {
    await compare({
      args: () => ({ acks: -1, timeout: 30_000, topicData: [{ topic: "t", partitions: [{ partition: 0, messages: [{ key: "k", value: "v" }] }] }] }),
      time: now,
      clientId: "c".repeat(300),
      batches: 1
    }, "long client id")
  })

  it("other requests are framed as kafkajs frames them", async () => {
    interface Encoder extends Encoded {
      readonly writeInt32: (value: number) => Encoder
      readonly writeString: (value: string) => Encoder
    }
    const Encoder = patchedCopy.load("src/protocol/encoder.js") as new() => Encoder
    for (const clientId of ["skein", null, "ü".repeat(200)]) {
      const request: Request = { apiKey: 3, apiVersion: 5, encode: async () => new Encoder().writeInt32(1).writeString("topic") }
      assertSame(
        await outcome(() => original.frame({ correlationId: 7, clientId, request })),
        await outcome(() => patched.frame({ correlationId: 7, clientId, request })),
        `metadata request, client id ${clientId}`
      )
    }
  })

  // What the lean encoder does not take goes to kafkajs's encoders: kafkajs's bytes (whatever
  // they are) or kafkajs's error.
  const messageCases: ReadonlyArray<readonly [string, () => Record<string, unknown>]> = [
    ["a Uint8Array value (not a Buffer)", () => ({ key: "k", value: new Uint8Array([1, 2, 3]) })],
    ["a number key", () => ({ key: 42, value: "v" })],
    ["a null header value", () => ({ key: "k", value: "v", headers: { a: null } })],
    ["a number header value", () => ({ key: "k", value: "v", headers: { a: [1] } })],
    ["a fractional timestamp", () => ({ key: "k", value: "v", timestamp: "1764547200000.5" })],
    ["an unparsable timestamp", () => ({ key: "k", value: "v", timestamp: "yesterday" })],
    ["a bigint timestamp", () => ({ key: "k", value: "v", timestamp: 1_764_547_200_000n })],
    ["a message of a class", () => new (class Message { key = "k"; value = "v" })() as unknown as Record<string, unknown>]
  ]
  for (const [what, message] of messageCases) {
    it(`${what}: kafkajs's encoders`, async () => {
      await compare({
        args: () => ({
          acks: -1,
          timeout: 30_000,
          topicData: [{ topic: "t", partitions: [{ partition: 0, messages: [{ key: "a", value: "b" }, message()] }] }]
        }),
        time: now,
        clientId: "skein",
        batches: undefined
      }, what)
    })
  }

  it("request fields it does not take, and compressed requests: kafkajs's encoders", async () => {
    const messages = [{ key: "k", value: "v".repeat(1000), timestamp: String(now) }]
    const variants: ReadonlyArray<readonly [string, (kafkajs: Kafkajs) => Partial<ProduceArgs>]> = [
      ["gzip", (kafkajs) => ({ compression: kafkajs.Compression.GZIP })],
      ["a string producer epoch", () => ({ producerEpoch: "3" })],
      ["a null producer epoch", () => ({ producerEpoch: null })],
      ["an out-of-range producer epoch", () => ({ producerEpoch: 40_000 })],
      ["a null producer id", () => ({ producerId: null })],
      ["a numeric string producer id", () => ({ producerId: "123456789012345678" })]
    ]
    for (const [what, variant] of variants) {
      await compare({
        args: (kafkajs) => ({
          acks: -1,
          timeout: 30_000,
          topicData: [{ topic: "t", partitions: [{ partition: 0, messages }] }],
          ...variant(kafkajs)
        }),
        time: now,
        clientId: "skein",
        // a numeric string converts like a Long (Long.fromValue), so the lean encoder takes it
        batches: what === "a numeric string producer id" ? 1 : undefined
      }, what)
    }
  })
})
