import { assert, describe, it } from "@effect/vitest"
import { deadLetter, droppedHeader, truncatedHeader } from "../../src/internal/runtime/deadLetter.ts"
import type { FetchedHeaders, FetchedRecord } from "../../src/internal/kafka/consumer.ts"
import { recordBytes } from "../../src/internal/kafka/recordSize.ts"

const record = (key: Buffer | null, value: Buffer | null, rawHeaders: FetchedHeaders = {}): FetchedRecord => ({
  topic: "in",
  partition: 3,
  offset: 17,
  key,
  value,
  headers: {},
  rawHeaders,
  timestamp: 1700000000000
})

const binary = Buffer.from([0x00, 0xff, 0xfe, 0x80])

describe("deadLetter", () => {
  it("keeps the key, value and headers byte for byte, with Skein's headers", () => {
    const headers: FetchedHeaders = { bin: binary, rep: [Buffer.from("a"), binary, null], empty: Buffer.alloc(0) }
    const original = record(Buffer.from([0xc0, 0x80]), Buffer.from([0xed, 0xa0, 0x80]), headers)
    const dead = deadLetter("dlq", original, { message: "boom", part: "value" }, 1024 * 1024)
    assert.strictEqual(dead.topic, "dlq")
    assert.strictEqual(dead.key, original.key, "the same bytes, not a decoding of them")
    assert.strictEqual(dead.value, original.value)
    assert.deepStrictEqual(dead.headers, {
      bin: binary,
      rep: [Buffer.from("a"), binary, Buffer.alloc(0)],
      empty: Buffer.alloc(0),
      "skein.error": "boom",
      "skein.error.part": "value",
      "skein.source.topic": "in",
      "skein.source.partition": "3",
      "skein.source.offset": "17",
      "skein.source.timestamp": "1700000000000"
    })
  })

  it("an original header named like Skein's keeps its values first", () => {
    const dead = deadLetter("dlq", record(null, null, { "skein.error": Buffer.from("old") }), { message: "new" }, 1 << 20)
    assert.deepStrictEqual(dead.headers?.["skein.error"], [Buffer.from("old"), "new"])
    assert.strictEqual(dead.headers?.["skein.error.part"], "transform")
  })

  it("bounds the error text", () => {
    const dead = deadLetter("dlq", record(null, Buffer.from("v")), { message: "x".repeat(1_000_000) }, 1 << 20)
    const text = dead.headers?.["skein.error"]
    assert.ok(typeof text === "string" && text.length <= 1024 && text.includes("more characters"), String(text).slice(-40))
  })

  it("cuts a value too large for the limit and says so", () => {
    const value = Buffer.alloc(100_000, 7)
    const dead = deadLetter("dlq", record(Buffer.from("k"), value, { h: binary }), { message: "big" }, 64 * 1024)
    assert.isAtMost(recordBytes(dead), 64 * 1024)
    assert.isAbove(recordBytes(dead), 64 * 1024 - 16, "as much of the value as fits")
    assert.strictEqual(dead.headers?.[truncatedHeader], "100000")
    assert.ok(Buffer.isBuffer(dead.value) && value.subarray(0, dead.value.length).equals(dead.value))
    assert.deepStrictEqual(dead.key, Buffer.from("k"))
    assert.deepStrictEqual(dead.headers?.["h"], binary)
  })

  it("a record that fits exactly is not cut", () => {
    const base = recordBytes(deadLetter("dlq", record(null, Buffer.alloc(0)), { message: "m" }, 1 << 20))
    const value = Buffer.alloc(1000, 1)
    const dead = deadLetter("dlq", record(null, value), { message: "m" }, base + 1000)
    assert.strictEqual(dead.value, value)
    assert.isUndefined(dead.headers?.[truncatedHeader])
  })

  it("drops the key and original headers when even they do not fit", () => {
    const dead = deadLetter("dlq", record(Buffer.alloc(70_000), Buffer.alloc(10), { h: Buffer.alloc(5000) }), { message: "m" }, 64 * 1024)
    assert.isAtMost(recordBytes(dead), 64 * 1024)
    assert.strictEqual(dead.key, null)
    assert.strictEqual(dead.value, null)
    assert.strictEqual(dead.headers?.[truncatedHeader], "10")
    assert.strictEqual(dead.headers?.[droppedHeader], "key,headers")
    assert.strictEqual(dead.headers?.["skein.source.offset"], "17")
  })

  it("a limit smaller than Skein's headers shortens the error text", () => {
    const dead = deadLetter("dlq", record(null, Buffer.alloc(2000)), { message: "é".repeat(5000) }, 600)
    assert.isAtMost(recordBytes(dead), 600)
    assert.strictEqual(dead.headers?.["skein.source.offset"], "17")
  })
})
