/**
 * The windowed aggregations' two speeds give one result. A record whose
 * operators are synchronous runs without the fiber runtime (`eager.ts`); an
 * effectful operator before or after the aggregation, or a state read from
 * the store (a cold cache), sends it through Effect: tumbling, hopping,
 * sliding and session counts and a tumbling aggregate (an object), emitting
 * updates and final results, write the same records and the same stored
 * states either way. The task's time and
 * index, stored once per transaction (`storedAtEnd.ts`), are stored as a
 * record-by-record encoding would have left them, also in a batch cut short
 * by a failing record.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Exit, Option, Schema } from "effect"
import {
  KGroupedStream,
  KStream,
  KTable,
  SessionWindowedKStream,
  SessionWindows,
  SlidingWindows,
  TimeWindowedKStream,
  TimeWindows,
  Topic,
  Topology,
  Transformer,
  Windowed
} from "../../src/index.ts"
import * as Batch from "../../src/internal/runtime/batch.ts"
import { batchOptions } from "../helpers/batchOptions.ts"
import type { FetchedRecord } from "../../src/internal/kafka/consumer.ts"
import * as MemoryStore from "../../src/internal/stores/memoryStore.ts"
import { makeStateCache } from "../../src/internal/stores/StateCache.ts"
import type { StateStore } from "../../src/internal/stores/StateStore.ts"
import type { StateStoreError } from "../../src/SkeinError.ts"

const Events = Topic.make({ name: "events", key: Schema.String, value: Topic.json(Schema.Struct({ at: Schema.Number })) })
const Counts = Topic.make({ name: "counts", key: Windowed.json(Schema.String), value: Topic.json(Schema.NullOr(Schema.Number)) })

type Emit = TimeWindowedKStream.WindowedOptions["emit"]
type Shape = "tumbling" | "hopping" | "sliding" | "session" | "aggregate"

/** A count over `shape` windows; `effectful`: an effectful identity operator before the grouping and after the aggregation. */
const topologyOf = (shape: Shape, emit: Emit, effectful: boolean) => {
  const identity = <V>(value: V) => Effect.suspend(() => Effect.succeed(value))
  const source = KStream.fromTopics([Events], { timestamp: (record) => record.value.at })
  const grouped = (effectful ? source.pipe(KStream.mapValuesEffect(identity)) : source).pipe(KStream.groupByKey())
  const counted = shape === "session"
    ? grouped.pipe(
      KGroupedStream.windowedBy(SessionWindows.ofInactivityGapAndGrace(300, 200)),
      SessionWindowedKStream.count({ name: "counts", emit })
    )
    : shape === "aggregate"
    // An aggregate the user's functions make (an object): its windows are stored as each record finishes.
    ? grouped.pipe(
      KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace(1000, 200)),
      TimeWindowedKStream.aggregate(() => ({ n: 0, last: 0 }), (total, record) => ({ n: total.n + 1, last: record.value.at }), {
        name: "counts",
        emit,
        state: Schema.Struct({ n: Schema.Number, last: Schema.Number })
      }),
      KTable.mapValues((total) => total.n + total.last / 1e9)
    )
    : grouped.pipe(
      KGroupedStream.windowedBy(
        shape === "tumbling"
          ? TimeWindows.ofSizeAndGrace(1000, 200)
          : shape === "hopping"
          ? TimeWindows.ofSizeAndGrace(1000, 200).pipe(TimeWindows.advanceBy(250))
          : SlidingWindows.ofTimeDifferenceAndGrace(500, 200)
      ),
      TimeWindowedKStream.count({ name: "counts", emit })
    )
  const updates = counted.pipe(KTable.toStream)
  return Topology.make("counting", [
    (effectful ? updates.pipe(KStream.mapValuesEffect(identity)) : updates).pipe(KStream.to(Counts))
  ])
}

const transformerOf = (shape: Shape, emit: Emit, effectful: boolean) => {
  const compiled = Topology.compile(topologyOf(shape, emit, effectful), "app")
  if (Either.isLeft(compiled)) throw new Error(compiled.left.message)
  // compile erases the transformer's types.
  return compiled.right.subTopologies[0]!.transformer as Compiled
}

/** Seeded input: 4 keys, event time mostly forward, some records late past grace, some gaps. */
const inputs = (n: number, seed: number): Array<FetchedRecord> => {
  let state = seed
  const next = () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648
  let time = 10_000
  return Array.from({ length: n }, (_, offset) => {
    time += next() < 0.05 ? 3_000 : Math.floor(next() * 120)
    const at = next() < 0.1 ? time - Math.floor(next() * 1_500) : time
    return {
      topic: Events.name,
      partition: 0,
      offset,
      key: Buffer.from(`k${Math.floor(next() * 4)}`),
      value: Buffer.from(JSON.stringify({ at })),
      headers: {},
      rawHeaders: {},
      timestamp: 0
    }
  })
}


interface Outcome {
  readonly outputs: Array<string>
  /** Each batch's writes, sorted by key. */
  readonly writes: Array<string>
  readonly failure: string
}

