/**
 * Window and session store queries without a broker (Kafka Streams'
 * `ReadOnlyWindowStore.fetch(key, from, to)` and `ReadOnlySessionStore`'s
 * `fetch(key)` / `findSessions`): a key's windows by start time and its
 * sessions by end and start time, read from a committed store laid out as
 * `WindowStore` and `SessionStore` write it, paged with `after`, never
 * another key's entries; bad times and the wrong kind of store are 4xx.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as CommitReceipt from "../../src/internal/runtime/CommitReceipt.ts"
import * as MemoryStore from "../../src/internal/stores/memoryStore.ts"
import { partitionOf } from "../../src/internal/query/partitioner.ts"
import type * as Queries from "../../src/internal/query/Queries.ts"
import * as Request from "../../src/internal/query/request.ts"
import * as QueryServer from "../../src/internal/query/queryServer.ts"
import * as QueryRoutes from "../../src/internal/query/QueryRoutes.ts"
import { encodeTime, namespace } from "../../src/internal/stores/keys.ts"

const partitions = 1

/** A window's store key, as `WindowStore.put` writes it. */
const windowKey = (store: string, key: string, start: number) => `${namespace(store)}${key}\u0000${encodeTime(start)}`
/** A session's store key, as `SessionStore.put` writes it. */
const sessionKey = (store: string, key: string, start: number, end: number) =>
  `${namespace(store)}${key}\u0000${encodeTime(end)}${encodeTime(start)}`

const setup = Effect.gen(function*() {
  const store = MemoryStore.make("memory-0", 0)
  const entries: Array<{ readonly key: string; readonly value: string }> = [
    ...Array.from({ length: 10 }, (_, i) => ({ key: windowKey("clicks", "alice", i * 60_000), value: String(i) })),
    { key: windowKey("clicks", "bob", 60_000), value: "100" },
    // A key that starts with "alice" and a NUL, whose entries sort among alice's: never alice's windows.
    { key: windowKey("clicks", `alice\u0000${encodeTime(120_000)}`, 5), value: "-1" },
    { key: sessionKey("visits", "alice", 0, 100), value: '{"pages":1}' },
    { key: sessionKey("visits", "alice", 1_000, 5_000), value: '{"pages":2}' },
    { key: sessionKey("visits", "alice", 4_000, 6_000), value: '{"pages":3}' },
    { key: sessionKey("visits", "alice", 9_000, 9_500), value: '{"pages":4}' },
    { key: sessionKey("visits", "bob", 0, 10_000), value: '{"pages":5}' },
    { key: `${namespace("totals")}alice`, value: "1" }
  ]
  yield* store.write(CommitReceipt.issue(0, []), entries)
  const source: Queries.Source = {
    transformer: "app",
    stateful: true,
    keyValueStores: ["totals"],
    otherStores: new Map([["clicks", "WindowStore"], ["visits", "SessionStore"]]),
    partitions,
    partition: () => store,
    assigned: () => [0],
    routes: () => QueryRoutes.empty,
    self: () => undefined,
    inputs: ["in"],
    position: () => new Map(),
    nextPositionChange: () => Effect.never,
    standby: () => undefined
  }
  return source
})

const ask = (source: Queries.Source, url: string) =>
  Effect.gen(function*() {
    const response = yield* QueryServer.respond(source, url)
    const body = response.body
    return {
      status: response.status,
      json: body._tag === "Uint8Array" ? JSON.parse(new TextDecoder().decode(body.body)) : undefined
    }
  })

describe("window store queries", () => {
  it.effect("a key's windows from..to (inclusive) in start order, paged by start, no other key's", () =>
    Effect.gen(function*() {
      const source = yield* setup
      assert.strictEqual(partitionOf("alice", partitions), 0)
      const all = yield* ask(source, "/stores/clicks/windows/alice")
      assert.strictEqual(all.status, 200)
      assert.deepStrictEqual(all.json.windows.map((w: { start: number }) => w.start), Array.from({ length: 10 }, (_, i) => i * 60_000))
      assert.strictEqual(all.json.next, null)
      const some = yield* ask(source, "/stores/clicks/windows/alice?from=120000&to=240000")
      assert.deepStrictEqual(some.json, {
        store: "clicks",
        key: "alice",
        partition: 0,
        windows: [{ start: 120_000, value: 2 }, { start: 180_000, value: 3 }, { start: 240_000, value: 4 }],
        next: null
      })
      const pages: Array<number> = []
      let after: number | null = null
      for (let page = 0; page < 10; page++) {
        const answer: { json: { windows: Array<{ start: number }>; next: number | null } } = yield* ask(
          source,
          `/stores/clicks/windows/alice?from=60000&limit=4${after === null ? "" : `&after=${after}`}`
        )
        pages.push(...answer.json.windows.map((w) => w.start))
        after = answer.json.next
        if (after === null) break
      }
      assert.deepStrictEqual(pages, Array.from({ length: 9 }, (_, i) => (i + 1) * 60_000))
      assert.deepStrictEqual((yield* ask(source, "/stores/clicks/windows/bob")).json.windows, [{ start: 60_000, value: 100 }])
      assert.deepStrictEqual((yield* ask(source, "/stores/clicks/windows/carol")).json.windows, [])
      assert.deepStrictEqual((yield* ask(source, "/stores/clicks/windows/alice?from=5&to=4")).json.windows, [])
      const text = yield* ask(source, "/stores/clicks/windows/bob?format=text")
      assert.deepStrictEqual(text.json.windows, [{ start: 60_000, value: "100" }])
    }))
})

