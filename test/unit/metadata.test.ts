import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Either, ParseResult, Schema, TestClock } from "effect"
import { decodeRecord } from "../../src/internal/runtime/decode.ts"
import { headerPairs, headerRecord } from "../../src/internal/codec/headers.ts"
import type { FetchedHeaders, FetchedRecord } from "../../src/internal/kafka/consumer.ts"
import * as Outputs from "../../src/internal/runtime/outputs.ts"
import * as PartitionCounts from "../../src/internal/runtime/partitionCounts.ts"
import { Topic, Transformer } from "../../src/index.ts"

const record = (key: Buffer | null, value: Buffer | null, rawHeaders: FetchedHeaders = {}): FetchedRecord => ({
  topic: "in",
  partition: 1,
  offset: 42,
  key,
  value,
  headers: {},
  rawHeaders,
  timestamp: 1700000000000
})

const notUtf8 = Buffer.from([0x00, 0xff, 0xfe, 0x80])

/** A big-endian 32-bit unsigned integer: a hand-written binary codec. */
const UInt32 = Topic.binary(Schema.transformOrFail(Schema.Uint8ArrayFromSelf, Schema.Number, {
  strict: true,
  decode: (bytes, _, ast) =>
    bytes.length === 4
      ? ParseResult.succeed(Buffer.from(bytes.buffer, bytes.byteOffset, 4).readUInt32BE(0))
      : ParseResult.fail(new ParseResult.Type(ast, bytes, "expected 4 bytes")),
  encode: (n) => {
    const bytes = Buffer.alloc(4)
    bytes.writeUInt32BE(n, 0)
    return ParseResult.succeed(bytes)
  }
}))

describe("binary codecs", () => {
  it("Topic.bytes decodes and encodes the bytes themselves, UTF-8 or not", () => {
    const Blobs = Topic.make({ name: "in", key: Topic.bytes, value: Topic.bytes })
    assert.deepStrictEqual(Blobs.format, { key: "bytes", value: "bytes" })
    const decoded = decodeRecord(Blobs, record(notUtf8, Buffer.from([0xc0, 0x80])))
    assert.deepStrictEqual(decoded, Either.right({ key: notUtf8, value: Buffer.from([0xc0, 0x80]) }))
    assert.deepStrictEqual(Blobs.encodeValue(new Uint8Array([1, 2, 3])), Either.right(Buffer.from([1, 2, 3])))
  })

  it("a binary value codec beside a text key; a failing binary codec is a poison value", () => {
    const Counts = Topic.make({ name: "in", key: Schema.String, value: UInt32 })
    assert.deepStrictEqual(Counts.format, { key: "text", value: "bytes" })
    const four = Buffer.from([0, 0, 1, 0])
    assert.deepStrictEqual(decodeRecord(Counts, record(Buffer.from("k"), four)), Either.right({ key: "k", value: 256 }))
    const bad = decodeRecord(Counts, record(Buffer.from("k"), Buffer.from([1, 2])))
    assert.isTrue(Either.isLeft(bad) && bad.left.part === "value" && bad.left.message.includes("expected 4 bytes"))
    // The text key stays strict UTF-8.
    const badKey = decodeRecord(Counts, record(notUtf8, four))
    assert.isTrue(Either.isLeft(badKey) && badKey.left.part === "key")
    const encoded = Topic.record(Counts, "k", 256).encode()
    assert.deepStrictEqual(Either.map(encoded, (e) => [e.key, e.value]), Either.right(["k", four]))
  })

  it("Topic.decode takes text or bytes for either kind of codec", () => {
    const Text = Topic.make({ name: "in", key: Schema.String, value: Schema.String })
    assert.deepStrictEqual(Text.decode(Buffer.from("k"), "v"), Either.right({ key: "k", value: "v" }))
    assert.isTrue(Either.isLeft(Text.decode(null, notUtf8)))
    const Blobs = Topic.make({ name: "in", key: Topic.bytes, value: Topic.bytes })
    assert.deepStrictEqual(Blobs.decode("k", null).pipe(Either.isLeft), true, "a tombstone is not a value")
    assert.deepStrictEqual(Blobs.decode("k", "v"), Either.right({ key: Buffer.from("k"), value: Buffer.from("v") }))
    assert.isTrue(Topic.isBinary(Topic.bytes))
    assert.isFalse(Topic.isBinary(Schema.String))
  })
})

