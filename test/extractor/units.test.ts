/**
 * The extractor's pure parts, without a broker: pages, the declaration, the
 * per-token rate limit (on the TestClock) and the error messages.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Option, Schema, TestClock } from "effect"
import { Extractor } from "../../src/index.ts"
import * as RateLimit from "../../src/internal/extractor/rateLimit.ts"

describe("Extractor declarations", () => {
  it("page and drained carry the records and the next cursor", () => {
    assert.deepStrictEqual(Extractor.page({ next: 3 }), { _tag: "Page", emit: [], next: 3 })
    assert.deepStrictEqual(Extractor.drained({ next: 4 }), { _tag: "Drained", emit: [], next: 4 })
  })

  it.effect("make fills the defaults and encodes cursors as JSON", () =>
    Effect.gen(function*() {
      const extractor = Extractor.make({
        name: "x",
        tokens: ["a", "b"],
        cursor: Schema.Struct({ since: Schema.DateFromString }),
        initial: { since: new Date(0) },
        read: (_token, cursor) => Effect.succeed(Extractor.drained({ next: cursor }))
      })
      assert.isTrue(Option.isNone(extractor.rateLimit))
      assert.isTrue(Option.isNone(extractor.timeout))
      assert.isTrue(Option.isNone(extractor.retry))
      assert.strictEqual(extractor.poll, Extractor.defaultPoll)
      assert.strictEqual(
        yield* Schema.encode(extractor.cursor)({ since: new Date(0) }),
        `{"since":"1970-01-01T00:00:00.000Z"}`
      )
      assert.strictEqual(Extractor.cursorTopic("app", extractor), "app-x-cursors")
    }))
})

describe("RateLimit", () => {
  it.effect("allows `pages` reads per window and delays the next until the oldest leaves it", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimit.make(Option.some({ pages: 2, per: Duration.seconds(1) }))
      let reads = 0
      const fiber = yield* Effect.fork(
        Effect.forEach([0, 1, 2, 3, 4], () => limiter.take.pipe(Effect.zipRight(Effect.sync(() => reads++))), {
          discard: true
        })
      )
      yield* TestClock.adjust(Duration.millis(0))
      const count = () => reads
      assert.strictEqual(count(), 2)
      yield* TestClock.adjust(Duration.millis(999))
      assert.strictEqual(count(), 2)
      yield* TestClock.adjust(Duration.millis(1))
      assert.strictEqual(count(), 4)
      yield* TestClock.adjust(Duration.seconds(1))
      assert.strictEqual(count(), 5)
      yield* Fiber.join(fiber)
    }))

  it.effect("no limit never waits", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimit.make(Option.none())
      yield* Effect.forEach(Array.from({ length: 100 }), () => limiter.take, { discard: true })
    }))
})

describe("Extractor errors", () => {
  it("name the token", () => {
    const bad = new Extractor.BadCursor({
      reason: "Undecodable",
      extractor: "orders",
      token: "acme",
      topic: "shop-orders-cursors",
      partition: 0,
      offset: 12,
      cause: new Error("Expected number")
    })
    assert.match(bad.message, /token "acme" of extractor orders \(shop-orders-cursors\/0@12\)/)
    const timeout = new Extractor.ReadTimeout({ extractor: "orders", token: "acme", timeout: Duration.seconds(5) })
    assert.match(timeout.message, /token "acme".*5s/)
  })
})
