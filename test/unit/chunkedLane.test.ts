/**
 * A stateful transformer's batch is decoded a chunk at a time (`chunkedLane` in
 * `runtime/batch.ts`, `Batch.chunkSize` records), each chunk's states read from
 * the store before its first record runs. A batch of several chunks must give
 * what the same records give in batches smaller than a chunk: the same
 * outputs and the same stored states, whether the states are cached or read
 * from the store; a state a chunk changed is the one a later chunk sees (not
 * the store's); and the store is read once per chunk, for that chunk's
 * missing states only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import { Topic, Transformer } from "../../src/index.ts"
import type { FetchedRecord } from "../../src/internal/kafka/consumer.ts"
import * as Batch from "../../src/internal/runtime/batch.ts"
import { batchOptions } from "../helpers/batchOptions.ts"
import * as MemoryStore from "../../src/internal/stores/memoryStore.ts"
import { makeStateCache } from "../../src/internal/stores/StateCache.ts"
import type { StateStore } from "../../src/internal/stores/StateStore.ts"

const Words = Topic.make({ name: "words", key: Schema.String, value: Schema.String })
const Counts = Topic.make({ name: "counts", key: Schema.String, value: Topic.json(Schema.Number) })

/** A count per key; its output is the key's count after the record. */
const counter = Transformer.make({
  name: "counter",
  inputs: [Words],
  state: Schema.Number,
  transform: (record, state) => {
    const next = Option.getOrElse(state, () => 0) + 1
    return Effect.succeed({ emit: [Topic.record(Counts, record.key ?? "", next)], state: Transformer.set(next) })
  }
})

const recordsOf = (keys: ReadonlyArray<string>, from = 0): Array<FetchedRecord> =>
  keys.map((key, i) => ({
    topic: Words.name,
    partition: 0,
    offset: from + i,
    key: Buffer.from(key),
    value: Buffer.from("w"),
    headers: {},
    rawHeaders: {},
    timestamp: 1_000
  }))


/** A store whose `getMany` calls are recorded (the keys of each). */
const recordingStore = (): { readonly store: StateStore; readonly reads: Array<ReadonlyArray<string>> } => {
  const store = MemoryStore.make("memory")
  const reads: Array<ReadonlyArray<string>> = []
  return {
    reads,
    store: { ...store, getMany: (keys) => Effect.zipRight(Effect.sync(() => reads.push([...keys])), store.getMany(keys)) }
  }
}

/**
 * Runs `records` in batches of `batchSize` on `store`, each batch's writes applied to it as a commit
 * does; `cold`: a new state cache per batch (every state read from the store). The outputs in order.
 */
const runBatches = (store: StateStore, records: ReadonlyArray<FetchedRecord>, batchSize: number, cold: boolean) =>
  Effect.gen(function*() {
    let cache = makeStateCache(100_000)
    const outputs: Array<string> = []
    for (let from = 0; from < records.length; from += batchSize) {
      const slice = records.slice(from, from + batchSize)
      if (cold) cache = makeStateCache(100_000)
      const result = yield* Batch.run(counter, Option.some(store), [
        { topic: Words.name, partition: 0, records: slice, endOffset: slice[slice.length - 1]!.offset + 1 }
      ], batchOptions(cache))
      assert.isTrue(Option.isNone(result.failure), "no record fails")
      assert.strictEqual(result.processed, slice.length)
      for (const output of result.outputs) outputs.push(`${output.key?.toString()}=${output.value?.toString()}`)
      yield* store.replay(result.writes)
      for (const [key, state] of result.states) cache.set(key, state)
    }
    return outputs
  })

/** Seeded keys: many distinct ones, each seen a few times, far apart (in other chunks). */
const keysOf = (n: number, distinct: number, seed: number): Array<string> => {
  let state = seed
  const next = () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648
  return Array.from({ length: n }, () => `k${Math.floor(next() * distinct)}`)
}

const storedStates = (store: StateStore, keys: Iterable<string>) =>
  Effect.forEach([...new Set(keys)].sort(), (key) => Effect.map(store.get(key), (value) => `${key}=${value}`))

describe("a stateful batch decoded a chunk at a time", () => {
  it.effect("several chunks in one batch give the outputs and states of batches smaller than a chunk, cached or read from the store", () =>
    Effect.gen(function*() {
      const n = Batch.chunkSize * 3 + 517
      const records = recordsOf(keysOf(n, 1_500, 11))
      const small = MemoryStore.make("small")
      const expected = yield* runBatches(small, records, 100, false)
      const expectedStates = yield* storedStates(small, records.map((r) => r.key!.toString()))
      assert.strictEqual(expected.length, n)
      for (const [what, batchSize, cold] of [["one batch", n, false], ["two batches, cold", Math.ceil(n / 2), true]] as const) {
        const big = MemoryStore.make("big")
        assert.deepStrictEqual(yield* runBatches(big, records, batchSize, cold), expected, `${what}: outputs`)
        assert.deepStrictEqual(yield* storedStates(big, records.map((r) => r.key!.toString())), expectedStates, `${what}: stored states`)
      }
    }))

  it.effect("each chunk reads only its own missing states, once, and sees what earlier chunks changed", () =>
    Effect.gen(function*() {
      const size = Batch.chunkSize
      const { reads, store } = recordingStore()
      // Stored before the batch: "a" = 10 and "late" = 100.
      yield* store.replay([{ key: "a", value: "10" }, { key: "late", value: "100" }])
      // Chunk 0: "a" and fresh keys; chunk 1: fresh keys only; chunk 2: "a" again (changed in chunk 0) and "late" (first seen).
      const keys = [
        "a",
        ...Array.from({ length: size - 1 }, (_, i) => `x${i}`),
        ...Array.from({ length: size }, (_, i) => `y${i}`),
        "a",
        "late",
        "a"
      ]
      const outputs = yield* runBatches(store, recordsOf(keys), keys.length, true)
      assert.deepStrictEqual(outputs.slice(0, 1), ["a=11"])
      assert.deepStrictEqual(outputs.slice(-3), ["a=12", "late=101", "a=13"])
      // One read per chunk, each of that chunk's keys not yet in the batch: "a" is not read again in chunk 2.
      assert.strictEqual(reads.length, 3)
      assert.deepStrictEqual([...reads[0]!].sort(), ["a", ...Array.from({ length: size - 1 }, (_, i) => `x${i}`)].sort())
      assert.deepStrictEqual([...reads[1]!].sort(), Array.from({ length: size }, (_, i) => `y${i}`).sort())
      assert.deepStrictEqual(reads[2], ["late"])
      assert.deepStrictEqual(yield* storedStates(store, ["a", "late"]), ["a=13", "late=101"])
    }))
})