describe("headers", () => {
  it("fetched headers as pairs: every value's bytes, repeated names in order, no value as empty bytes", () => {
    const pairs = headerPairs({ bin: notUtf8, rep: [Buffer.from("a"), notUtf8, null], none: null })
    assert.deepStrictEqual(pairs, [
      ["bin", notUtf8],
      ["rep", Buffer.from("a")],
      ["rep", notUtf8],
      ["rep", Buffer.alloc(0)],
      ["none", Buffer.alloc(0)]
    ])
    assert.deepStrictEqual(headerPairs({}), [])
    assert.deepStrictEqual(Transformer.headerValues({ rawHeaders: pairs }, "rep"), [Buffer.from("a"), notUtf8, Buffer.alloc(0)])
    assert.deepStrictEqual(Transformer.headerValues({ rawHeaders: pairs }, "missing"), [])
  })

  it("output headers as pairs are grouped by name, in order; by name they stay as given", () => {
    const grouped = headerRecord([["a", "1"], ["b", notUtf8], ["a", Buffer.from("2")], ["__proto__", "x"]])
    assert.deepStrictEqual(Object.keys(grouped), ["a", "b", "__proto__"])
    assert.deepStrictEqual(grouped["a"], ["1", Buffer.from("2")])
    assert.deepStrictEqual(grouped["b"], notUtf8)
    assert.strictEqual(grouped["__proto__"], "x")
    const byName = { a: "1", b: [notUtf8, "2"] }
    assert.strictEqual(headerRecord(byName), byName)
  })
})

