/**
 * The typed query client against fake instances: an `HttpClient` whose
 * "instances" answer with the query endpoint's own answers (`respond`) from
 * in-memory committed stores. The client follows NotHere to the owner the
 * answer names, retries NotReady on its schedule and gives up when it ends
 * (a bounded default, checked on the TestClock), moves past an endpoint that
 * does not answer, decodes values with the transformer's and stores' Schemas,
 * merges a scan's pages from every instance in key order (and refuses a
 * partial one), and returns the other failures at once.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Fiber, Layer, Option, Redacted, Schedule, Schema, TestClock } from "effect"
import { KeyValueStore, QueryClient, SessionStore, Topic, Transformer, WindowStore } from "../../src/index.ts"
import * as CommitReceipt from "../../src/internal/runtime/CommitReceipt.ts"
import * as MemoryStore from "../../src/internal/stores/memoryStore.ts"
import { partitionOf } from "../../src/internal/query/partitioner.ts"
import type * as Queries from "../../src/internal/query/Queries.ts"
import * as QueryServer from "../../src/internal/query/queryServer.ts"
import type * as QueryRoutes from "../../src/internal/query/QueryRoutes.ts"
import { encodeTime, namespace } from "../../src/internal/stores/keys.ts"

const partitions = 4

const Visit = Schema.Struct({ pages: Schema.Number, last: Schema.DateFromString })
const Counter = Transformer.make({
  name: "count",
  inputs: [Topic.make({ name: "in", key: Schema.String, value: Schema.String })],
  state: Visit,
  transform: () => Effect.succeed({})
})
/** A store keyed by numbers (their decimal text), valued by a struct with a Date. */
const Totals = KeyValueStore.make({ name: "totals", key: Schema.NumberFromString, value: Visit })
const Clicks = WindowStore.make({ name: "clicks", key: Schema.String, value: Schema.Number })
const Spans = SessionStore.make({ name: "spans", key: Schema.String, value: Schema.Number })

const keyOn = (partition: number, prefix: string): string => {
  for (let i = 0; ; i++) if (partitionOf(`${prefix}${i}`, partitions) === partition) return `${prefix}${i}`
}

const stateText = (value: typeof Visit.Type) => Schema.encodeSync(Option.getOrThrow(Counter.state))(value)
const storeText = (value: typeof Visit.Type) => Either.getOrThrow(Totals.values.encode(value))
const visit = (pages: number) => ({ pages, last: new Date(Date.UTC(2026, 0, pages)) })

/** Two fake instances: `a:1` runs partitions 0 and 1, `b:2` runs 2 and 3 (partition 3 restoring until `ready`). */
const fakes = Effect.gen(function*() {
  const entries = new Map<number, Array<{ readonly key: string; readonly value: string }>>()
  const add = (partition: number, key: string, value: string) => entries.set(partition, [...(entries.get(partition) ?? []), { key, value }])
  add(0, keyOn(0, "k"), stateText(visit(1)))
  add(2, keyOn(2, "k"), stateText(visit(2)))
  // Totals: the numbers 0..19, each on partition n % 4, value n pages.
  for (let n = 0; n < 20; n++) add(n % 4, `${namespace("totals")}${n}`, storeText(visit(n)))
  const windowKey = keyOn(2, "w")
  for (let i = 0; i < 5; i++) add(2, `${namespace("clicks")}${windowKey}\u0000${encodeTime(i * 1000)}`, String(i * 10))
  add(2, `${namespace("spans")}${windowKey}\u0000${encodeTime(900)}${encodeTime(100)}`, "7")
  const stores = new Map<number, Queries.PartitionState>()
  for (let p = 0; p < partitions; p++) {
    const store = MemoryStore.make(`memory-${p}`, p)
    yield* store.write(CommitReceipt.issue(p, []), entries.get(p) ?? [])
    stores.set(p, store)
  }
  const state = { ready: true, requests: [] as Array<string>, dead: new Set<string>(["dead:9"]) }
  const routes = (): QueryRoutes.QueryRoutes => ({ active: ["a:1", "a:1", "b:2", "b:2"], standbys: [[], [], [], []] })
  const sourceOf = (self: string, own: ReadonlyArray<number>): Queries.Source => ({
    transformer: "count",
    stateful: true,
    keyValueStores: ["totals"],
    otherStores: new Map([["clicks", "WindowStore"], ["spans", "SessionStore"]]),
    partitions,
    partition: (p) => !own.includes(p) ? "absent" : p === 3 && !state.ready ? "restoring" : stores.get(p) ?? "absent",
    assigned: () => [...own],
    routes,
    self: () => self,
    inputs: ["in"],
    position: () => new Map(),
    nextPositionChange: () => Effect.never,
    standby: () => undefined
  })
  const instances = new Map([["a:1", sourceOf("a:1", [0, 1])], ["b:2", sourceOf("b:2", [2, 3])]])
  const http = HttpClient.make((request, url) =>
    Effect.gen(function*() {
      state.requests.push(`${url.host}${url.pathname}`)
      const source = instances.get(url.host)
      if (source === undefined || state.dead.has(url.host)) {
        return yield* new HttpClientError.RequestError({ request, reason: "Transport", description: "connection refused" })
      }
      if (request.headers["authorization"] !== "Bearer t0ken") {
        return HttpClientResponse.fromWeb(request, new Response(JSON.stringify({ error: "Unauthorized", message: "token" }), { status: 401 }))
      }
      assert.strictEqual(request.headers["x-skein-forward"], "no")
      const response = yield* QueryServer.respond(source, `${url.pathname}${url.search}`)
      const body = response.body._tag === "Uint8Array" ? response.body.body : new Uint8Array()
      return HttpClientResponse.fromWeb(request, new Response(body, { status: response.status }))
    })
  )
  return { state, layer: Layer.succeed(HttpClient.HttpClient, http), windowKey }
})

