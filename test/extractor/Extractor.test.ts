/**
 * Extractors in the test process, against a real broker and a real HTTP
 * source: pages and cursors, restarts, polling, rate limits, and the failure
 * rules (source errors, timeouts, bad cursors, bad token lists).
 */
import { FetchHttpClient } from "@effect/platform"
import type { HttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Duration, Effect, Fiber, Layer, Logger, Option, Queue, Schedule } from "effect"
import { Extractor, SkeinConfig } from "../../src/index.ts"
import * as Items from "../apps/extractItems.ts"
import * as Source from "../apps/extractSource.ts"
import { createTopic, eventually, produce, readCommitted, unique } from "../apps/extractSupport.ts"
import type { ConsumedRecord } from "../apps/extractSupport.ts"
import { brokers } from "../utils/broker.ts"

const layer = (applicationId: string) =>
  Layer.mergeAll(
    FetchHttpClient.layer,
    SkeinConfig.layer({
      applicationId,
      brokers: brokers(),
      sessionTimeout: Duration.seconds(6),
      heartbeatInterval: Duration.millis(500)
    })
  )

/** The items emitted per token, in offset order. */
const byToken = (records: ReadonlyArray<ConsumedRecord>) => {
  const result = new Map<string, Array<Items.Item>>()
  for (const record of records) {
    const item = JSON.parse(record.value ?? "null") as Items.Item
    const list = result.get(item.token) ?? []
    list.push(item)
    result.set(item.token, list)
  }
  return result
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

/** Starts an extractor in a fiber; returns its stats, the fiber and the messages it logged. */
const start = <E>(
  extractor: Extractor.Extractor<string, typeof Items.Cursor.Type, E, HttpClient.HttpClient>,
  applicationId: string
) =>
  Effect.gen(function*() {
    const stats = Extractor.makeStats()
    const logged: Array<string> = []
    const keep = Logger.make(({ message }) => {
      logged.push(Array.isArray(message) ? message.map(String).join(" ") : String(message))
    })
    const fiber = yield* Extractor.runWithStats(extractor, stats).pipe(
      Effect.provide(Layer.merge(layer(applicationId), Logger.add(keep))),
      Effect.fork
    )
    return { stats, fiber, logged }
  })

const committedCursor = (stats: Extractor.Stats, token: string) =>
  Option.fromNullable(stats.committed.get(token)).pipe(Option.map((text) => JSON.parse(text) as { after: number }))

describe("Extractor", () => {
  it.scopedLive("emits pages in order with their cursor; a restart resumes at the committed cursor", () =>
    Effect.gen(function*() {
      const applicationId = unique("extract-pages")
      const output = unique("extract-pages-out")
      yield* createTopic(brokers(), output, 3)
      const source = yield* Source.make({ items: { a: 7, b: 5 }, pageSize: 3 })
      const extractor = Items.make({ name: "items", tokens: ["a", "b"], source: source.url, output, pageSize: 3 })

      const first = yield* start(extractor, applicationId)
      yield* eventually(
        Effect.sync(() =>
          Option.getOrUndefined(committedCursor(first.stats, "a"))?.after === 7 &&
          Option.getOrUndefined(committedCursor(first.stats, "b"))?.after === 5
        ),
        { what: "both tokens drained" }
      )
      yield* Fiber.interrupt(first.fiber)

      const out = byToken(yield* readCommitted(brokers(), output))
      assert.deepStrictEqual(out.get("a")?.map((i) => i.id), range(1, 7))
      assert.deepStrictEqual(out.get("a")?.map((i) => i.after), [0, 0, 0, 3, 3, 3, 6])
      assert.deepStrictEqual(out.get("b")?.map((i) => i.id), range(1, 5))
      assert.deepStrictEqual(out.get("b")?.map((i) => i.after), [0, 0, 0, 3, 3])

      // Each page's cursor is committed with it: token i is partition i of the cursor topic.
      const cursorTopic = Extractor.cursorTopic(applicationId, extractor)
      const cursors = yield* readCommitted(brokers(), cursorTopic)
      assert.deepStrictEqual(
        cursors.map((c) => [c.partition, c.key, c.value]),
        [[0, "a", `{"after":3}`], [0, "a", `{"after":6}`], [0, "a", `{"after":7}`], [1, "b", `{"after":3}`], [
          1,
          "b",
          `{"after":5}`
        ]]
      )
      assert.strictEqual(first.stats.pagesCommitted, 5)

      // Restart with more items: reading resumes at the committed cursors.
      source.setItems("a", 10)
      source.requests.length = 0
      const second = yield* start(extractor, applicationId)
      yield* eventually(
        Effect.sync(() =>
          Option.getOrUndefined(committedCursor(second.stats, "a"))?.after === 10 &&
          source.requests.some((r) => r.token === "b")
        ),
        { what: "a drained again, b read" }
      )
      yield* Fiber.interrupt(second.fiber)
      const firstAfter = (token: string) => source.requests.find((r) => r.token === token)?.after
      assert.strictEqual(firstAfter("a"), 7)
      assert.strictEqual(firstAfter("b"), 5)
      const again = byToken(yield* readCommitted(brokers(), output))
      assert.deepStrictEqual(again.get("a")?.map((i) => i.id), range(1, 10))
      assert.deepStrictEqual(again.get("b")?.map((i) => i.id), range(1, 5))
    }))

  it.scopedLive("a drained token polls on the schedule and stops reading when it ends", () =>
    Effect.gen(function*() {
      const applicationId = unique("extract-poll")
      const output = unique("extract-poll-out")
      yield* createTopic(brokers(), output, 1)
      const source = yield* Source.make({ items: { t: 2 }, pageSize: 5 })
      const extractor = Items.make({
        name: "items",
        tokens: ["t"],
        source: source.url,
        output,
        pageSize: 5,
        poll: Schedule.spaced(Duration.millis(500)).pipe(Schedule.intersect(Schedule.recurs(3)))
      })
      const { fiber, logged, stats } = yield* start(extractor, applicationId)
      yield* eventually(Effect.sync(() => stats.pagesCommitted === 1), { what: "first page" })
      // New items appear while the token is drained: the next poll picks them up.
      source.setItems("t", 4)
      yield* eventually(
        Effect.sync(() => Option.getOrUndefined(committedCursor(stats, "t"))?.after === 4),
        { what: "polled items" }
      )
      // 1 read + 3 polls, then the schedule ends (the extractor says so): no more requests.
      const ended = "Token t is drained and its poll schedule ended: it stops reading"
      yield* eventually(Effect.sync(() => logged.includes(ended)), { what: "the poll schedule to end" })
      assert.strictEqual(source.requests.length, 4)
      assert.strictEqual(stats.emptyPolls, 2)
      // New items after the end stay unread: a poll would have come 500 ms after the last one.
      // (A window for a read that must not happen: a slow machine can hide it, never fail the test.)
      source.setItems("t", 6)
      yield* Effect.sleep(Duration.millis(1500))
      assert.strictEqual(source.requests.length, 4, "a read after the poll schedule ended")
      assert.deepStrictEqual([...stats.owned], ["t"])
      yield* Fiber.interrupt(fiber)
      const out = byToken(yield* readCommitted(brokers(), output))
      assert.deepStrictEqual(out.get("t")?.map((i) => i.id), range(1, 4))
    }))

  it.scopedLive("a rate limit holds each token to its pages per window, each token with its own", () =>
    Effect.gen(function*() {
      const applicationId = unique("extract-rate")
      const output = unique("extract-rate-out")
      yield* createTopic(brokers(), output, 1)
      const source = yield* Source.make({ items: { x: 8, y: 8 }, pageSize: 2 })
      // A window longer than the test: each token reads its 2 pages, then waits for the window.
      // The window's end (reads resuming) is the RateLimit unit test's, on the TestClock.
      const extractor = Items.make({
        name: "items",
        tokens: ["x", "y"],
        source: source.url,
        output,
        pageSize: 2,
        rateLimit: { pages: 2, per: Duration.hours(1) }
      })
      const { fiber, stats } = yield* start(extractor, applicationId)
      yield* eventually(Effect.sync(() => stats.pagesCommitted === 4), { what: "2 pages of each token" })
      // A window for a read that must not happen (a third page of a token inside its window):
      // a slow machine can hide it, never fail the test.
      yield* Effect.sleep(Duration.millis(1000))
      yield* Fiber.interrupt(fiber)
      const served = yield* Queue.takeAll(source.served)
      const pages = (token: string) => Chunk.toReadonlyArray(served).filter((page) => page.token === token).map((page) => page.after)
      assert.deepStrictEqual(pages("x"), [0, 2], "the pages of x read in the window")
      assert.deepStrictEqual(pages("y"), [0, 2], "the pages of y read in the window")
      assert.strictEqual(stats.pagesRead, 4)
    }))

  it.scopedLive("a source failure ends the run with the source's error, retried only by the retry schedule", () =>
    Effect.gen(function*() {
      const output = unique("extract-fail-out")
      yield* createTopic(brokers(), output, 1)
      const source = yield* Source.make({ items: { ok: 3, bad: 3 }, pageSize: 3 })

      // No retry rule: one 503 ends the run, after exactly one request.
      source.failNext("bad", 503, 1)
      const plain = Items.make({ name: "items", tokens: ["ok", "bad"], source: source.url, output, pageSize: 3 })
      const error = yield* Extractor.run(plain).pipe(Effect.provide(layer(unique("extract-fail"))), Effect.flip)
      assert.strictEqual(error._tag, "ResponseError")
      assert.deepStrictEqual(source.requests.filter((r) => r.token === "bad").map((r) => r.status), [503])

      // A retry rule: two 503s are retried, the third attempt succeeds.
      source.requests.length = 0
      source.failNext("bad", 503, 2)
      const retried = Items.make({
        name: "items",
        tokens: ["ok", "bad"],
        source: source.url,
        output,
        pageSize: 3,
        retry: Schedule.spaced(Duration.millis(50)).pipe(Schedule.intersect(Schedule.recurs(3)))
      })
      const { fiber, stats } = yield* start(retried, unique("extract-retry"))
      yield* eventually(
        Effect.sync(() => Option.getOrUndefined(committedCursor(stats, "bad"))?.after === 3),
        { what: "retried page committed" }
      )
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(source.requests.filter((r) => r.token === "bad").map((r) => r.status).slice(0, 3), [
        503,
        503,
        200
      ])
    }))

  it.scopedLive("a read slower than the timeout fails with ReadTimeout naming the token", () =>
    Effect.gen(function*() {
      const output = unique("extract-timeout-out")
      yield* createTopic(brokers(), output, 1)
      const source = yield* Source.make({ items: { fast: 3, slow: 3 }, pageSize: 3 })
      source.delay("slow", 3000)
      const extractor = Items.make({
        name: "items",
        tokens: ["fast", "slow"],
        source: source.url,
        output,
        pageSize: 3,
        timeout: Duration.millis(300)
      })
      const error = yield* Extractor.run(extractor).pipe(Effect.provide(layer(unique("extract-timeout"))), Effect.flip)
      assert.strictEqual(error._tag, "ReadTimeout")
      if (error._tag === "ReadTimeout") {
        assert.strictEqual(error.token, "slow")
        assert.match(error.message, /token "slow"/)
      }
    }))

  it.scopedLive("bad cursor data fails with BadCursor naming the token", () =>
    Effect.gen(function*() {
      const output = unique("extract-bad-out")
      yield* createTopic(brokers(), output, 1)
      const source = yield* Source.make({ items: { a: 3, b: 3 }, pageSize: 3 })
      const extractor = Items.make({ name: "items", tokens: ["a", "b"], source: source.url, output, pageSize: 3 })

      const undecodable = unique("extract-bad")
      const topic = Extractor.cursorTopic(undecodable, extractor)
      yield* createTopic(brokers(), topic, 2)
      yield* produce(brokers(), topic, [{ partition: 1, key: "b", value: `{"after":"three"}` }])
      const error = yield* Extractor.run(extractor).pipe(Effect.provide(layer(undecodable)), Effect.flip)
      assert.strictEqual(error._tag, "BadCursor")
      if (error._tag === "BadCursor") {
        assert.strictEqual(error.token, "b")
        assert.strictEqual(error.reason, "Undecodable")
        assert.match(error.message, /token "b"/)
      }

      // A cursor of another token (the token list was reordered).
      const reordered = unique("extract-reordered")
      const topic2 = Extractor.cursorTopic(reordered, extractor)
      yield* createTopic(brokers(), topic2, 2)
      yield* produce(brokers(), topic2, [{ partition: 0, key: "b", value: `{"after":1}` }])
      const wrong = yield* Extractor.run(extractor).pipe(Effect.provide(layer(reordered)), Effect.flip)
      assert.strictEqual(wrong._tag, "BadCursor")
      if (wrong._tag === "BadCursor") {
        assert.strictEqual(wrong.token, "a")
        assert.strictEqual(wrong.reason, "WrongToken")
      }
    }))

  it.scopedLive("token lists: duplicates and removed tokens fail, appended tokens grow the cursor topic", () =>
    Effect.gen(function*() {
      const applicationId = unique("extract-tokens")
      const output = unique("extract-tokens-out")
      yield* createTopic(brokers(), output, 1)
      const source = yield* Source.make({ items: { a: 2, b: 2, c: 2 }, pageSize: 5 })
      const make = (tokens: ReadonlyArray<string>) =>
        Items.make({ name: "items", tokens, source: source.url, output, pageSize: 5 })

      const duplicate = yield* Extractor.run(make(["a", "b", "a"])).pipe(Effect.provide(layer(applicationId)), Effect.flip)
      assert.strictEqual(duplicate._tag, "InvalidTokens")
      if (duplicate._tag === "InvalidTokens") assert.strictEqual(duplicate.reason, "Duplicate")

      const two = yield* start(make(["a", "b"]), applicationId)
      yield* eventually(Effect.sync(() => two.stats.committed.size === 2), { what: "a and b committed" })
      yield* Fiber.interrupt(two.fiber)

      const three = yield* start(make(["a", "b", "c"]), applicationId)
      yield* eventually(Effect.sync(() => three.stats.committed.size === 1 && three.stats.owned.size === 3), {
        what: "c committed"
      })
      assert.deepStrictEqual([...three.stats.committed.keys()], ["c"])
      yield* Fiber.interrupt(three.fiber)

      const removed = yield* Extractor.run(make(["a", "b"])).pipe(Effect.provide(layer(applicationId)), Effect.flip)
      assert.strictEqual(removed._tag, "InvalidTokens")
      if (removed._tag === "InvalidTokens") assert.strictEqual(removed.reason, "Removed")

      const out = byToken(yield* readCommitted(brokers(), output))
      assert.deepStrictEqual([...out].map(([token, items]) => [token, items.map((i) => i.id)]).sort(), [
        ["a", [1, 2]],
        ["b", [1, 2]],
        ["c", [1, 2]]
      ])
    }))
})