describe("output partition and timestamp", () => {
  const Out = Topic.make({ name: "out", key: Schema.String, value: Schema.String })
  const limits = Outputs.makeMessageLimits(1 << 20, () => Effect.succeed(undefined))
  const counts = (count: number | undefined, lookups: Array<string> = []) =>
    PartitionCounts.make((topic) => Effect.sync(() => {
      lookups.push(topic)
      return count
    }))
  const source = record(null, Buffer.from("v"))

  it.effect("an output gets its input's timestamp unless it sets one", () =>
    Effect.gen(function*() {
      const [plain, own] = yield* Outputs.encode(
        [Topic.record(Out, "k", "v"), Topic.record(Out, "k", "v", undefined, { timestamp: 5, partition: 1 })],
        limits,
        counts(2),
        source
      )
      assert.strictEqual(plain?.timestamp, 1700000000000)
      assert.strictEqual(own?.timestamp, 5)
      assert.strictEqual(own?.partition, 1)
      const untimed = yield* Outputs.encode([Topic.record(Out, "k", "v")], limits, counts(2), { ...source, timestamp: -1 })
      assert.isUndefined(untimed[0]?.timestamp, "no input timestamp: the producer's")
    }))

  it.effect("a partition out of range fails with PartitionOutOfRange, after looking the count up again", () =>
    Effect.gen(function*() {
      const lookups: Array<string> = []
      const error = yield* Effect.flip(
        Outputs.encode([Topic.record(Out, "k", "v", undefined, { partition: 2 })], limits, counts(2, lookups), source)
      )
      assert.strictEqual(error._tag, "PartitionOutOfRange")
      if (error._tag === "PartitionOutOfRange") {
        assert.deepStrictEqual([error.topic, error.partition, error.partitions], ["out", 2, 2])
        assert.deepStrictEqual(error.source, { topic: "in", partition: 1, offset: 42 })
      }
      assert.deepStrictEqual(lookups, ["out", "out"])
      const negative = yield* Effect.flip(
        Outputs.encode([Topic.record(Out, "k", "v", undefined, { partition: -1 })], limits, counts(undefined), source)
      )
      assert.strictEqual(negative._tag, "PartitionOutOfRange")
    }))

  const now = 1_800_000_000_000
  const hour = 3_600_000
  /** Encodes outputs with `timestamps` for a topic configured as `config`, at `now` on the test clock. */
  const encodeAt = (timestamps: ReadonlyArray<number>, config: Parameters<typeof Outputs.makeMessageLimits>[1]) =>
    Effect.gen(function*() {
      yield* TestClock.setTime(now)
      const clocked = Outputs.makeMessageLimits(1 << 20, config, yield* Effect.clock)
      const records = timestamps.map((timestamp) => Topic.record(Out, "k", "v", undefined, { timestamp }))
      return yield* Effect.either(Outputs.encode(records, clocked, counts(1), source))
    })
  const configured = (after: number | undefined, before?: number, timestampType = "CreateTime") => () =>
    Effect.succeed({ maxMessageBytes: undefined, timestampType, timestampAfterMaxMs: after, timestampBeforeMaxMs: before })

  it.effect("an output timestamp past the topic's message.timestamp.after.max.ms fails with TimestampOutOfRange before sending", () =>
    Effect.gen(function*() {
      const within = yield* encodeAt([now + hour, now - 30 * 24 * hour], configured(hour))
      assert.deepStrictEqual(Either.map(within, (outputs) => outputs.map((o) => o.timestamp)), Either.right([now + hour, now - 30 * 24 * hour]))
      const ahead = yield* encodeAt([now, now + hour + 1], configured(hour))
      assert.isTrue(Either.isLeft(ahead))
      if (Either.isRight(ahead)) return
      const error = ahead.left
      assert.strictEqual(error._tag, "TimestampOutOfRange")
      if (error._tag !== "TimestampOutOfRange") return
      assert.deepStrictEqual(
        [error.topic, error.timestamp, error.now, error.bound, error.limitMs],
        ["out", now + hour + 1, now, "after", hour]
      )
      assert.deepStrictEqual(error.source, { topic: "in", partition: 1, offset: 42 })
      assert.include(error.message, `has the timestamp ${now + hour + 1} (2027-01-15T09:00:00.001Z), 3600001 ms ahead of the clock`)
      assert.include(error.message, "message.timestamp.after.max.ms of 3600000 ms")
      assert.include(error.message, "add an error rule for TimestampOutOfRange")
      // Its first lookup took the effect path; the topic's limits are known now, and the synchronous path refuses it too.
      const clocked = Outputs.makeMessageLimits(1 << 20, configured(hour), yield* Effect.clock)
      yield* clocked.lookup("out")
      const sync = Outputs.encode([Topic.record(Out, "k", "v", undefined, { timestamp: now + 2 * hour })], clocked, counts(1), source)
      assert.isTrue(Either.isEither(sync) && Either.isLeft(sync) && sync.left._tag === "TimestampOutOfRange")
    }))

  it.effect("message.timestamp.before.max.ms, LogAppendTime, and Kafka 4's default when the config cannot be read", () =>
    Effect.gen(function*() {
      const behind = yield* encodeAt([now - 1001], configured(hour, 1000))
      assert.isTrue(Either.isLeft(behind) && behind.left._tag === "TimestampOutOfRange" && behind.left.bound === "before")
      assert.isTrue(Either.isRight(yield* encodeAt([now - 1000], configured(hour, 1000))))
      // The broker stamps LogAppendTime topics' records itself: any timestamp goes.
      assert.isTrue(Either.isRight(yield* encodeAt([now + 1000 * hour, 0], configured(hour, 1000, "LogAppendTime"))))
      // Unknown (no topic yet, no DescribeConfigs ACL): Kafka 4's default, an hour ahead.
      const unknown = () => Effect.succeed(undefined)
      assert.isTrue(Either.isRight(yield* encodeAt([now + hour, 0], unknown)))
      const fallback = yield* encodeAt([now + hour + 1], unknown)
      assert.isTrue(Either.isLeft(fallback) && fallback.left._tag === "TimestampOutOfRange" && fallback.left.limitMs === Outputs.defaultTimestampAfterMaxMs)
    }))

  it.effect("an earlier reading of the clock never refuses an output that the clock now accepts", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(now)
      const clocked = Outputs.makeMessageLimits(1 << 20, configured(hour), yield* Effect.clock)
      yield* clocked.lookup("out")
      // The topic's limits are known: the synchronous path (an Either).
      const at = (timestamp: number) => {
        const encoded = Outputs.encode([Topic.record(Out, "k", "v", undefined, { timestamp })], clocked, counts(1), source)
        if (!Either.isEither(encoded)) throw new Error("expected the synchronous path once the topic's limits are known")
        return encoded
      }
      // Read at `now`; two hours later, an output 1.5 hours past that reading is within the limit of the clock.
      assert.isTrue(Either.isRight(at(now)))
      yield* TestClock.adjust(2 * hour)
      assert.isTrue(Either.isRight(at(now + hour + hour / 2)))
      // And one past the limit of the clock now is refused, with the clock's time.
      const ahead = at(now + 3 * hour + 1)
      assert.isTrue(Either.isLeft(ahead) && ahead.left._tag === "TimestampOutOfRange" && ahead.left.now === now + 2 * hour)
    }))

  it.effect("Kafka's default message.timestamp.before.max.ms (Long.MAX_VALUE) bounds nothing: outputs within an hour read the clock once", () =>
    Effect.gen(function*() {
      const base = Clock.make()
      let reads = 0
      const counting: Clock.Clock = {
        [Clock.ClockTypeId]: Clock.ClockTypeId,
        unsafeCurrentTimeMillis: () => {
          reads++
          return base.unsafeCurrentTimeMillis()
        },
        currentTimeMillis: base.currentTimeMillis,
        unsafeCurrentTimeNanos: () => base.unsafeCurrentTimeNanos(),
        currentTimeNanos: base.currentTimeNanos,
        sleep: (duration) => base.sleep(duration)
      }
      // What DescribeConfigs returns for a topic of a broker with its defaults (admin.ts reads it with Number).
      const longMax = Number("9223372036854775807")
      const clocked = Outputs.makeMessageLimits(1 << 20, configured(hour, longMax), counting)
      yield* clocked.lookup("out")
      const timestamp = base.unsafeCurrentTimeMillis()
      for (let i = 0; i < 100; i++) {
        const encoded = Outputs.encode([Topic.record(Out, "k", "v", undefined, { timestamp })], clocked, counts(1), source)
        assert.isTrue(Either.isEither(encoded) && Either.isRight(encoded))
      }
      assert.strictEqual(reads, 1, "one reading of the clock bounds every later output within the hour")
      // A timestamp far behind the clock is still accepted: no bound behind.
      const old = Outputs.encode([Topic.record(Out, "k", "v", undefined, { timestamp: 0 })], clocked, counts(1), source)
      assert.isTrue(Either.isEither(old) && Either.isRight(old))
    }))

  it("a timestamp that is not a non-negative integer is an EncodeError", () => {
    for (const timestamp of [-1, 1.5, Number.NaN]) {
      const encoded = Topic.record(Out, "k", "v", undefined, { timestamp }).encode()
      assert.isTrue(Either.isLeft(encoded) && encoded.left._tag === "EncodeError", String(timestamp))
    }
  })
})
