/**
 * Interactive queries without a broker: reading requests (paths, keys,
 * paging), the key's partition (the producer's default partitioner), the
 * answers from committed stores (in memory) with their statuses, and the
 * bearer token.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either, Logger, Redacted } from "effect"
import { createRequire } from "node:module"
import * as path from "node:path"
import { SkeinConfig } from "../../src/index.ts"
import * as CommitReceipt from "../../src/internal/runtime/CommitReceipt.ts"
import * as MemoryStore from "../../src/internal/stores/memoryStore.ts"
import { murmur2, partitionOf } from "../../src/internal/query/partitioner.ts"
import * as Queries from "../../src/internal/query/Queries.ts"
import * as Request from "../../src/internal/query/request.ts"
import * as QueryServer from "../../src/internal/query/queryServer.ts"
import * as QueryRoutes from "../../src/internal/query/QueryRoutes.ts"
import * as StateStore from "../../src/internal/stores/StateStore.ts"
import { namespace } from "../../src/internal/stores/keys.ts"
import { tempDir } from "../helpers/tempDir.ts"

const kafkajsMurmur2: (key: string) => number = createRequire(import.meta.url)(
  "kafkajs/src/producer/partitioners/default/murmur2.js"
)

const parsed = (url: string) => Either.getOrThrow(Request.parse(url))
const failure = (url: string) => Either.flip(Request.parse(url)).pipe(Either.getOrThrow)
/** The refusal of `url`, a malformed request (not a path of no query). */
const refused = (url: string) => {
  const error = failure(url)
  if (error._tag === "NoRoute") throw new Error(`${url} is no query's path`)
  return error
}

describe("query requests", () => {
  it("reads the state, key, range and prefix queries, keys percent-decoded", () => {
    assert.deepStrictEqual(parsed("/state/count/a%20b%2Fc"), { _tag: "State", transformer: "count", key: "a b/c", partition: undefined, format: "json" })
    assert.deepStrictEqual(parsed("/stores/totals/keys/%C3%A9?partition=3"), {
      _tag: "StoreKey",
      store: "totals",
      key: "é",
      partition: 3,
      format: "json"
    })
    assert.deepStrictEqual(parsed("/stores/totals/range?from=a&to=m&limit=10&after=c"), {
      _tag: "StoreScan",
      store: "totals",
      bounds: { _tag: "Range", from: "a", to: "m" },
      limit: 10,
      after: "c",
      partition: undefined,
      format: "json"
    })
    assert.deepStrictEqual(parsed("/stores/totals/range"), {
      _tag: "StoreScan",
      store: "totals",
      bounds: { _tag: "Range", from: undefined, to: undefined },
      limit: Request.defaultLimit,
      after: undefined,
      partition: undefined,
      format: "json"
    })
    assert.deepStrictEqual(parsed("/stores/totals/prefix?prefix=user-"), {
      _tag: "StoreScan",
      store: "totals",
      bounds: { _tag: "Prefix", prefix: "user-" },
      limit: Request.defaultLimit,
      after: undefined,
      partition: undefined,
      format: "json"
    })
    assert.deepStrictEqual(parsed("/state/count/"), { _tag: "State", transformer: "count", key: "", partition: undefined, format: "json" })
  })

  it("refuses malformed keys and parameters, and pages above the largest", () => {
    const path = refused("/state/count/%E0%A4%A")
    assert.strictEqual(path._tag === "BadRequest" ? path.reason : path._tag, "MalformedPath")
    const reserved = refused("/state/count/%00skein.timer")
    assert.strictEqual(reserved._tag, "BadRequest")
    assert.include(reserved.message, "reserves")
    assert.include(refused("/stores/s/keys/%ED%A0%80").message, "percent-encoding")
    const tooLarge = refused(`/stores/s/range?limit=${Request.maxLimit + 1}`)
    assert.strictEqual(tooLarge._tag, "RangeTooLarge")
    assert.include(tooLarge.message, String(Request.maxLimit))
    for (const url of ["/stores/s/range?limit=0", "/stores/s/range?limit=-1", "/stores/s/range?limit=x", "/state/c/k?partition=1.5"]) {
      assert.strictEqual(refused(url)._tag, "BadRequest", url)
    }
    assert.include(refused("/stores/s/prefix").message, "prefix=")
    for (const url of ["/", "/state/count", "/state/count/a/b", "/stores/s", "/stores/s/other", "/health/live"]) {
      assert.strictEqual(failure(url)._tag, "NoRoute", url)
    }
  })
})