const clientOf = (layer: Layer.Layer<HttpClient.HttpClient>, options: Partial<QueryClient.Options> = {}) =>
  QueryClient.make({ endpoints: ["a:1"], token: Redacted.make("t0ken"), retry: Schedule.recurs(3), ...options }).pipe(Effect.provide(layer))

describe("the query client", () => {
  it.effect("follows NotHere to the owner and decodes the state and a store's values with their Schemas", () =>
    Effect.gen(function*() {
      const { layer, state } = yield* fakes
      const client = yield* clientOf(layer)
      assert.deepStrictEqual(yield* client.state(Counter, keyOn(0, "k")), Option.some(visit(1)))
      state.requests.length = 0
      // Partition 2's key asked at a:1: NotHere naming b:2, then b:2.
      assert.deepStrictEqual(yield* client.state(Counter, keyOn(2, "k")), Option.some(visit(2)))
      assert.deepStrictEqual(state.requests.map((r) => r.split("/")[0]), ["a:1", "b:2"])
      assert.deepStrictEqual(yield* client.state(Counter, keyOn(1, "missing")), Option.none())
      const seven = yield* client.get(Totals, 7, { partition: 3 })
      assert.deepStrictEqual(seven, Option.some(visit(7)))
      assert.instanceOf(Option.getOrThrow(seven).last, Date)
      const metadata = yield* client.metadataForKey(keyOn(2, "k"))
      assert.deepStrictEqual(metadata, { partition: 2, active: Option.some("b:2"), standbys: [] })
    }))

  it.effect("a scan merges every instance's page in key order and pages on with after", () =>
    Effect.gen(function*() {
      const { layer } = yield* fakes
      const client = yield* clientOf(layer)
      const keys: Array<number> = []
      let after: Option.Option<number> = Option.none()
      for (let page = 0; page < 10; page++) {
        const result: QueryClient.Page<number, typeof Visit.Type> = yield* client.range(Totals, { limit: 6, after: Option.getOrUndefined(after) })
        for (const entry of result.entries) {
          assert.strictEqual(entry.partition, entry.key % 4)
          assert.deepStrictEqual(entry.value, visit(entry.key))
          keys.push(entry.key)
        }
        after = result.next
        if (Option.isNone(after)) break
      }
      // Key order is the keys' text order: "0", "1", "10", "11", ...
      assert.deepStrictEqual(keys, Array.from({ length: 20 }, (_, n) => n).sort((x, y) => String(x) < String(y) ? -1 : 1))
      const prefix = yield* client.prefix(Totals, "1")
      assert.deepStrictEqual(prefix.entries.map((e) => e.key), [1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19])
      const ranged = yield* client.range(Totals, { from: 3, to: 5 })
      assert.deepStrictEqual(ranged.entries.map((e) => e.key), [3, 4, 5])
      const one = yield* client.range(Totals, { partition: 2 })
      assert.deepStrictEqual(one.entries.map((e) => e.key), [10, 14, 18, 2, 6])
    }))

  it.effect("window and session stores: every page, decoded", () =>
    Effect.gen(function*() {
      const { layer, windowKey } = yield* fakes
      const client = yield* clientOf(layer)
      const windows = yield* client.windows(Clicks, windowKey, 1000, 3000)
      assert.deepStrictEqual(windows, [1, 2, 3].map((i) => ({ key: windowKey, start: i * 1000, value: i * 10 })))
      assert.deepStrictEqual(yield* client.windows(Clicks, windowKey, 5, 4), [])
      assert.deepStrictEqual(yield* client.sessions(Spans, windowKey), [{ key: windowKey, start: 100, end: 900, value: 7 }])
      assert.deepStrictEqual(yield* client.sessions(Spans, windowKey, { earliestEnd: 901 }), [])
    }))

  it.effect("retries NotReady until the partition is ready; a scan never answers without a restoring partition", () =>
    Effect.gen(function*() {
      const { layer, state } = yield* fakes
      state.ready = false
      const client = yield* clientOf(layer, { retry: Schedule.recurs(3) })
      const failed = yield* Effect.flip(client.get(Totals, 3))
      assert.deepStrictEqual([failed.reason, failed.endpoint], ["NotReady", "b:2"])
      assert.include(failed.detail, "restoring")
      // 4 attempts, each at a:1 then b:2.
      assert.strictEqual(state.requests.filter((r) => r.startsWith("b:2")).length, 4)
      const scan = yield* Effect.flip(client.range(Totals))
      assert.strictEqual(scan.reason, "NotReady")
      // Ready on the third attempt: the answer.
      let attempts = 0
      const flipping = clientOf(layer, {
        retry: Schedule.recurs(5).pipe(Schedule.tapOutput(() => Effect.sync(() => {
          attempts++
          if (attempts === 2) state.ready = true
        })))
      })
      assert.deepStrictEqual(yield* Effect.flatMap(flipping, (c) => c.get(Totals, 3)), Option.some(visit(3)))
      assert.strictEqual(attempts, 2)
    }))

  it.effect("the default retry is bounded: a partition that never restores fails with NotReady after about 17 s", () =>
    Effect.gen(function*() {
      const { layer, state } = yield* fakes
      state.ready = false
      const client = yield* clientOf(layer, { retry: undefined })
      const fiber = yield* Effect.fork(Effect.flip(client.get(Totals, 3)))
      yield* TestClock.adjust("60 seconds")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error.reason, "NotReady")
      assert.strictEqual(state.requests.filter((r) => r.startsWith("b:2")).length, 21)
    }))

  it.effect("moves past an endpoint that does not answer; other failures are returned at once", () =>
    Effect.gen(function*() {
      const { layer, state } = yield* fakes
      const client = yield* clientOf(layer, { endpoints: ["dead:9", "a:1"] })
      assert.deepStrictEqual(yield* client.state(Counter, keyOn(0, "k")), Option.some(visit(1)))
      assert.deepStrictEqual(state.requests.map((r) => r.split("/")[0]), ["dead:9", "a:1"])
      state.requests.length = 0
      const wrongToken = yield* Effect.flip(Effect.flatMap(clientOf(layer, { token: Redacted.make("nope") }), (c) => c.state(Counter, "x")))
      assert.strictEqual(wrongToken.reason, "Unauthorized")
      assert.strictEqual(state.requests.length, 1)
      const Other = KeyValueStore.make({ name: "other", key: Schema.String, value: Schema.Number })
      const unknown = yield* Effect.flip(client.get(Other, "x"))
      assert.strictEqual(unknown.reason, "NotFound")
      assert.include(unknown.detail, "UnknownStore")
      // A Schema that is not the application's: the stored value does not decode.
      const Wrong = KeyValueStore.make({ name: "totals", key: Schema.NumberFromString, value: Schema.String })
      const invalid = yield* Effect.flip(client.get(Wrong, 7, { partition: 3 }))
      assert.strictEqual(invalid.reason, "InvalidAnswer")
      const allDead = yield* Effect.flip(Effect.flatMap(clientOf(layer, { endpoints: ["dead:9"] }), (c) => c.metadata))
      assert.strictEqual(allDead.reason, "Unreachable")
    }))
})
