import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Topic, Transformer } from "../../src/index.ts"
import type { SkeinConfig } from "../../src/index.ts"
import { caughtUp, createTopics, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

/** Transform calls in flight, per counter name, and the most seen at once. */
const makeTracker = () => {
  const inFlight = new Map<string, number>()
  const max = new Map<string, number>()
  const calls: Array<{ readonly partition: number; readonly offset: number; readonly key: string }> = []
  const enter = (names: ReadonlyArray<string>) =>
    Effect.sync(() => {
      for (const name of names) {
        const n = (inFlight.get(name) ?? 0) + 1
        inFlight.set(name, n)
        max.set(name, Math.max(max.get(name) ?? 0, n))
      }
    })
  const exit = (names: ReadonlyArray<string>) =>
    Effect.sync(() => {
      for (const name of names) inFlight.set(name, (inFlight.get(name) ?? 0) - 1)
    })
  return { max, calls, enter, exit }
}

type Tracker = ReturnType<typeof makeTracker>

/**
 * A copier that counts its calls in flight per input partition ("p<n>"), per
 * key of a partition ("p<n>/<key>") and in total ("all"), and emits
 * "<partition>:<offset>" to a one-partition output topic (log order = commit order).
 */
const tracked = (In: Topic.Topic<string, string>, output: string, tracker: Tracker) => {
  const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
  return Transformer.stateless({
    name: "tracked",
    inputs: [In],
    transform: (record) => {
      const names = [`p${record.partition}`, `p${record.partition}/${record.key}`, "all"]
      return Effect.acquireUseRelease(
        Effect.zipRight(
          Effect.sync(() => tracker.calls.push({ partition: record.partition, offset: record.offset, key: record.key ?? "" })),
          tracker.enter(names)
        ),
        () => Effect.sleep("20 millis"),
        () => tracker.exit(names)
      ).pipe(Effect.as({ emit: [Topic.record(Out, record.key, `${record.partition}:${record.offset}`)] }))
    }
  })
}

const isIncreasing = (list: ReadonlyArray<number>) => list.every((n, i) => i === 0 || n > list[i - 1]!)

/**
 * Runs the tracked copier over `perPartition` records per partition with
 * `keys` keys each, produced in one go once every task runs (so they arrive in
 * few, large fetches), and returns the tracker and the outputs per input partition.
 */
const scenario = (
  options: {
    readonly partitions: number
    readonly perPartition: number
    readonly keys: number
    readonly keyConcurrency: boolean
    readonly config?: Partial<Omit<SkeinConfig.Options, "applicationId" | "brokers">>
  }
) =>
  Effect.gen(function*() {
    const input = unique("order-in")
    const output = unique("order-out")
    const applicationId = unique("order-app")
    yield* createTopics([{ name: input, partitions: options.partitions }, { name: output, partitions: 1 }])
    const In = Topic.make({ name: input, key: Schema.String, value: Schema.String, keyConcurrency: options.keyConcurrency })
    const tracker = makeTracker()
    yield* startInstance(tracked(In, output, tracker), { ...options.config, applicationId })
    const partitions = Array.from({ length: options.partitions }, (_, p) => p)
    yield* produce(input, partitions.map((partition) => ({ key: "warm-up", value: "warm-up", partition })))
    yield* caughtUp(applicationId, input)
    tracker.max.clear()
    yield* produce(
      input,
      partitions.flatMap((partition) =>
        Array.from({ length: options.perPartition }, (_, i) => ({ key: `k${i % options.keys}`, value: `v${i}`, partition }))
      )
    )
    yield* caughtUp(applicationId, input)
    const outputs = (yield* readCommitted(output)).map((r) => {
      const [partition, offset] = (r.value ?? "").split(":").map(Number)
      return { partition: partition ?? -1, offset: offset ?? -1, key: r.key ?? "" }
    })
    return { tracker, outputs, partitions }
  })

describe("ordering and concurrency", () => {
  it.scopedLive("default: one record at a time per partition, in offset order", () =>
    Effect.gen(function*() {
      const { tracker, outputs, partitions } = yield* scenario({ partitions: 2, perPartition: 20, keys: 4, keyConcurrency: false })
      for (const p of partitions) {
        assert.strictEqual(tracker.max.get(`p${p}`), 1, `partition ${p}: never more than one call in flight`)
        const called = tracker.calls.filter((c) => c.partition === p).map((c) => c.offset)
        assert.deepStrictEqual(called, Array.from({ length: 21 }, (_, i) => i), `partition ${p}: called once per record, in offset order`)
        const produced = outputs.filter((o) => o.partition === p).map((o) => o.offset)
        assert.deepStrictEqual(produced, Array.from({ length: 21 }, (_, i) => i), `partition ${p}: outputs in offset order`)
      }
    }), 60_000)

  it.scopedLive("keyConcurrency: different keys of a partition overlap, each key stays in offset order", () =>
    Effect.gen(function*() {
      const keys = 4
      const { tracker, outputs } = yield* scenario({ partitions: 1, perPartition: 40, keys, keyConcurrency: true })
      assert.isAbove(tracker.max.get("p0") ?? 0, 1, "calls for different keys of one partition overlapped")
      assert.strictEqual(tracker.calls.length, 41, "each record ran once")
      for (let k = 0; k < keys; k++) {
        const key = `k${k}`
        assert.strictEqual(tracker.max.get(`p0/${key}`), 1, `${key}: never more than one call in flight`)
        const called = tracker.calls.filter((c) => c.key === key).map((c) => c.offset)
        assert.strictEqual(called.length, 10)
        assert.ok(isIncreasing(called), `${key}: called in offset order (${called.join(",")})`)
        const produced = outputs.filter((o) => o.key === key).map((o) => o.offset)
        assert.deepStrictEqual(produced, called, `${key}: outputs in offset order`)
      }
      assert.strictEqual(outputs.length, 41)
    }), 60_000)

  it.scopedLive("maxConcurrency 2 over a 4-partition topic: at most 2 calls in flight in total", () =>
    Effect.gen(function*() {
      const { tracker, outputs, partitions } = yield* scenario({
        partitions: 4,
        perPartition: 15,
        keys: 3,
        keyConcurrency: false,
        config: { maxConcurrency: 2 }
      })
      assert.strictEqual(tracker.max.get("all"), 2, "two calls ran at once, never more")
      for (const p of partitions) {
        assert.strictEqual(tracker.max.get(`p${p}`), 1, `partition ${p}: one call at a time`)
        assert.deepStrictEqual(
          outputs.filter((o) => o.partition === p).map((o) => o.offset),
          Array.from({ length: 16 }, (_, i) => i),
          `partition ${p}: outputs once each, in offset order`
        )
      }
    }), 60_000)
})
