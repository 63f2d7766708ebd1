/**
 * The typed query client against a `Runner.runAll` endpoint whose two
 * transformers ("count" and "length") both declare a store named "latest",
 * without a broker: two fake instances, each answering through the shared
 * endpoint's picking (`SharedSources`) and the endpoint's own answers
 * (`QueryServer.respond`), each transformer with its own owners (its own
 * group). Without a transformer the client's store queries and routes are
 * the endpoint's 400 naming both; with the client's `transformer` option, or
 * a query's own, every query (by key, a scan of every partition, windows,
 * the routes of the key and of every partition) asks that transformer's
 * store in its own group.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Option, Schedule, Schema } from "effect"
import { KeyValueStore, QueryClient, Topic, Transformer, WindowStore } from "../../src/index.ts"
import * as CommitReceipt from "../../src/internal/runtime/CommitReceipt.ts"
import * as MemoryStore from "../../src/internal/stores/memoryStore.ts"
import { partitionOf } from "../../src/internal/query/partitioner.ts"
import type * as Queries from "../../src/internal/query/Queries.ts"
import * as QueryError from "../../src/internal/query/QueryError.ts"
import * as SharedSources from "../../src/internal/query/SharedSources.ts"
import * as QueryServer from "../../src/internal/query/queryServer.ts"
import { encodeTime, namespace } from "../../src/internal/stores/keys.ts"

const partitions = 4
const In = Topic.make({ name: "in", key: Schema.String, value: Schema.String })
// "latest" in both transformers; "steps" (a WindowStore) in both too.
const CountLatest = KeyValueStore.make({ name: "latest", key: Schema.String, value: Schema.Number })
const LengthLatest = KeyValueStore.make({ name: "latest", key: Schema.String, value: Schema.Number })
const Steps = WindowStore.make({ name: "steps", key: Schema.String, value: Schema.Number })
const count = Transformer.make({ name: "count", inputs: [In], state: Schema.Number, stores: [CountLatest, Steps], transform: () => Effect.succeed({}) })
const length = Transformer.make({ name: "length", inputs: [In], state: Schema.Number, stores: [LengthLatest, Steps], transform: () => Effect.succeed({}) })

/** Key i on partition i % 4: "count" stores i, "length" 10 i. */
const keys = Array.from({ length: 8 }, (_, i) => {
  for (let n = 0; ; n++) if (partitionOf(`k${i}-${n}`, partitions) === i % partitions) return `k${i}-${n}`
})
const valueOf = (transformer: string, i: number) => transformer === "count" ? i : 10 * i

/** Each transformer's owners: "count" runs partitions 0, 1 on a:1 and 2, 3 on b:2; "length" the other way round. */
const owners: Record<string, ReadonlyArray<string>> = { count: ["a:1", "a:1", "b:2", "b:2"], length: ["b:2", "b:2", "a:1", "a:1"] }

const fakes = Effect.gen(function*() {
  const requests: Array<string> = []
  const sourceOf = (transformer: string, self: string) =>
    Effect.gen(function*() {
      const stores = new Map<number, Queries.PartitionState>()
      for (let p = 0; p < partitions; p++) {
        const store = MemoryStore.make(`${transformer}-${p}`, p)
        const entries = keys.flatMap((key, i) =>
          i % partitions !== p ? [] : [
            { key: `${namespace("latest")}${key}`, value: String(valueOf(transformer, i)) },
            { key: `${namespace("steps")}${key}\u0000${encodeTime(1000)}`, value: String(valueOf(transformer, i)) }
          ]
        )
        yield* store.write(CommitReceipt.issue(p, []), entries)
        stores.set(p, store)
      }
      const own = owners[transformer]!.flatMap((owner, p) => owner === self ? [p] : [])
      const source: Queries.Source = {
        transformer,
        stateful: true,
        keyValueStores: ["latest"],
        otherStores: new Map([["steps", "WindowStore"]]),
        partitions,
        partition: (p) => own.includes(p) ? stores.get(p) ?? "absent" : "absent",
        assigned: () => own,
        routes: () => ({ active: owners[transformer]!, standbys: owners[transformer]!.map(() => []) }),
        self: () => self,
        inputs: ["in"],
        position: () => new Map(),
        nextPositionChange: () => Effect.never,
        standby: () => undefined
      }
      return source
    })
  const declared: ReadonlyArray<SharedSources.Declared> = [count, length].map((t) => ({
    name: t.name,
    stateful: true,
    stores: [{ name: "latest", kind: "KeyValueStore" }, { name: "steps", kind: "WindowStore" }]
  }))
  const instances = new Map<string, SharedSources.SharedSources>()
  for (const self of ["a:1", "b:2"]) {
    const shared = SharedSources.make(declared)
    shared.register(yield* sourceOf("count", self))
    shared.register(yield* sourceOf("length", self))
    instances.set(self, shared)
  }
  const http = HttpClient.make((request, url) =>
    Effect.gen(function*() {
      const path = `${url.pathname}${url.search}`
      requests.push(`${url.host}${path}`)
      const shared = instances.get(url.host)
      if (shared === undefined) return yield* Effect.dieMessage(`no instance ${url.host}`)
      // As the shared endpoint's handler: pick the source, answer from it (the client asks not to forward).
      const response = yield* Either.match(shared.pick(path), {
        onLeft: (error) =>
          Effect.succeed({ status: QueryError.status(error), body: new TextEncoder().encode(JSON.stringify(QueryError.body(error))) }),
        onRight: (source) =>
          Effect.map(QueryServer.respond(source, path), (r) => ({
            status: r.status,
            body: r.body._tag === "Uint8Array" ? r.body.body : new Uint8Array()
          }))
      })
      return HttpClientResponse.fromWeb(request, new Response(response.body, { status: response.status }))
    })
  )
  return { requests, layer: Layer.succeed(HttpClient.HttpClient, http) }
})