describe("the key's partition", () => {
  it("is the producer's: murmur2 as the Java client's vectors and kafkajs's partitioner", () => {
    const bytes = (text: string) => new TextEncoder().encode(text)
    assert.strictEqual(murmur2(bytes("21")), -973932308)
    assert.strictEqual(murmur2(bytes("foobar")), -790332482)
    assert.strictEqual(murmur2(bytes("a-little-bit-long-string")), -985981536)
    assert.strictEqual(murmur2(bytes("a-little-bit-longer-string")), -1486304829)
    assert.strictEqual(murmur2(bytes("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8")), -58897971)
    assert.strictEqual(murmur2(bytes("abc")), 479470107)
    for (let i = 0; i < 2000; i++) {
      const key = `key-${i}-${"é🙂".repeat(i % 5)}`
      assert.strictEqual(murmur2(bytes(key)), kafkajsMurmur2(key), key)
      assert.strictEqual(partitionOf(key, 12), (kafkajsMurmur2(key) & 0x7fffffff) % 12)
    }
  })
})

/** A committed store of partition `p` holding `entries` (as a restore writes them). */
const storeWith = (p: number, entries: ReadonlyArray<readonly [string, string]>) =>
  Effect.gen(function*() {
    const store = MemoryStore.make(`memory-${p}`, p)
    yield* store.write(CommitReceipt.issue(p, []), entries.map(([key, value]) => ({ key, value })))
    return store
  })

const keyOn = (partition: number, partitions: number, prefix: string): string => {
  for (let i = 0; ; i++) if (partitionOf(`${prefix}${i}`, partitions) === partition) return `${prefix}${i}`
}

