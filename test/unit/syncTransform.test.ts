/**
 * A transform written as `Effect.sync`, `Effect.gen` or `Effect.map` is taken at once by the
 * batch (`Eager.runNow` in `runtime/batch.ts`), like one written with `Effect.succeed`: the same
 * outputs, states and offsets as the same transform that needs the runtime (an `Effect.yieldNow`
 * first); a throw in it is the same defect, and the records before it are kept.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Option, Schema } from "effect"
import type { Result } from "../../src/Transformer.ts"
import { Topic, Transformer } from "../../src/index.ts"
import type { FetchedRecord } from "../../src/internal/kafka/consumer.ts"
import * as Batch from "../../src/internal/runtime/batch.ts"
import * as MemoryStore from "../../src/internal/stores/memoryStore.ts"
import { makeStateCache } from "../../src/internal/stores/StateCache.ts"
import { batchOptions } from "../helpers/batchOptions.ts"

const Words = Topic.make({ name: "words", key: Schema.String, value: Schema.String })
const Counts = Topic.make({ name: "counts", key: Schema.String, value: Schema.NumberFromString })

type Count = (key: string, state: Option.Option<number>) => Result<number>
const count: Count = (key, state) => {
  if (key === "boom") throw new Error("boom")
  const next = Option.getOrElse(state, () => 0) + 1
  return { emit: [Topic.record(Counts, key, next)], state: Transformer.set(next) }
}

/** The same count, written in each way a transform returns its result. */
const styles: Record<string, (key: string, state: Option.Option<number>) => Effect.Effect<Result<number>>> = {
  succeed: (key, state) => Effect.suspend(() => Effect.succeed(count(key, state))),
  sync: (key, state) => Effect.sync(() => count(key, state)),
  gen: (key, state) =>
    Effect.gen(function*() {
      const previous = yield* Effect.succeed(state)
      return count(key, previous)
    }),
  map: (key, state) => Effect.map(Effect.sync(() => state), (previous) => count(key, previous)),
  runtime: (key, state) => Effect.flatMap(Effect.yieldNow(), () => Effect.sync(() => count(key, state)))
}

const transformerOf = (style: string) =>
  Transformer.make({
    name: `count-${style}`,
    inputs: [Words],
    state: Schema.Number,
    transform: (record, state) => styles[style]!(record.key ?? "", state)
  })

const recordsOf = (keys: ReadonlyArray<string>): Array<FetchedRecord> =>
  keys.map((key, offset) => ({
    topic: Words.name,
    partition: 0,
    offset,
    key: Buffer.from(key),
    value: Buffer.from("w"),
    headers: {},
    rawHeaders: {},
    timestamp: 1_000
  }))

const runOnce = (style: string, keys: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const store = MemoryStore.make(style)
    const records = recordsOf(keys)
    const result = yield* Batch.run(transformerOf(style), Option.some(store), [
      { topic: Words.name, partition: 0, records, endOffset: records.length }
    ], batchOptions(makeStateCache(1_000)))
    return {
      outputs: result.outputs.map((o) => `${o.key?.toString()}=${o.value?.toString()}`),
      writes: result.writes.map((w) => `${w.key}=${w.value}`),
      cuts: result.cuts,
      processed: result.processed,
      failure: Option.map(result.failure, (cause) => Cause.isDie(cause) ? `die: ${Cause.squash(cause)}` : Cause.pretty(cause))
    }
  })

const keys = Array.from({ length: 300 }, (_, i) => `k${(i * 7) % 23}`)

describe("a transform done at once, however it is written", () => {
  it.effect("Effect.sync, Effect.gen, Effect.map and Effect.succeed give what a transform run by the runtime gives", () =>
    Effect.gen(function*() {
      const expected = yield* runOnce("runtime", keys)
      assert.strictEqual(expected.processed, keys.length)
      assert.strictEqual(expected.outputs.length, keys.length)
      for (const style of ["succeed", "sync", "gen", "map"]) {
        assert.deepStrictEqual(yield* runOnce(style, keys), expected, style)
      }
    }))

  it.effect("a throw is the same defect, with the records before it kept", () =>
    Effect.gen(function*() {
      const poisoned = [...keys.slice(0, 100), "boom", ...keys.slice(100)]
      const expected = yield* runOnce("runtime", poisoned)
      assert.strictEqual(expected.processed, 100, "the records before the throw are kept")
      assert.deepStrictEqual(Option.getOrUndefined(expected.failure), "die: Error: boom")
      for (const style of ["succeed", "sync", "gen", "map"]) {
        assert.deepStrictEqual(yield* runOnce(style, poisoned), expected, style)
      }
    }))
})
