/**
 * `Runner.runAll` with a query endpoint: two processes' worth of `runAll`
 * (two transformers each, their own groups) share one endpoint per instance.
 * Asked at one instance, each transformer's state of every key is its
 * committed count (forwarded to the instance running the key's partition in
 * that transformer's group), a store declared by one transformer is asked
 * by its name, one declared by both needs `?transformer=` (a 400 naming
 * them without it), `/metadata` names the transformer, and the typed client
 * given one endpoint answers both transformers, the shared store of each by
 * its `transformer` option.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Schema } from "effect"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { KeyValueStore, QueryClient, Runner, SkeinConfig, Topic, Transformer } from "../../src/index.ts"
import type { SkeinError } from "../../src/index.ts"
import { brokers, caughtUp, createTopics, eventually, produce, unique } from "../helpers/kafka.ts"
import { partitionOf } from "../../src/internal/query/partitioner.ts"
import { tempDir } from "../helpers/tempDir.ts"

const partitions = 4

describe("Runner.runAll's query endpoint", () => {
  it.scopedLive("one endpoint per instance serves every transformer, each routed in its own group", () =>
    Effect.gen(function*() {
      const input = unique("qa-in")
      const counted = unique("qa-count")
      const lengths = unique("qa-len")
      const applicationId = unique("qa-app")
      yield* createTopics([{ name: input, partitions }, { name: counted, partitions }, { name: lengths, partitions }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Counted = Topic.make({ name: counted, key: Schema.String, value: Topic.json(Schema.Number) })
      const Lengths = Topic.make({ name: lengths, key: Schema.String, value: Topic.json(Schema.Number) })
      // "latest" in both transformers (ambiguous by name); "chars" only in "length".
      const CountLatest = KeyValueStore.make({ name: "latest", key: Schema.String, value: Schema.Number })
      const LengthLatest = KeyValueStore.make({ name: "latest", key: Schema.String, value: Schema.Number })
      const Chars = KeyValueStore.make({ name: "chars", key: Schema.String, value: Schema.Number })
      const count = Transformer.make({
        name: "count",
        inputs: [In],
        state: Schema.Number,
        stores: [CountLatest],
        transform: (record, state) =>
          Effect.gen(function*() {
            const next = Option.getOrElse(state, () => 0) + 1
            yield* CountLatest.put(record.key ?? "", next)
            return { emit: [Topic.record(Counted, record.key, next)], state: Transformer.set(next) }
          })
      })
      const length = Transformer.make({
        name: "length",
        inputs: [In],
        state: Schema.Number,
        stores: [LengthLatest, Chars],
        transform: (record, state) =>
          Effect.gen(function*() {
            const next = Option.getOrElse(state, () => 0) + record.value.length
            yield* LengthLatest.put(record.key ?? "", next)
            yield* Chars.put(record.key ?? "", next)
            return { emit: [Topic.record(Lengths, record.key, next)], state: Transformer.set(next) }
          })
      })
      const start = (name: string) =>
        Effect.gen(function*() {
          const stats = [Runner.makeStats(), Runner.makeStats()] as const
          const config = SkeinConfig.make({ brokers: brokers(), applicationId, queryPort: 0, stateDir: yield* tempDir(`skein-qa-${name}-`) })
          const fiber = yield* Effect.forkDaemon(
            Runner.runAllWithStats([count, length], stats).pipe(
              Effect.provide(Layer.succeed(SkeinConfig.SkeinConfig, config))
            ) as Effect.Effect<never, SkeinError.RunnerError>
          )
          yield* Effect.addFinalizer(() => Fiber.interrupt(fiber))
          return stats
        })
      const a = yield* start("a")
      const b = yield* start("b")
      yield* eventually(
        Effect.sync(() =>
          [...a, ...b].every((s) => s.queryPort !== undefined && s.assigned.size === partitions / 2)
        ),
        { what: "each transformer's partitions split between the instances" }
      )
      // One port per instance, shared by its runs.
      assert.strictEqual(a[0].queryPort, a[1].queryPort)
      assert.strictEqual(b[0].queryPort, b[1].queryPort)
      assert.notStrictEqual(a[0].queryPort, b[0].queryPort)

      // Three keys on each partition (a partition without records never has a committed offset to catch up to).
      const candidates = Array.from({ length: 100 }, (_, i) => `k${i}`)
      const keys = Array.from({ length: partitions }, (_, p) => candidates.filter((key) => partitionOf(key, partitions) === p).slice(0, 3)).flat()
      assert.strictEqual(keys.length, 3 * partitions)
      // Key i: i + 1 records of "xy" (count i + 1, length 2 (i + 1)).
      yield* produce(input, keys.flatMap((key, i) => Array.from({ length: i + 1 }, () => ({ key, value: "xy" }))))
      yield* caughtUp(`${applicationId}-count`, input)
      yield* caughtUp(`${applicationId}-length`, input)

      const at = `127.0.0.1:${a[0].queryPort}`
      const ask = (path: string) =>
        Effect.promise(async () => {
          const response = await fetch(`http://${at}${path}`)
          return { status: response.status, json: await response.json() as Record<string, unknown> }
        })
      for (const [i, key] of keys.entries()) {
        assert.deepStrictEqual((yield* ask(`/state/count/${key}`)).json.value, i + 1, key)
        assert.deepStrictEqual((yield* ask(`/state/length/${key}`)).json.value, 2 * (i + 1), key)
        assert.deepStrictEqual((yield* ask(`/stores/chars/keys/${key}`)).json.value, 2 * (i + 1), key)
        assert.deepStrictEqual((yield* ask(`/stores/latest/keys/${key}?transformer=count`)).json.value, i + 1, key)
        assert.deepStrictEqual((yield* ask(`/stores/latest/keys/${key}?transformer=length`)).json.value, 2 * (i + 1), key)
      }
      const ambiguous = yield* ask("/stores/latest/keys/k1")
      assert.deepStrictEqual([ambiguous.status, ambiguous.json.error], [400, "InvalidParameter"])
      assert.include(String(ambiguous.json.message), `"count", "length"`)
      const unknownStore = yield* ask("/stores/nope/keys/k1")
      assert.deepStrictEqual([unknownStore.status, unknownStore.json.error, unknownStore.json.known], [404, "UnknownStore", ["chars", "latest"]])
      const unknownTransformer = yield* ask("/state/other/k1")
      assert.deepStrictEqual([unknownTransformer.status, unknownTransformer.json.known], [404, ["count", "length"]])
      const metadata = yield* ask("/metadata")
      assert.deepStrictEqual([metadata.status, metadata.json.error], [400, "InvalidParameter"])
      // Each run announced the shared endpoint in its own group.
      for (const transformer of ["count", "length"]) {
        const routes = yield* ask(`/metadata?transformer=${transformer}`)
        const instances = routes.json.instances as ReadonlyArray<{ readonly endpoint: string; readonly active: ReadonlyArray<number> }>
        assert.deepStrictEqual(
          instances.map((i) => [i.endpoint, i.active.length]).sort(),
          [[`127.0.0.1:${a[0].queryPort}`, 2], [`127.0.0.1:${b[0].queryPort}`, 2]].sort(),
          transformer
        )
      }
      // The typed client at one endpoint: both transformers' states, and the store only "length" declares.
      const client = yield* QueryClient.make({ endpoints: [at] }).pipe(Effect.provide(FetchHttpClient.layer))
      for (const [i, key] of keys.entries()) {
        assert.deepStrictEqual(yield* client.state(count, key), Option.some(i + 1), key)
        assert.deepStrictEqual(yield* client.state(length, key), Option.some(2 * (i + 1)), key)
        assert.deepStrictEqual(yield* client.get(Chars, key), Option.some(2 * (i + 1)), key)
      }
      const page = yield* client.range(Chars, {})
      assert.deepStrictEqual(page.entries.map((e) => e.key).sort(), [...keys].sort())
      // The store both declare: the endpoint's 400 without a transformer; each one's with the `transformer` option
      // (a query's own, or the client's), by key, scanned, and its group's routes.
      const ambiguousTyped = yield* Effect.flip(client.get(CountLatest, "k1"))
      assert.strictEqual(ambiguousTyped.reason, "BadRequest")
      assert.include(ambiguousTyped.detail, `"count", "length"`)
      const lengthClient = yield* QueryClient.make({ endpoints: [at], transformer: length }).pipe(Effect.provide(FetchHttpClient.layer))
      for (const [i, key] of keys.entries()) {
        assert.deepStrictEqual(yield* client.get(CountLatest, key, { transformer: count }), Option.some(i + 1), key)
        assert.deepStrictEqual(yield* client.get(LengthLatest, key, { transformer: "length" }), Option.some(2 * (i + 1)), key)
        assert.deepStrictEqual(yield* lengthClient.get(LengthLatest, key), Option.some(2 * (i + 1)), key)
      }
      const countScan = yield* client.range(CountLatest, { transformer: count })
      assert.deepStrictEqual(countScan.entries.map((e) => `${e.key}=${e.value}`).sort(), keys.map((key, i) => `${key}=${i + 1}`).sort())
      const lengthScan = yield* lengthClient.range(LengthLatest)
      assert.deepStrictEqual(lengthScan.entries.map((e) => `${e.key}=${e.value}`).sort(), keys.map((key, i) => `${key}=${2 * (i + 1)}`).sort())
      const lengthRoutes = yield* lengthClient.metadata
      assert.deepStrictEqual(
        lengthRoutes.instances.map((i) => [i.endpoint, i.active.length]).sort(),
        [[`127.0.0.1:${a[1].queryPort}`, 2], [`127.0.0.1:${b[1].queryPort}`, 2]].sort()
      )
      const owner = yield* client.metadataForKey(keys[0]!, { transformer: count })
      assert.strictEqual(owner.partition, partitionOf(keys[0]!, partitions))
      assert.isTrue(Option.isSome(owner.active))
      assert.strictEqual((yield* Effect.flip(client.metadata)).reason, "BadRequest")
    }), { timeout: 120_000 })
})