describe("query answers", () => {
  const partitions = 4
  const sourceOf = (stores: ReadonlyMap<number, Queries.PartitionState>): Queries.Source => ({
    transformer: "count",
    stateful: true,
    keyValueStores: ["totals"],
    otherStores: new Map([["windows", "WindowStore"]]),
    partitions,
    partition: (p) => stores.get(p) ?? "absent",
    assigned: () => [...stores.keys()].sort(),
    routes: () => QueryRoutes.empty,
    self: () => undefined,
    inputs: ["in"],
    position: () => new Map(),
    nextPositionChange: () => Effect.never,
    standby: () => undefined
  })
  const here = keyOn(0, partitions, "k")
  const elsewhere = keyOn(2, partitions, "k")
  const restoring = keyOn(1, partitions, "k")

  const setup = Effect.gen(function*() {
    const totals = (key: string, value: number) => [namespace("totals") + key, JSON.stringify(value)] as const
    const zero = yield* storeWith(0, [
      [here, "7"],
      ...Array.from({ length: 25 }, (_, i) => totals(`a${String(i).padStart(2, "0")}`, i)),
      totals("b", 100),
      [`${namespace("other")}a`, "1"]
    ])
    const three = yield* storeWith(3, Array.from({ length: 5 }, (_, i) => totals(`a${i}x`, 1000 + i)))
    return sourceOf(new Map<number, Queries.PartitionState>([[0, zero], [1, "restoring"], [3, three]]))
  })

  const ask = (source: Queries.Source, url: string) =>
    Effect.gen(function*() {
      const response = yield* QueryServer.respond(source, url)
      const body = response.body
      assert.strictEqual(body._tag, "Uint8Array")
      return {
        status: response.status,
        headers: response.headers,
        json: body._tag === "Uint8Array" ? JSON.parse(new TextDecoder().decode(body.body)) : undefined
      }
    })

  it.effect("a state key: its committed value here, NotHere for a partition elsewhere, NotReady while restoring", () =>
    Effect.gen(function*() {
      const source = yield* setup
      const found = yield* ask(source, `/state/count/${here}`)
      assert.strictEqual(found.status, 200)
      assert.deepStrictEqual(found.json, { transformer: "count", key: here, partition: 0, found: true, value: 7 })
      const missing = yield* ask(source, `/state/count/${keyOn(0, partitions, "missing")}`)
      assert.strictEqual(missing.status, 200)
      assert.strictEqual(missing.json.found, false)
      assert.strictEqual(missing.json.value, null)
      const away = yield* ask(source, `/state/count/${elsewhere}`)
      assert.strictEqual(away.status, 404)
      assert.strictEqual(away.json.error, "NotHere")
      assert.strictEqual(away.json.partition, 2)
      assert.strictEqual(away.json.partitions, partitions)
      const busy = yield* ask(source, `/state/count/${restoring}`)
      assert.strictEqual(busy.status, 503)
      assert.strictEqual(busy.json.error, "NotReady")
      assert.strictEqual(busy.json.reason, "restoring")
      assert.strictEqual(busy.headers["retry-after"], "1")
      assert.strictEqual((yield* ask(source, `/state/count/${elsewhere}?partition=0`)).json.found, false)
      const stopped = yield* ask(sourceOf(new Map([[2, "stopped"]])), `/state/count/${elsewhere}`)
      assert.deepStrictEqual([stopped.status, stopped.json.reason], [503, "stopped"])
      assert.include(stopped.json.message, "stopped here by a failure")
      const badPartition = yield* ask(source, `/state/count/x?partition=4`)
      assert.strictEqual(badPartition.status, 400)
      assert.include(badPartition.json.message, "0 to 3")
      const unknown = yield* ask(source, `/state/nope/x`)
      assert.strictEqual(unknown.status, 404)
      assert.deepStrictEqual([unknown.json.error, unknown.json.known], ["UnknownTransformer", ["count"]])
    }))

  it.effect("a store: by key, range and prefix, paged in key order across the partitions here", () =>
    Effect.gen(function*() {
      const source = yield* setup
      // Keys of the store on partition 0 are asked there explicitly (their own partition may differ).
      const one = yield* ask(source, "/stores/totals/keys/a03?partition=0")
      assert.deepStrictEqual(one.json, { store: "totals", key: "a03", partition: 0, found: true, value: 3 })
      assert.strictEqual((yield* ask(source, `/stores/other/keys/a?partition=0`)).json.error, "UnknownStore")
      const window = yield* ask(source, `/stores/windows/keys/a?partition=0`)
      assert.strictEqual(window.status, 404)
      assert.include(window.json.message, "WindowStore")
    assert.include(window.json.message, "/stores/{store}/windows/{key}")

      // Partition 1 restores: a scan of every partition here waits rather than answer without it.
      const partial = yield* ask(source, "/stores/totals/range")
      assert.strictEqual(partial.status, 503)
      const ready = sourceOf(new Map([[0, source.partition(0)], [3, source.partition(3)]]))

      const pages: Array<string> = []
      let after: string | null = null
      let requests = 0
      do {
        const page: { json: { entries: Array<{ key: string; value: number; partition: number }>; next: string | null; partitions: Array<number>; complete: boolean } } =
          yield* ask(ready, `/stores/totals/range?from=a&to=az&limit=7${after === null ? "" : `&after=${encodeURIComponent(after)}`}`)
        assert.deepStrictEqual(page.json.partitions, [0, 3])
        assert.isFalse(page.json.complete)
        assert.isAtMost(page.json.entries.length, 7)
        pages.push(...page.json.entries.map((e) => e.key))
        after = page.json.next
        requests++
      } while (after !== null && requests < 20)
      const expected = [...Array.from({ length: 25 }, (_, i) => `a${String(i).padStart(2, "0")}`), ...Array.from({ length: 5 }, (_, i) => `a${i}x`)]
        .sort()
      assert.deepStrictEqual(pages, expected)
      assert.strictEqual(requests, Math.ceil(30 / 7))

      const prefix = yield* ask(ready, "/stores/totals/prefix?prefix=a1")
      assert.deepStrictEqual(prefix.json.entries.map((e: { key: string }) => e.key), [...Array.from({ length: 10 }, (_, i) => `a1${i}`), "a1x"].sort())
      const prefixPaged = yield* ask(ready, "/stores/totals/prefix?prefix=a1&after=a15&limit=3")
      assert.deepStrictEqual(prefixPaged.json.entries.map((e: { key: string }) => e.key), ["a16", "a17", "a18"])
      assert.strictEqual(prefixPaged.json.next, "a18")
      const onlyThree = yield* ask(ready, "/stores/totals/prefix?prefix=&partition=3")
      assert.deepStrictEqual(onlyThree.json.entries.map((e: { value: number }) => e.value), [1000, 1001, 1002, 1003, 1004])
      assert.strictEqual(onlyThree.json.next, null)
      assert.strictEqual((yield* ask(ready, "/stores/totals/prefix?prefix=&partition=2")).json.error, "NotHere")
      const tooLarge = yield* ask(ready, "/stores/totals/range?limit=5000")
      assert.strictEqual(tooLarge.status, 400)
      assert.strictEqual(tooLarge.json.error, "RangeTooLarge")
      assert.strictEqual((yield* ask(ready, "/nothing")).status, 404)
    }))
})

