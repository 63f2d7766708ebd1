/**
 * The runner's side of timestamp-ordered consumption (`TaskIdle.ts`), on a
 * real `PollBuffer` with fetched batches made up in memory and a fake end
 * offset lookup: a task waits for an input it has not fetched (its end offset
 * looked up, the loop woken with the answer), for an input behind its end,
 * and goes ahead once it is caught up; its batch stops where a lagging input
 * runs out; a lookup that fails never holds it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { KafkaError } from "../../src/SkeinError.ts"
import type { FetchedRecord, PartitionBatch } from "../../src/internal/kafka/consumer.ts"
import * as PollBuffer from "../../src/internal/runtime/PollBuffer.ts"
import * as TaskIdle from "../../src/internal/runtime/TaskIdle.ts"

const record = (topic: string, offset: number, timestamp: number): FetchedRecord => ({
  topic,
  partition: 0,
  offset,
  key: Buffer.from("k"),
  value: Buffer.from(`${topic}@${offset}`),
  headers: {},
  rawHeaders: {},
  timestamp
})

/** A fetched batch of `topic`/0 from `from`, with records at these timestamps, and the partition's high watermark. */
const batch = (topic: string, from: number, timestamps: ReadonlyArray<number>, highWatermark: number): PartitionBatch => ({
  topic,
  partition: 0,
  generation: 1,
  fetchedOffset: from,
  isStale: () => false,
  records: timestamps.map((t, i) => record(topic, from + i, t)),
  nextOffset: from + timestamps.length,
  highWatermark,
  complete: () => undefined
})

/** A buffer reading `stream`/0 and `table`/0 from 0, the task's idle state, its lookups and wakeups. */
const setup = (lookup: (topic: string) => Effect.Effect<number, KafkaError>, maxTaskIdle: number | "no-wait" = 0) =>
  Effect.gen(function*() {
    const buffer = PollBuffer.make()
    buffer.expect([{ topic: "stream", partition: 0, offset: 0 }, { topic: "table", partition: 0, offset: 0 }])
    const looked: Array<string> = []
    let wakes = 0
    const idle = yield* TaskIdle.make({
      inputs: ["stream", "table"],
      maxTaskIdle,
      buffer,
      endOffset: (topic) => Effect.zipRight(Effect.sync(() => looked.push(topic)), lookup(topic)),
      wake: Effect.sync(() => {
        wakes++
      })
    })
    /** Offers a batch to the buffer as the runner does, telling `idle` where it ended. */
    const fetch = (b: PartitionBatch) => {
      assert.strictEqual(buffer.offer(b)._tag, "Accepted")
      idle.fetched(b.topic, b.partition, b.nextOffset, b.highWatermark, 0)
    }
    /** The records the task's batch takes now, as `topic@offset`, slice by slice in input order (the batch runs them merged by timestamp). */
    const take = (max = 100) =>
      idle.order(0, buffer.takeFor(0, max), max, 0).slices.flatMap((slice) => PollBuffer.records(slice).records.map((r) => `${r.topic}@${r.offset}`))
    return { buffer, idle, looked, wakes: () => wakes, fetch, take }
  })

/** Lets the forked lookups run and wake the (fake) loop (the test clock moves 1 ms). */
const settle = Effect.zipRight(Effect.repeatN(Effect.yieldNow(), 20), TestClock.adjust("1 millis"))

describe("TaskIdle", () => {
  it.scoped("an input not fetched yet: its end offset is looked up; behind it, the task waits for its records, then takes them first", () =>
    Effect.gen(function*() {
      const t = yield* setup(() => Effect.succeed(3))
      t.fetch(batch("stream", 0, [3_000], 1))
      assert.isFalse(t.idle.ready(0, 0), "the table's lag is unknown: the task waits")
      yield* t.idle.kick
      yield* settle
      assert.deepStrictEqual(t.looked, ["table"])
      assert.strictEqual(t.wakes(), 1, "the loop is woken with the answer")
      assert.isFalse(t.idle.ready(0, 0), "the table has 3 records on the broker: the task waits for them")
      // The table's records, fetched to its end: the stream record with them (it runs after them: later timestamp).
      t.fetch(batch("table", 0, [1_000, 2_000, 2_500], 3))
      assert.isTrue(t.idle.ready(0, 0))
      assert.deepStrictEqual(t.take(), ["stream@0", "table@0", "table@1", "table@2"])
    }))

  it.scoped("a table fetched only in part: the batch stops where its fetched records end, the stream record waits", () =>
    Effect.gen(function*() {
      const t = yield* setup(() => Effect.succeed(10))
      t.fetch(batch("stream", 0, [3_000], 1))
      // Up to offset 2 of 10: more of the table is on the broker.
      t.fetch(batch("table", 0, [1_000, 1_500], 10))
      assert.isTrue(t.idle.ready(0, 0))
      assert.deepStrictEqual(t.take(), ["table@0", "table@1"], "the stream record is not taken past the table's fetched records")
    }))

  it.scoped("a table caught up and quiet (maxTaskIdle 0): the stream's records go ahead at once, counted as enforced", () =>
    Effect.gen(function*() {
      const t = yield* setup(() => Effect.succeed(0))
      t.fetch(batch("stream", 0, [3_000, 4_000], 2))
      yield* Effect.sync(() => t.idle.ready(0, 0))
      yield* t.idle.kick
      yield* settle
      assert.isTrue(t.idle.ready(0, 0), "the table is at its end offset (0)")
      const ordered = t.idle.order(0, t.buffer.takeFor(0, 100), 100, 0)
      assert.strictEqual(ordered.enforced, 2)
    }))

  it.scoped("maxTaskIdle above 0: a caught-up table holds the task until its deadline, with a wakeup then", () =>
    Effect.gen(function*() {
      const t = yield* setup(() => Effect.succeed(0), 20)
      t.fetch(batch("stream", 0, [3_000], 1))
      t.idle.ready(0, 0)
      yield* t.idle.kick
      yield* settle
      assert.strictEqual(t.wakes(), 1)
      assert.isFalse(t.idle.ready(0, 1), "caught up, but idle for less than maxTaskIdle (deadline 21)")
      assert.isFalse(t.idle.ready(0, 20), "the same deadline when asked again")
      yield* t.idle.kick
      yield* Effect.zipRight(Effect.repeatN(Effect.yieldNow(), 20), TestClock.adjust("25 millis"))
      assert.strictEqual(t.wakes(), 2, "woken at the deadline")
      assert.isTrue(t.idle.ready(0, 21))
    }))

  it.scoped("a lookup that fails counts the input as caught up: the task is not held by it", () =>
    Effect.gen(function*() {
      const t = yield* setup(() => Effect.fail(new KafkaError({ reason: "Connection", operation: "fetchTopicOffsets", cause: "down" })))
      t.fetch(batch("stream", 0, [3_000], 1))
      assert.isFalse(t.idle.ready(0, 0))
      yield* t.idle.kick
      yield* settle
      assert.isTrue(t.idle.ready(0, 0))
      assert.deepStrictEqual(t.take(), ["stream@0"])
    }))

  it.scoped("\"no-wait\": whatever is buffered, no lookup", () =>
    Effect.gen(function*() {
      const t = yield* setup(() => Effect.succeed(10), "no-wait")
      t.fetch(batch("stream", 0, [3_000], 1))
      t.fetch(batch("table", 0, [1_000, 5_000], 10))
      assert.isTrue(t.idle.ready(0, 0))
      assert.deepStrictEqual(t.take(), ["stream@0", "table@0", "table@1"])
      assert.deepStrictEqual(t.looked, [])
    }))
})