describe("session store queries", () => {
  it.effect("a key's sessions (all, or ending at or after earliestEnd and starting at or before latestStart), paged", () =>
    Effect.gen(function*() {
      const source = yield* setup
      const all = yield* ask(source, "/stores/visits/sessions/alice")
      assert.deepStrictEqual(all.json.sessions, [
        { start: 0, end: 100, value: { pages: 1 } },
        { start: 1_000, end: 5_000, value: { pages: 2 } },
        { start: 4_000, end: 6_000, value: { pages: 3 } },
        { start: 9_000, end: 9_500, value: { pages: 4 } }
      ])
      // The sessions a record at 5,500 with a 1 s gap merges with: findSessions(key, 4500, 6500).
      const near = yield* ask(source, "/stores/visits/sessions/alice?earliestEnd=4500&latestStart=6500")
      assert.deepStrictEqual(near.json.sessions.map((s: { start: number }) => s.start), [1_000, 4_000])
      // latestStart skips sessions in the middle of a page: the page reads on until full.
      const early = yield* ask(source, "/stores/visits/sessions/alice?latestStart=1000&limit=2")
      assert.deepStrictEqual(early.json.sessions.map((s: { start: number }) => s.start), [0, 1_000])
      assert.strictEqual(early.json.next, "5000-1000")
      const rest = yield* ask(source, "/stores/visits/sessions/alice?latestStart=1000&limit=2&after=5000-1000")
      assert.deepStrictEqual([rest.json.sessions, rest.json.next], [[], null])
      const paged = yield* ask(source, "/stores/visits/sessions/alice?limit=3")
      assert.strictEqual(paged.json.next, "6000-4000")
      const next = yield* ask(source, `/stores/visits/sessions/alice?limit=3&after=${paged.json.next}`)
      assert.deepStrictEqual(next.json.sessions, [{ start: 9_000, end: 9_500, value: { pages: 4 } }])
      assert.deepStrictEqual((yield* ask(source, "/stores/visits/sessions/bob")).json.sessions.length, 1)
    }))
})

describe("window and session requests", () => {
  it.effect("bad times, cursors and the wrong kind of store are 4xx saying what to ask", () =>
    Effect.gen(function*() {
      const source = yield* setup
      for (const url of ["/stores/clicks/windows/a?from=x", "/stores/clicks/windows/a?to=-1", "/stores/visits/sessions/a?after=12", "/stores/visits/sessions/a?earliestEnd=1.5", "/stores/clicks/windows/a?format=xml"]) {
        const answer = yield* ask(source, url)
        assert.deepStrictEqual([answer.status, answer.json.error], [400, "InvalidParameter"], url)
      }
      const wrong = yield* ask(source, "/stores/totals/windows/alice")
      assert.deepStrictEqual([wrong.status, wrong.json.error, wrong.json.known], [404, "UnknownStore", ["clicks"]])
      assert.include(wrong.json.message, "/stores/{store}/keys/{key}")
      const session = yield* ask(source, "/stores/clicks/sessions/alice")
      assert.deepStrictEqual([session.status, session.json.known], [404, ["visits"]])
      assert.include(session.json.message, "a WindowStore: ask it with /stores/{store}/windows/{key}")
      assert.strictEqual((yield* ask(source, "/stores/clicks/windows/alice?limit=5000")).json.error, "RangeTooLarge")
      assert.deepStrictEqual(Either.getOrThrow(Request.parse("/stores/clicks/windows/a%2Fb?from=1&to=2&after=1&partition=0")), {
        _tag: "WindowFetch",
        store: "clicks",
        key: "a/b",
        from: 1,
        to: 2,
        limit: Request.defaultLimit,
        after: 1,
        partition: 0,
        format: "json"
      })
    }))
})
