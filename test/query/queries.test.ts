/**
 * Interactive queries on a real broker (issue 33, slice 1): a counting
 * transformer's state and its KeyValueStore, asked over HTTP, equal the
 * latest committed output of each key; the writes of a transaction held
 * open (a handler stalled after writing) are never an answer; bad requests
 * and a wrong or missing token are clear 4xx (the token never logged), and
 * the run keeps going; with a second instance, each key is answered by the
 * instance that runs its partition, asked at either (the other forwards it,
 * or answers NotHere naming the owner when told not to forward: the group's
 * routes); the typed client, given one instance, answers every key (typed,
 * following NotHere to the owner) and scans every partition across both; a
 * query bounded by the offset of a record just produced (KIP-796) answers
 * with that record counted, and one whose offset is never reached fails with
 * NotUpToBound.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, HashMap, Logger, Option, Redacted, Schema } from "effect"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { KeyValueStore, QueryClient, SessionStore, Topic, Transformer, WindowStore } from "../../src/index.ts"
import { partitionOf } from "../../src/internal/query/partitioner.ts"
import { caughtUp, createTopics, eventually, offsets, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"
import { tempDir } from "../helpers/tempDir.ts"

const partitions = 3

/** The JSON of an answer, the fields a test reads. */
interface Answer {
  readonly error?: string
  readonly transformer?: string
  readonly key?: string
  readonly partition?: number
  readonly found?: boolean
  readonly value?: unknown
  readonly known?: ReadonlyArray<string>
  readonly maxLimit?: number
  readonly entries?: ReadonlyArray<{ readonly key: string; readonly value: number }>
  readonly next?: string | null
  readonly complete?: boolean
  readonly owner?: string | null
  readonly windows?: ReadonlyArray<{ readonly start: number; readonly value: number }>
  readonly sessions?: ReadonlyArray<{ readonly start: number; readonly end: number; readonly value: number }>
}
const token = "query-token-7f3a9c"