describe("the query client at a runAll endpoint whose transformers share a store name", () => {
  it.effect("asks the transformer its `transformer` option names (the client's, or a query's own), in that transformer's group", () =>
    Effect.gen(function*() {
      const { layer, requests } = yield* fakes
      const make = (options: Partial<QueryClient.Options> = {}) =>
        QueryClient.make({ endpoints: ["a:1"], retry: Schedule.stop, ...options }).pipe(Effect.provide(layer))

      // Without a transformer: the endpoint's 400 naming both, returned at once.
      const plain = yield* make()
      const ambiguous = yield* Effect.flip(plain.get(CountLatest, keys[0]!))
      assert.strictEqual(ambiguous.reason, "BadRequest")
      assert.include(ambiguous.detail, `store "latest" is declared by transformers "count", "length": add ?transformer={name}`)
      assert.strictEqual((yield* Effect.flip(plain.range(CountLatest))).reason, "BadRequest")
      assert.strictEqual((yield* Effect.flip(plain.metadata)).reason, "BadRequest")
      assert.strictEqual((yield* Effect.flip(plain.metadataForKey(keys[0]!))).reason, "BadRequest")

      // A query's own transformer (the transformer itself or its name), at the client without one.
      for (const [i, key] of keys.entries()) {
        assert.deepStrictEqual(yield* plain.get(CountLatest, key, { transformer: count }), Option.some(i), key)
        assert.deepStrictEqual(yield* plain.get(LengthLatest, key, { transformer: "length" }), Option.some(10 * i), key)
        assert.deepStrictEqual(
          yield* plain.windows(Steps, key, 0, 5000, { transformer: length }),
          [{ key, start: 1000, value: 10 * i }],
          key
        )
      }
      const lengthScan = yield* plain.range(LengthLatest, { transformer: length })
      assert.deepStrictEqual(
        lengthScan.entries.map((e) => [e.key, e.value]),
        keys.map((key, i) => [key, 10 * i]).sort(([a], [b]) => (String(a) < String(b) ? -1 : 1))
      )
      // Each transformer's routes are its own group's.
      assert.deepStrictEqual(yield* plain.metadataForKey(keys[0]!, { transformer: count }), {
        partition: 0,
        active: Option.some("a:1"),
        standbys: []
      })
      assert.deepStrictEqual(yield* plain.metadataForKey(keys[0]!, { transformer: "length" }), {
        partition: 0,
        active: Option.some("b:2"),
        standbys: []
      })

      // The client's transformer: every store query and the routes ask "length"; a query's own overrides it.
      const lengths = yield* make({ transformer: length })
      requests.length = 0
      assert.deepStrictEqual(yield* lengths.get(LengthLatest, keys[1]!), Option.some(10))
      // keys[1] is on partition 1: "length" runs it on b:2, so a:1 answers NotHere and the client follows it.
      assert.deepStrictEqual(requests.map((r) => r.split("/")[0]), ["a:1", "b:2"])
      assert.isTrue(requests.every((r) => r.includes("transformer=length")), JSON.stringify(requests))
      assert.deepStrictEqual(yield* lengths.get(CountLatest, keys[1]!, { transformer: count }), Option.some(1))
      const page = yield* lengths.prefix(LengthLatest, "k", { limit: 3 })
      assert.deepStrictEqual(page.entries.map((e) => e.value), keys.map((key, i) => [key, 10 * i] as const)
        .sort(([a], [b]) => (a < b ? -1 : 1)).slice(0, 3).map(([, v]) => v))
      const routes = yield* lengths.metadata
      assert.deepStrictEqual(
        routes.instances.map((i) => [i.endpoint, i.active]),
        [["a:1", [2, 3]], ["b:2", [0, 1]]]
      )
      const countRoutes = yield* Effect.flatMap(make({ transformer: "count" }), (c) => c.metadata)
      assert.deepStrictEqual(countRoutes.instances.map((i) => [i.endpoint, i.active]), [["a:1", [0, 1]], ["b:2", [2, 3]]])

      // A transformer that is not the endpoint's: a 404 naming the known ones.
      const unknown = yield* Effect.flip(plain.get(CountLatest, keys[0]!, { transformer: "other" }))
      assert.strictEqual(unknown.reason, "NotFound")
      assert.include(unknown.detail, `"count", "length"`)
    }))
})
