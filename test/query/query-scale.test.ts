/**
 * Interactive queries at scale (issue 33's proof): three instances over a
 * 12-partition input, three keys on every partition. Once the input is processed,
 * every key's state, its window store's windows and a range scan of the
 * application, asked through `QueryClient` at one instance, equal a
 * reference computed from the committed output topic (read_committed). Then
 * one instance stops (its scope closes, as on SIGTERM) while queries run in
 * a loop, asked without retries: every answer is the reference value or a
 * typed retryable error (NotReady, NotHere, Unreachable), never a wrong or
 * missing value; after the rebalance every answer is right again.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Fiber, Option, Ref, Schedule, Schema } from "effect"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { KeyValueStore, QueryClient, Topic, Transformer, WindowStore } from "../../src/index.ts"
import { partitionOf } from "../../src/internal/query/partitioner.ts"
import { caughtUp, createTopics, eventually, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"
import { tempDir } from "../helpers/tempDir.ts"

const partitions = 12
const retryable: ReadonlySet<string> = new Set(["NotReady", "NotHere", "Unreachable"])

describe("interactive queries at scale", () => {
  it.scopedLive("3 instances, 12 partitions: every answer equals the committed output, and stays right or a typed retry while one stops", () =>
    Effect.gen(function*() {
      const input = unique("qx-in")
      const output = unique("qx-out")
      const applicationId = unique("qx-app")
      yield* createTopics([{ name: input, partitions }, { name: output, partitions }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Schema.Number) })
      const Totals = KeyValueStore.make({ name: "totals", key: Schema.String, value: Schema.Number })
      // The n-th record of a key: its window starting at n seconds, holding n.
      const Steps = WindowStore.make({ name: "steps", key: Schema.String, value: Schema.Number })
      const transformer = Transformer.make({
        name: "count",
        inputs: [In],
        state: Schema.Number,
        stores: [Totals, Steps],
        transform: (record, count) =>
          Effect.gen(function*() {
            const next = Option.getOrElse(count, () => 0) + 1
            const key = record.key ?? ""
            yield* Totals.put(key, next)
            yield* Steps.put(key, next * 1000, next)
            return { emit: [Topic.record(Out, record.key, next)], state: Transformer.set(next) }
          })
      })
      const settings = { applicationId, queryPort: 0 }
      const a = yield* startInstance(transformer, { ...settings, stateDir: yield* tempDir("skein-qx-a-") })
      const b = yield* startInstance(transformer, { ...settings, stateDir: yield* tempDir("skein-qx-b-") })
      const c = yield* startInstance(transformer, { ...settings, stateDir: yield* tempDir("skein-qx-c-") })
      const instances = [a, b, c]
      yield* eventually(
        Effect.sync(() =>
          instances.every((i) => i.stats.assigned.size === 4 && i.stats.queryPort !== undefined)
        ),
        { what: "four partitions on each of the three instances" }
      )

      // Three keys on each of the 12 partitions, key i with (i mod 5) + 1 records.
      const candidates = Array.from({ length: 200 }, (_, i) => `key-${String(i).padStart(3, "0")}`)
      const keys = Array.from({ length: partitions }, (_, p) => candidates.filter((key) => partitionOf(key, partitions) === p).slice(0, 3))
        .flat()
      assert.strictEqual(keys.length, 3 * partitions, "three keys on every partition")
      yield* produce(input, keys.flatMap((key, i) => Array.from({ length: (i % 5) + 1 }, () => ({ key, value: "inc" }))))
      yield* caughtUp(applicationId, input)

      // The reference: each key's latest committed output.
      const reference = new Map<string, number>()
      for (const record of (yield* readCommitted(output)).sort((x, y) => x.offset - y.offset)) {
        reference.set(record.key ?? "", Number(record.value))
      }
      assert.strictEqual(reference.size, keys.length)
      const sorted = [...reference].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
      const windowsOf = (count: number) => Array.from({ length: count }, (_, i) => ({ start: (i + 1) * 1000, value: i + 1 }))

      // One instance asked: a, which the test keeps running.
      const endpoint = `127.0.0.1:${a.stats.queryPort}`
      const client = yield* QueryClient.make({ endpoints: [endpoint] }).pipe(Effect.provide(FetchHttpClient.layer))
      for (const [key, count] of reference) {
        assert.deepStrictEqual(yield* client.state(transformer, key), Option.some(count), key)
        assert.deepStrictEqual(yield* client.get(Totals, key), Option.some(count), key)
        const windows = yield* client.windows(Steps, key, 0, Number.MAX_SAFE_INTEGER)
        assert.deepStrictEqual(windows.map((w) => ({ start: w.start, value: w.value })), windowsOf(count), key)
      }
      const scanned: Array<[string, number]> = []
      let after: Option.Option<string> = Option.none()
      for (let page = 0; page < 10; page++) {
        const answer: QueryClient.Page<string, number> = yield* client.range(Totals, {
          limit: 25,
          after: Option.getOrUndefined(after)
        })
        scanned.push(...answer.entries.map((e): [string, number] => [e.key, e.value]))
        after = answer.next
        if (Option.isNone(after)) break
      }
      assert.deepStrictEqual(scanned, sorted)

      // Queries in a loop, without retries: each answer right, or a typed retryable error.
      const once = yield* QueryClient.make({ endpoints: [endpoint], retry: Schedule.stop, timeout: "5 seconds" })
        .pipe(Effect.provide(FetchHttpClient.layer))
      const wrong = yield* Ref.make<ReadonlyArray<string>>([])
      const retries = yield* Ref.make(new Map<string, number>())
      const rightRounds = yield* Ref.make(0)
      const round = Effect.gen(function*() {
        let right = true
        const check = <A>(what: string, query: Effect.Effect<A, QueryClient.QueryClientError>, expected: A) =>
          Effect.gen(function*() {
            const answer = yield* Effect.either(query)
            if (Either.isLeft(answer)) {
              right = false
              const reason = answer.left.reason
              if (retryable.has(reason)) {
                yield* Ref.update(retries, (m) => new Map(m).set(reason, (m.get(reason) ?? 0) + 1))
              } else {
                yield* Ref.update(wrong, (w) => [...w, `${what}: ${answer.left.message}`])
              }
            } else if (JSON.stringify(answer.right) !== JSON.stringify(expected)) {
              right = false
              yield* Ref.update(wrong, (w) => [...w, `${what}: ${JSON.stringify(answer.right)}, expected ${JSON.stringify(expected)}`])
            }
          })
        for (const [key, count] of reference) {
          yield* check(`state ${key}`, Effect.map(once.state(transformer, key), Option.getOrNull), count)
          yield* check(
            `windows ${key}`,
            Effect.map(once.windows(Steps, key, 0, Number.MAX_SAFE_INTEGER), (ws) => ws.map((w) => ({ start: w.start, value: w.value }))),
            windowsOf(count)
          )
        }
        yield* check(
          "range",
          Effect.map(once.range(Totals, { limit: 1000 }), (page) => page.entries.map((e): [string, number] => [e.key, e.value])),
          sorted
        )
        if (right) yield* Ref.update(rightRounds, (n) => n + 1)
        else yield* Ref.set(rightRounds, 0)
      })
      const loop = yield* Effect.fork(Effect.forever(round))
      yield* eventually(Effect.map(Ref.get(rightRounds), (n) => n >= 1), { what: "a right round before the stop" })

      // c stops (its scope closes): its partitions move to a and b and restore there.
      yield* Effect.log("stopping one instance")
      yield* c.stop
      yield* eventually(
        Effect.sync(() => a.stats.assigned.size + b.stats.assigned.size === partitions && a.stats.assigned.size > 4),
        { what: "the two instances left to run all 12 partitions" }
      )
      yield* Ref.set(rightRounds, 0)
      // Stops early on a wrong answer, to report it.
      yield* eventually(
        Effect.zipWith(Ref.get(rightRounds), Ref.get(wrong), (n, w) => n >= 2 || w.length > 0),
        { what: "two right rounds after the rebalance" }
      )
      yield* Fiber.interrupt(loop)
      const seen = yield* Ref.get(retries)
      yield* Effect.log(`typed retryable answers during the move: ${JSON.stringify([...seen])}`)
      assert.deepStrictEqual(yield* Ref.get(wrong), [], "a wrong answer or a non-retryable error")
    }), { timeout: 90_000 })
})