describe("interactive queries on a broker", () => {
  it.scopedLive("answer committed state only: equal to the committed output, never a held transaction's writes", () =>
    Effect.gen(function*() {
      const input = unique("q-in")
      const output = unique("q-out")
      const applicationId = unique("q-app")
      yield* createTopics([{ name: input, partitions }, { name: output, partitions }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Schema.Number) })
      const Totals = KeyValueStore.make({ name: "totals", key: Schema.String, value: Schema.Number })
      // The n-th record of a key: its window starting at n seconds, and the key's one session grown to end there.
      const Steps = WindowStore.make({ name: "steps", key: Schema.String, value: Schema.Number })
      const Span = SessionStore.make({ name: "span", key: Schema.String, value: Schema.Number })
      const stalled = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const transformer = Transformer.make({
        name: "count",
        inputs: [In],
        state: Schema.Number,
        stores: [Totals, Steps, Span],
        transform: (record, count) =>
          Effect.gen(function*() {
            const previous = Option.getOrElse(count, () => 0)
            const next = previous + 1
            const key = record.key ?? ""
            yield* Totals.put(key, next)
            yield* Steps.put(key, next * 1000, next)
            if (previous > 0) yield* Span.remove(key, { start: 1000, end: previous * 1000 })
            yield* Span.put(key, { start: 1000, end: next * 1000 }, next)
            if (record.value === "stall") {
              // Written, and held: the transaction stays open until the test releases it.
              yield* Deferred.succeed(stalled, undefined)
              yield* Deferred.await(release)
            }
            return { emit: [Topic.record(Out, record.key, next)], state: Transformer.set(next) }
          })
      })
      const logged: Array<string> = []
      const capture = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ message }) => {
          logged.push(Array.isArray(message) ? message.map(String).join(" ") : String(message))
        })
      )
      const instance = yield* startInstance(transformer, {
        applicationId,
        stateDir: yield* tempDir("skein-query-"),
        queryPort: 0,
        queryToken: Redacted.make(token),
        // Long enough that "fresh" and the stalled record start in one batch (one transaction) on a busy machine:
        // with 100 ms, a slow first record ended the batch before the second started, and "fresh" committed alone.
        maxBatchDuration: Duration.seconds(2)
      }, capture)

      const askAt = (
        at: typeof instance,
        path: string,
        authorization: string | null = `Bearer ${token}`,
        headers: Record<string, string> = {}
      ) =>
        Effect.gen(function*() {
          yield* eventually(Effect.sync(() => at.stats.queryPort !== undefined), { what: "the query endpoint" })
          return yield* Effect.promise(async () => {
            const response = await fetch(`http://127.0.0.1:${at.stats.queryPort}${path}`, {
              headers: authorization === null ? headers : { ...headers, authorization }
            })
            const text = await response.text()
            try {
              return { status: response.status, servedBy: response.headers.get("x-skein-served-by"), json: JSON.parse(text) as Answer }
            } catch {
              throw new Error(`${path}: ${response.status} ${JSON.stringify(text)}`)
            }
          })
        })
      const ask = (path: string, authorization: string | null = `Bearer ${token}`) => askAt(instance, path, authorization)

      // Keys k0..k8, key i with i + 1 records, over the three partitions.
      const keys = Array.from({ length: 9 }, (_, i) => `k${i}`)
      yield* produce(input, keys.flatMap((key, i) => Array.from({ length: i + 1 }, () => ({ key, value: "inc" }))))
      yield* caughtUp(applicationId, input)
      const latest = (yield* readCommitted(output)).sort((a, b) => a.offset - b.offset)
        .reduce((m, r) => HashMap.set(m, r.key ?? "", Number(r.value)), HashMap.empty<string, number>())
      assert.strictEqual(HashMap.size(latest), keys.length)
      for (const key of keys) {
        const committed = Option.getOrThrow(HashMap.get(latest, key))
        const state = yield* ask(`/state/count/${key}`)
        assert.strictEqual(state.status, 200, JSON.stringify(state.json))
        assert.deepStrictEqual(state.json, {
          transformer: "count",
          key,
          partition: partitionOf(key, partitions),
          found: true,
          value: committed
        })
        const stored = yield* ask(`/stores/totals/keys/${key}`)
        assert.strictEqual(stored.json.value, committed, key)
        // Window and session stores: the key's windows 1..n (from 2 s on: 2..n), and its one session.
        const windows = yield* ask(`/stores/steps/windows/${key}?from=2000`)
        assert.deepStrictEqual(
          windows.json.windows,
          Array.from({ length: committed - 1 }, (_, i) => ({ start: (i + 2) * 1000, value: i + 2 })),
          key
        )
        const sessions = yield* ask(`/stores/span/sessions/${key}`)
        assert.deepStrictEqual(sessions.json.sessions, [{ start: 1000, end: committed * 1000, value: committed }], key)
      }
      // The store in key order, four entries a page, every partition here.
      const scanned: Array<[string, number]> = []
      let after: string | null = null
      for (let page = 0; page < 10; page++) {
        const answer: { json: Answer } = yield* ask(`/stores/totals/range?limit=4${after === null ? "" : `&after=${after}`}`)
        assert.isTrue(answer.json.complete)
        scanned.push(...(answer.json.entries ?? []).map((e): [string, number] => [e.key, e.value]))
        after = answer.json.next ?? null
        if (after === null) break
      }
      assert.deepStrictEqual(scanned, keys.map((key): [string, number] => [key, Option.getOrThrow(HashMap.get(latest, key))]))

      // A transaction held open: "fresh" finishes, then "k4" stalls after writing, in one batch of one partition.
      const held = "k4"
      const fresh = Array.from({ length: 100 }, (_, i) => `fresh${i}`).find((key) => partitionOf(key, partitions) === partitionOf(held, partitions))
      if (fresh === undefined) return assert.fail("no key of k4's partition")
      yield* produce(input, [{ key: fresh, value: "inc" }, { key: held, value: "stall" }])
      yield* Deferred.await(stalled)
      for (let round = 0; round < 5; round++) {
        assert.strictEqual((yield* ask(`/state/count/${held}`)).json.value, 5, "the held transaction's state")
        assert.strictEqual((yield* ask(`/stores/totals/keys/${held}`)).json.value, 5, "the held transaction's store write")
        assert.isFalse((yield* ask(`/state/count/${fresh}`)).json.found, "a finished record of the open transaction")
        assert.isFalse((yield* ask(`/stores/totals/keys/${fresh}`)).json.found)
        const prefix = yield* ask("/stores/totals/prefix?prefix=fresh")
        assert.deepStrictEqual(prefix.json.entries, [])
        assert.strictEqual((yield* ask(`/stores/steps/windows/${held}`)).json.windows?.length, 5, "the held window write")
        assert.deepStrictEqual((yield* ask(`/stores/span/sessions/${held}`)).json.sessions, [{ start: 1000, end: 5000, value: 5 }])
      }
      yield* Deferred.succeed(release, undefined)
      yield* caughtUp(applicationId, input)
      assert.strictEqual((yield* ask(`/state/count/${held}`)).json.value, 6)
      assert.deepStrictEqual((yield* ask(`/stores/steps/windows/${held}?from=6000&to=6000`)).json.windows, [{ start: 6000, value: 6 }])
      assert.strictEqual((yield* ask(`/stores/totals/keys/${fresh}`)).json.value, 1)

      // Bad requests: clear 4xx, the run keeps going.
      const unknownStore = yield* ask("/stores/nope/keys/a")
      assert.deepStrictEqual([unknownStore.status, unknownStore.json.error, unknownStore.json.known], [404, "UnknownStore", ["totals"]])
      const unknownTransformer = yield* ask("/state/other/a")
      assert.deepStrictEqual([unknownTransformer.status, unknownTransformer.json.error], [404, "UnknownTransformer"])
      const malformed = yield* ask("/state/count/%E0%A4%A")
      assert.deepStrictEqual([malformed.status, malformed.json.error], [400, "MalformedPath"])
      const reserved = yield* ask("/state/count/%00skein.timers")
      assert.deepStrictEqual([reserved.status, reserved.json.error], [400, "MalformedKey"])
      const tooLarge = yield* ask("/stores/totals/range?limit=100000")
      assert.deepStrictEqual([tooLarge.status, tooLarge.json.error, tooLarge.json.maxLimit], [400, "RangeTooLarge", 1000])
      const badPartition = yield* ask("/stores/totals/keys/k1?partition=7")
      assert.deepStrictEqual([badPartition.status, badPartition.json.error], [400, "InvalidParameter"])

      // A missing or wrong token: 401, logged without the token.
      const missing = yield* ask("/state/count/k1", null)
      assert.deepStrictEqual([missing.status, missing.json.error], [401, "Unauthorized"])
      const wrong = yield* ask("/state/count/k1", "Bearer query-token-7f3a9d")
      assert.strictEqual(wrong.status, 401)
      assert.strictEqual(wrong.json.value, undefined)
      assert.isTrue(logged.some((line) => line.includes("refused GET /state/count/k1") && line.includes("a wrong bearer token")))
      assert.isTrue(logged.some((line) => line.includes("no bearer token")))
      assert.isFalse(logged.some((line) => line.includes(token) || line.includes("query-token-7f3a9d")), "a token in the logs")

      yield* produce(input, [{ key: "k1", value: "inc" }])
      yield* caughtUp(applicationId, input)
      assert.strictEqual((yield* ask("/state/count/k1")).json.value, 3)
      assert.isTrue(Option.isNone(yield* instance.exit), "the run is still going")

      // A second instance takes some partitions: each key is answered by its owner, asked at either instance.
      const second = yield* startInstance(transformer, {
        applicationId,
        stateDir: yield* tempDir("skein-query-b-"),
        queryPort: 0,
        queryToken: Redacted.make(token)
      })
      yield* eventually(
        Effect.sync(() =>
          second.stats.assigned.size > 0 && instance.stats.assigned.size > 0 &&
          second.stats.assigned.size + instance.stats.assigned.size === partitions
        ),
        { what: "the partitions to be split between the instances" }
      )
      for (const key of keys) {
        const committed = key === "k1" ? 3 : key === held ? 6 : Option.getOrThrow(HashMap.get(latest, key))
        const partition = partitionOf(key, partitions)
        const [owner, other] = instance.stats.assigned.has(partition) ? [instance, second] : [second, instance]
        const ownerEndpoint = `127.0.0.1:${owner.stats.queryPort}`
        const answered = yield* askAt(owner, `/state/count/${key}`)
        assert.deepStrictEqual([answered.status, answered.json.value, answered.servedBy], [200, committed, ownerEndpoint], key)
        // Asked at the other instance: forwarded to the owner (the routes of the group's last join), its answer.
        const forwarded = yield* askAt(other, `/state/count/${key}`)
        assert.deepStrictEqual([forwarded.status, forwarded.json.value, forwarded.servedBy], [200, committed, ownerEndpoint], key)
        // Told not to forward: NotHere naming the owner.
        const elsewhere = yield* askAt(other, `/state/count/${key}`, `Bearer ${token}`, { "x-skein-forward": "no" })
        assert.deepStrictEqual(
          [elsewhere.status, elsewhere.json.error, elsewhere.json.partition, elsewhere.json.owner],
          [404, "NotHere", partition, ownerEndpoint],
          key
        )
      }
      // The typed client, given only the first instance: every key's value, its windows, and a scan of both instances.
      const client = yield* QueryClient.make({ endpoints: [`127.0.0.1:${instance.stats.queryPort}`], token: Redacted.make(token) })
        .pipe(Effect.provide(FetchHttpClient.layer))
      const expected = new Map(keys.map((key) => [key, key === "k1" ? 3 : key === held ? 6 : Option.getOrThrow(HashMap.get(latest, key))]))
      for (const [key, committed] of expected) {
        assert.deepStrictEqual(yield* client.state(transformer, key), Option.some(committed), key)
        assert.deepStrictEqual(yield* client.get(Totals, key), Option.some(committed), key)
        const windows = yield* client.windows(Steps, key, 0, Number.MAX_SAFE_INTEGER)
        assert.deepStrictEqual(windows.map((w) => w.value), Array.from({ length: committed }, (_, i) => i + 1), key)
      }
      const page = yield* client.range(Totals, { from: "k", to: "k~" })
      assert.deepStrictEqual(page.entries.map((e) => [e.key, e.value]), [...expected])
      // The same scan over plain HTTP at one instance: it merges the other's page.
      const merged = yield* askAt(instance, "/stores/totals/range?from=k&to=k~")
      assert.deepStrictEqual([merged.json.complete, merged.json.entries?.map((e) => [e.key, e.value])], [true, [...expected]])

      // Read your write: the offset a record was appended at bounds the query, which waits for its commit.
      const written = "k7"
      const partitionOfWritten = partitionOf(written, partitions)
      yield* produce(input, [{ key: written, value: "inc" }])
      const end = (yield* offsets(input)).find((o) => o.partition === partitionOfWritten)?.lastStable ?? 0
      const bounded = yield* client.state(transformer, written, { position: [{ topic: input, offset: end - 1 }] })
      assert.deepStrictEqual(bounded, Option.some((expected.get(written) ?? 0) + 1))
      const never = yield* Effect.flip(client.get(Totals, written, { position: [{ topic: input, offset: end + 1000 }], timeout: "300 millis" }))
      assert.strictEqual(never.reason, "NotUpToBound")
      assert.include(never.detail, "within 300 ms")
    }), { timeout: 60_000 })
})
