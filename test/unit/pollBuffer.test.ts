import { assert, describe, it } from "@effect/vitest"
import type { BatchOutcome, PartitionBatch } from "../../src/internal/kafka/consumer.ts"
import * as PollBuffer from "../../src/internal/runtime/PollBuffer.ts"

const batch = (
  partition: number,
  fetchedOffset: number,
  offsets: ReadonlyArray<number>,
  options: { readonly stale?: boolean; readonly completed?: Array<BatchOutcome> } = {}
): PartitionBatch => ({
  topic: "in",
  partition,
  generation: 1,
  fetchedOffset,
  isStale: () => options.stale ?? false,
  records: offsets.map((offset) => ({
    topic: "in",
    partition,
    offset,
    key: null,
    value: Buffer.from("v"),
    headers: {},
    rawHeaders: {},
    timestamp: 0
  })),
  nextOffset: (offsets.at(-1) ?? fetchedOffset - 1) + 1,
  highWatermark: 100,
  complete: (outcome) => options.completed?.push(outcome)
})

describe("PollBuffer", () => {
  it("takes a partition's buffered batches in offset order, as one slice", () => {
    // Once batches are buffered (kafkajs fetches on), a partition can have several: a take that
    // shared its records among them processed offsets 3..4 before 2 (a chaos run's reordered audit).
    const buffer = PollBuffer.make()
    buffer.expect([{ topic: "in", partition: 0, offset: 0 }])
    buffer.offer(batch(0, 0, [0, 1, 2]))
    buffer.offer(batch(0, 3, [3, 4, 5]))
    const offsetsOf = (slices: ReadonlyArray<PollBuffer.PollSlice>) => slices.map((s) => PollBuffer.records(s).records.map((r) => r.offset))
    // One slice per partition, its batches in order: a cut and an offset per partition.
    assert.deepStrictEqual(offsetsOf(buffer.takeFor(0, 4)), [[0, 1, 2, 3]])
    assert.deepStrictEqual(offsetsOf(buffer.take(6)), [[0, 1, 2, 3, 4, 5]])
    const [slice] = buffer.takeFor(0, 6)
    PollBuffer.advance(slice!, 4)
    assert.deepStrictEqual(offsetsOf(buffer.takeFor(0, 6)), [[4, 5]])
    assert.strictEqual(PollBuffer.records(buffer.takeFor(0, 6)[0]!).endOffset, 6)
  })

  it("accepts a batch that continues its partition, and the next one from its end", () => {
    const buffer = PollBuffer.make()
    buffer.expect([{ topic: "in", partition: 0, offset: 10 }])
    assert.deepStrictEqual(buffer.offer(batch(0, 10, [10, 11])), { _tag: "Accepted" })
    // Offsets may skip past transaction markers inside a batch; the next batch starts after the last one.
    assert.deepStrictEqual(buffer.offer(batch(0, 12, [13])), { _tag: "Accepted" })
  })

  it("a batch that starts past where its partition continues is a gap, never processed", () => {
    // Issue 11, defect 1: kafkajs reset the fetch after OffsetOutOfRange; records 10..499 were skipped.
    const buffer = PollBuffer.make()
    buffer.expect([{ topic: "in", partition: 0, offset: 10 }])
    assert.deepStrictEqual(buffer.offer(batch(0, 500, [500, 501])), { _tag: "Gap", expected: 10, fetched: 500 })
    assert.isTrue(buffer.isEmpty())
  })

  it("a stale batch (fetched before a seek) or one for a partition without a task is never processed", () => {
    const buffer = PollBuffer.make()
    assert.deepStrictEqual(buffer.offer(batch(0, 0, [0])), { _tag: "Stale" })
    buffer.expect([{ topic: "in", partition: 0, offset: 0 }])
    assert.deepStrictEqual(buffer.offer(batch(0, 0, [0], { stale: true })), { _tag: "Stale" })
    assert.isTrue(buffer.isEmpty())
  })

  it("records filtered by the client (aborted or control only) move the partition's position", () => {
    const buffer = PollBuffer.make()
    buffer.expect([{ topic: "in", partition: 0, offset: 10 }])
    buffer.filtered("in", 0, 15)
    assert.deepStrictEqual(buffer.offer(batch(0, 15, [15])), { _tag: "Accepted" })
  })

  it("takes at most max records fairly across partitions and completes what was processed", () => {
    const buffer = PollBuffer.make()
    const completed: Array<BatchOutcome> = []
    buffer.expect([{ topic: "in", partition: 0, offset: 0 }, { topic: "in", partition: 1, offset: 0 }])
    buffer.offer(batch(0, 0, [0, 1, 2, 3], { completed }))
    buffer.offer(batch(1, 0, [0, 1], { completed }))
    const slices = buffer.take(4)
    assert.deepStrictEqual(slices.map((s) => [PollBuffer.records(s).partition, PollBuffer.size(s)]), [[0, 2], [1, 2]])
    for (const slice of slices) PollBuffer.advance(slice, PollBuffer.size(slice))
    buffer.completeProcessed()
    assert.deepStrictEqual(completed, ["Committed"])
    assert.isFalse(buffer.isEmpty())
    buffer.dropPartition(0, "Dropped")
    assert.deepStrictEqual(completed, ["Committed", "Dropped"])
    assert.isTrue(buffer.isEmpty())
  })
})