describe("the bearer token", () => {
  it("is checked whole, any other header refused", () => {
    const token = Redacted.make("s3cret-token")
    assert.isTrue(QueryServer.authorized("Bearer s3cret-token", token))
    assert.isTrue(QueryServer.authorized("bearer s3cret-token", token))
    for (const header of [undefined, "", "Bearer", "Bearer s3cret", "Bearer s3cret-token2", "Basic s3cret-token", "s3cret-token"]) {
      assert.isFalse(QueryServer.authorized(header, token), String(header))
    }
  })
})

describe("the query settings", () => {
  it.effect("are off unless set, localhost by default, the token redacted", () =>
    Effect.gen(function*() {
      const read = (env: Record<string, string>) =>
        Effect.withConfigProvider(SkeinConfig.config, ConfigProvider.fromMap(new Map(Object.entries({ SKEIN_APPLICATION_ID: "a", SKEIN_BROKERS: "b:9092", ...env }))))
      const unset = yield* read({})
      assert.strictEqual(unset.queryPort, undefined)
      assert.strictEqual(unset.queryHost, "127.0.0.1")
      assert.strictEqual(unset.queryToken, undefined)
      const set = yield* read({ SKEIN_QUERY_PORT: "8081", SKEIN_QUERY_HOST: "0.0.0.0", SKEIN_QUERY_TOKEN: "t0ken" })
      assert.strictEqual(set.queryPort, 8081)
      assert.strictEqual(set.queryHost, "0.0.0.0")
      assert.strictEqual(set.queryToken === undefined ? undefined : Redacted.value(set.queryToken), "t0ken")
      assert.notInclude(String(set.queryToken), "t0ken")
      assert.isTrue(Either.isLeft(yield* Effect.either(read({ SKEIN_QUERY_PORT: "70000" }))))
      assert.strictEqual(SkeinConfig.make({ applicationId: "a", brokers: [] }).queryHost, "127.0.0.1")
    }))
})

describe("a LevelDB store's range", () => {
  it.scoped("stops at its limit, in key order", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("skein-query-range-")
      const store = yield* StateStore.open(path.join(dir, "0"), 0)
      yield* store.write(CommitReceipt.issue(0, []), ["c", "a", "e", "b", "d"].map((key) => ({ key, value: key })))
      assert.deepStrictEqual((yield* store.range({ gte: "b", limit: 2 })).map(([key]) => key), ["b", "c"])
      assert.deepStrictEqual((yield* store.range({ gte: "b", lte: "d", limit: 10 })).map(([key]) => key), ["b", "c", "d"])
      assert.deepStrictEqual((yield* store.range({ gte: "" })).map(([key]) => key), ["a", "b", "c", "d", "e"])
    }))
})

describe("the query endpoint", () => {
  const source: Queries.Source = {
    transformer: "count",
    stateful: true,
    keyValueStores: [],
    otherStores: new Map(),
    partitions: 1,
    partition: () => "absent",
    assigned: () => [],
    routes: () => QueryRoutes.empty,
    self: () => undefined,
    inputs: ["in"],
    position: () => new Map(),
    nextPositionChange: () => Effect.never,
    standby: () => undefined
  }
  const warnings = (options: QueryServer.Options) =>
    Effect.gen(function*() {
      const logged: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        if (logLevel._tag === "Warning") logged.push(String(message))
      })
      const { port } = yield* QueryServer.serve(source, options).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      const response = yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}/state/count/k`, { method: "POST" }))
      assert.strictEqual(response.status, 405)
      return logged
    })

  it.scopedLive("warns when it listens beyond this machine without a token", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* warnings({ port: 0, host: "127.0.0.1" }), [])
      assert.deepStrictEqual(yield* warnings({ port: 0, host: "0.0.0.0", token: Redacted.make("t") }), [])
      const [warning] = yield* warnings({ port: 0, host: "0.0.0.0" })
      assert.include(warning, "without a token")
      assert.include(warning, "queryToken")
    }))

  it.scopedLive("a port in use fails with QueryServerError naming the port and the setting", () =>
    Effect.gen(function*() {
      const { port } = yield* QueryServer.serve(source, { port: 0, host: "127.0.0.1" })
      const error = yield* Effect.flip(QueryServer.serve(source, { port, host: "127.0.0.1" }))
      assert.strictEqual(error.reason, "PortInUse")
      assert.include(error.message, `127.0.0.1:${port}`)
      assert.include(error.message, "SKEIN_QUERY_PORT")
    }))
})