type Compiled = Transformer.Transformer<readonly [typeof Events], unknown, unknown, never>

/**
 * Runs `records` through `transformer` in batches of `batchSize` on one store (each batch's writes
 * applied to it, as a commit does); `cold`: a new (empty) state cache per batch, so the batch reads
 * the task's time and index from the store.
 */
const runBatches = (
  transformer: Compiled,
  records: ReadonlyArray<FetchedRecord>,
  batchSize: number,
  cold: boolean
): Effect.Effect<Outcome, StateStoreError> =>
  Effect.gen(function*() {
    const store: StateStore = MemoryStore.make("memory")
    let cache = makeStateCache(100_000)
    const outputs: Array<string> = []
    const writes: Array<string> = []
    for (let from = 0; from < records.length; from += batchSize) {
      const slice = records.slice(from, from + batchSize)
      if (cold) cache = makeStateCache(100_000)
      const result = yield* Batch.run(transformer, Option.some(store), [
        { topic: Events.name, partition: 0, records: slice, endOffset: from + slice.length }
      ], batchOptions(cache))
      for (const output of result.outputs) outputs.push(`${output.key?.toString()}=${output.value?.toString()}@${output.timestamp}`)
      const sorted = [...result.writes].sort((a, b) => a.key < b.key ? -1 : a.key > b.key ? 1 : 0)
      writes.push(sorted.map((w) => `${w.key}=${w.value}`).join("\n"))
      yield* store.replay(result.writes)
      for (const [key, state] of result.states) cache.set(key, state)
      if (Option.isSome(result.failure)) return { outputs, writes, failure: String(result.failure.value) }
    }
    return { outputs, writes, failure: "" }
  })

/** The same transformer without Skein's marks (a copy of its fields): its states copied on read and each one stored per record. */
const unmarked = (transformer: Compiled): Compiled => ({ ...transformer })

describe("windowed aggregations, at once or through Effect", () => {
  it("a pure topology's record is done at once (an Exit); an effectful operator makes it an Effect", () => {
    const record = { topic: Events.name, partition: 0, offset: 0, key: "k", value: { at: 5 }, headers: {}, rawHeaders: [], timestamp: 5 }
    const task: Transformer.TaskState<unknown> = { get: () => Effect.succeed(Option.none()) }
    for (const effectful of [false, true]) {
      const transformer = transformerOf("tumbling", "onWindowUpdate", effectful)
      const result = transformer.transform(record, Option.none(), task)
      assert.strictEqual(Exit.isExit(result), !effectful)
      const done = Effect.runSync(result)
      assert.strictEqual(done.emit?.length, 1)
    }
  })

  it.effect("tumbling, hopping, sliding and session counts and a tumbling aggregate: the same outputs and stored states at once, through Effect, and from a cold cache", () =>
    Effect.gen(function*() {
      const records = inputs(400, 7)
      for (const shape of ["tumbling", "hopping", "sliding", "session", "aggregate"] as const) {
        for (const emit of ["onWindowUpdate", "onWindowClose"] as const) {
          const what = `${shape} ${emit}`
          const eager = yield* runBatches(transformerOf(shape, emit, false), records, 50, false)
          assert.ok(eager.outputs.length > 20, `${what}: ${eager.outputs.length} results`)
          assert.strictEqual(eager.failure, "")
          for (
            const [variant, outcome] of [
              ["effectful operators", yield* runBatches(transformerOf(shape, emit, true), records, 50, false)],
              ["a cold cache per batch", yield* runBatches(transformerOf(shape, emit, false), records, 50, true)],
              ["states stored per record", yield* runBatches(unmarked(transformerOf(shape, emit, false)), records, 50, false)]
            ] as const
          ) {
            assert.deepStrictEqual(outcome.outputs, eager.outputs, `${what}, ${variant}: outputs`)
            assert.deepStrictEqual(outcome.writes, eager.writes, `${what}, ${variant}: each batch's writes`)
          }
        }
      }
    }))

  it.effect("a batch cut short by a failing record stores the task's time its kept records left", () =>
    Effect.gen(function*() {
      const records = inputs(120, 3)
      // Record 70 has a negative event time: no rule, so the batch ends there and commits records 0-69.
      const failing = records.map((r) => r.offset === 70 ? { ...r, value: Buffer.from(JSON.stringify({ at: -1 })) } : r)
      const transformer = transformerOf("tumbling", "onWindowClose", false)
      const atEnd = yield* runBatches(transformer, failing, 120, false)
      const perRecord = yield* runBatches(unmarked(transformerOf("tumbling", "onWindowClose", false)), failing, 120, false)
      assert.match(atEnd.failure, /InvalidTimestamp/)
      assert.deepStrictEqual(atEnd, perRecord)
      const kept = failing.slice(0, 70).map((r) => (JSON.parse(r.value!.toString()) as { at: number }).at)
      const time = atEnd.writes[0]!.split("\n").find((line) => line.startsWith("t="))
      assert.ok(time !== undefined && time.includes(`"streamTime":${Math.max(...kept)}`), time)
    }))
})
