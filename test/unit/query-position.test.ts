/**
 * Position-bound queries (KIP-796) without a broker: a query bounded by an
 * input offset waits until the task's committed store is past it (a commit
 * the runner records in `Positions`), then answers; where the task started
 * counts as reflected; past its timeout it fails with `NotUpToBound` naming
 * how far the store got; a bound on a topic that is not an input, or on a
 * scan of several partitions, is a 400.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Fiber, Option } from "effect"
import * as CommitReceipt from "../../src/internal/runtime/CommitReceipt.ts"
import * as MemoryStore from "../../src/internal/stores/memoryStore.ts"
import { partitionOf } from "../../src/internal/query/partitioner.ts"
import * as Positions from "../../src/internal/query/Positions.ts"
import type * as Queries from "../../src/internal/query/Queries.ts"
import * as Request from "../../src/internal/query/request.ts"
import * as QueryServer from "../../src/internal/query/queryServer.ts"
import * as QueryRoutes from "../../src/internal/query/QueryRoutes.ts"

const partitions = 2
const key = (() => {
  for (let i = 0; ; i++) if (partitionOf(`k${i}`, partitions) === 1) return `k${i}`
})()

const setup = Effect.gen(function*() {
  const store = MemoryStore.make("memory-1", 1)
  yield* store.write(CommitReceipt.issue(1, []), [{ key, value: "5" }])
  const positions = Positions.make()
  /** Where partition 1's task started: offset 3 of "in" (records 0..2 reflected). */
  const started = [{ topic: "in", offset: 3 }]
  const source: Queries.Source = {
    transformer: "count",
    stateful: true,
    keyValueStores: [],
    otherStores: new Map(),
    partitions,
    partition: (p) => p === 1 ? store : "absent",
    assigned: () => [1],
    routes: () => QueryRoutes.empty,
    self: () => undefined,
    inputs: ["in", "other"],
    position: (p) => positions.of(p, p === 1 ? started : []),
    nextPositionChange: positions.nextChange,
    standby: () => undefined
  }
  return { source, positions }
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

describe("position-bound queries", () => {
  it.live("wait until the committed store is past the bound's offset, then answer", () =>
    Effect.gen(function*() {
      const { positions, source } = yield* setup
      // Offset 2 is before where the task started: answered at once.
      const early = yield* ask(source, `/state/count/${key}?position=in:2`)
      assert.deepStrictEqual([early.status, early.json.value], [200, 5])
      const waiting = yield* Effect.fork(ask(source, `/state/count/${key}?position=in:7,other:0`))
      yield* Effect.sleep("50 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(waiting)), "answered before the bound was reached")
      positions.committed(1, [{ topic: "in", offset: 8 }])
      yield* Effect.sleep("50 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(waiting)), "answered before every topic's bound was reached")
      // Another partition's commit does not reach it either.
      positions.committed(0, [{ topic: "other", offset: 100 }])
      yield* Effect.sleep("50 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(waiting)))
      positions.committed(1, [{ topic: "other", offset: 1 }])
      const answered = yield* Fiber.join(waiting)
      assert.deepStrictEqual([answered.status, answered.json.value], [200, 5])
    }))

  it.live("past its timeout: 503 NotUpToBound with the store's position", () =>
    Effect.gen(function*() {
      const { positions, source } = yield* setup
      positions.committed(1, [{ topic: "in", offset: 10 }])
      const late = yield* ask(source, `/state/count/${key}?position=in:10&timeout=100`)
      assert.deepStrictEqual([late.status, late.json.error, late.json.position, late.json.bound], [503, "NotUpToBound", { in: 10 }, [
        { topic: "in", offset: 10 }
      ]])
      assert.include(late.json.message, "within 100 ms")
    }))

  it.effect("a bound naming no input, on a scan of several partitions, or malformed is a 400", () =>
    Effect.gen(function*() {
      const { source } = yield* setup
      const notInput = yield* ask(source, `/state/count/${key}?position=out:1`)
      assert.deepStrictEqual([notInput.status, notInput.json.error], [400, "InvalidParameter"])
      assert.include(notInput.json.message, `its inputs: "in", "other"`)
      for (const url of ["/stores/s/range?position=in:1", "/metadata?position=in:1", `/state/count/${key}?position=in`, `/state/count/${key}?position=in:x`, `/state/count/${key}?timeout=5`, `/state/count/${key}?position=in:1&timeout=999999`]) {
        const answer = yield* ask({ ...source, keyValueStores: ["s"] }, url)
        assert.deepStrictEqual([answer.status, answer.json.error], [400, "InvalidParameter"], url)
      }
      assert.deepStrictEqual(Either.getOrThrow(Request.boundOf("/x?position=a.b-c:12,d:0")), {
        bound: [{ topic: "a.b-c", offset: 12 }, { topic: "d", offset: 0 }],
        timeoutMillis: Request.defaultBoundTimeout
      })
      // A partition elsewhere is NotHere before any wait.
      const elsewhere = yield* ask(source, `/state/count/x?partition=0&position=in:1000`)
      assert.deepStrictEqual([elsewhere.status, elsewhere.json.error], [404, "NotHere"])
    }))
})
