import { assert, describe, it } from "@effect/vitest"
import * as FetchSizes from "../../src/internal/kafka/fetchSizes.ts"

const records = (count: number, valueBytes: number, keyBytes = 8) =>
  Array.from({ length: count }, () => ({ key: Buffer.alloc(keyBytes), value: Buffer.alloc(valueBytes) }))

describe("FetchSizes", () => {
  it("asks for kafkajs's fixed sizes until a record's size is known", () => {
    const sizes = FetchSizes.make(100_000)
    assert.strictEqual(sizes.partition("in", 0), FetchSizes.minPartitionBytes)
    assert.strictEqual(sizes.total(), FetchSizes.minFetchBytes)
  })

  it("sizes a partition's fetch for half its task's share of maxPollRecords", () => {
    const sizes = FetchSizes.make(100_000)
    sizes.assigned(6)
    sizes.observe("in", records(10, 400))
    // 420 bytes a record (key, value, framing); 100,000 / 6 / 2 records.
    assert.strictEqual(sizes.partition("in", 0), Math.ceil((100_000 / 6 / 2) * 420))
    assert.strictEqual(sizes.total(), 100_000 * 420)
  })

  it("never asks for less than kafkajs's sizes or more than the bounds", () => {
    const small = FetchSizes.make(100_000)
    small.assigned(48)
    small.observe("in", records(10, 100))
    assert.strictEqual(small.partition("in", 0), FetchSizes.minPartitionBytes)
    assert.strictEqual(small.total(), 100_000 * 120)
    const large = FetchSizes.make(100_000)
    large.observe("in", records(2, 1_000_000))
    assert.strictEqual(large.partition("in", 0), FetchSizes.maxPartitionBytes)
    assert.strictEqual(large.total(), FetchSizes.maxFetchBytes)
  })

  it("keeps a size a topic, averaging its batches, and a fetch of several topics takes the largest", () => {
    const sizes = FetchSizes.make(10_000)
    sizes.assigned(1)
    sizes.observe("a", records(4, 988))
    sizes.observe("b", records(4, 88))
    assert.strictEqual(sizes.partition("a", 0), Math.ceil(5_000 * 1_008))
    assert.strictEqual(sizes.partition("b", 0), FetchSizes.minPartitionBytes)
    sizes.observe("a", records(4, 1_988))
    assert.strictEqual(sizes.partition("a", 0), Math.ceil(5_000 * 1_508))
    assert.strictEqual(sizes.total(), 10_000 * 1_508)
  })

  it("counts headers and records without key or value", () => {
    assert.strictEqual(FetchSizes.recordSize({ key: null, value: null }), FetchSizes.recordOverhead)
    assert.strictEqual(
      FetchSizes.recordSize({ key: null, value: Buffer.alloc(10), headers: { trace: "abcd", ids: [Buffer.alloc(3), "xy"] } }),
      FetchSizes.recordOverhead + 10 + (5 + 2 + 4) + (3 + 2 + 5)
    )
  })
})
