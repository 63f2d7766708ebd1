/**
 * Interactive queries, end to end: starts a Kafka broker (or uses
 * KAFKA_BROKERS), counts words exactly once (the count in the transformer's
 * state and in a KeyValueStore) on two instances, and asks them for their
 * committed state over HTTP, printing each curl line with its answer: by
 * key, range and prefix, where each key lives (`/metadata`), a key asked at
 * the instance that does not run it (forwarded to the one that does), a
 * read of your own write bounded by its offset (KIP-796), then the same
 * through the typed `QueryClient`.
 *
 *   npm run example:query
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { Effect, Fiber, Layer, Option, Redacted, Schema } from "effect"
import kafkajs from "kafkajs"
import { KeyValueStore, QueryClient, Runner, SkeinConfig, Topic, Transformer } from "../src/index.ts"
import { KafkaBroker } from "../src/testing/index.ts"

const run = `${Date.now()}`
const Words = Topic.make({ name: `query-words-${run}`, key: Schema.String, value: Schema.String })
const Counts = Topic.make({ name: `query-counts-${run}`, key: Schema.String, value: Topic.json(Schema.Number) })
const Totals = KeyValueStore.make({ name: "totals", key: Schema.String, value: Schema.Number })

/** Counts each word: in its state (`/state/word-count/{word}`) and in the "totals" store (`/stores/totals/...`). */
export const WordCount = Transformer.make({
  name: "word-count",
  inputs: [Words],
  state: Schema.Number,
  stores: [Totals],
  transform: (record, count) =>
    Effect.gen(function*() {
      const next = Option.getOrElse(count, () => 0) + 1
      yield* Totals.put(record.key ?? "", next)
      return { emit: [Topic.record(Counts, record.key, next)], state: Transformer.set(next) }
    })
})

const words = "the quick brown fox jumps over the lazy dog the dog barks".split(" ")
const token = "example-token"

const program = Effect.gen(function*() {
  const { brokers } = yield* KafkaBroker.KafkaBroker
  const kafka = new kafkajs.Kafka({ brokers: [...brokers], logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  yield* Effect.promise(() => admin.connect())
  yield* Effect.promise(() =>
    admin.createTopics({ waitForLeaders: true, topics: [Words, Counts].map((t) => ({ topic: t.name, numPartitions: 3 })) })
  )
  yield* Effect.promise(() => admin.disconnect())
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  yield* Effect.promise(() => producer.connect())
  yield* Effect.promise(() => producer.send({ topic: Words.name, acks: -1, messages: words.map((word) => ({ key: word, value: word })) }))
  yield* Effect.promise(() => producer.disconnect())

  const instance = (name: string) =>
    Effect.gen(function*() {
      const stats = Runner.makeStats()
      const fiber = yield* Effect.fork(
        Runner.runWithStats(WordCount, stats).pipe(
          Effect.provide(SkeinConfig.layer({
            applicationId: `query-${run}`,
            brokers,
            stateDir: `.skein/example-state/${name}`,
            queryPort: 0, // any free port; a fixed one in production (SKEIN_QUERY_PORT)
            queryToken: Redacted.make(token)
          }))
        )
      )
      return { stats, fiber }
    })
  const first = yield* instance("a")
  const stats = first.stats
  const curlAt = (at: Runner.Stats, path: string, authorization = `Bearer ${token}`) =>
    Effect.promise(async () => {
      const response = await fetch(`http://127.0.0.1:${at.queryPort}${path}`, { headers: { authorization } })
      return { status: response.status, servedBy: response.headers.get("x-skein-served-by"), body: await response.text() }
    })
  const curl = (path: string, authorization = `Bearer ${token}`) => curlAt(stats, path, authorization)
  // Asked until the last "the" is committed (3): a 404 NotHere or 503 NotReady until the tasks run.
  while (stats.queryPort === undefined || JSON.parse((yield* curl("/state/word-count/the")).body).value !== 3) {
    yield* Effect.sleep("200 millis")
  }
  const port = stats.queryPort
  for (const path of ["/state/word-count/the", "/stores/totals/keys/dog", "/stores/totals/range?from=b&to=f&limit=2", "/stores/totals/prefix?prefix=th", "/stores/nope/keys/x"]) {
    const answer = yield* curl(path)
    console.log(`$ curl -s -H "Authorization: Bearer ${token}" 'http://127.0.0.1:${port}${path}'\n${answer.status} ${answer.body}\n`)
  }
  const refused = yield* curl("/state/word-count/the", "Bearer wrong")
  console.log(`$ curl -s -H "Authorization: Bearer wrong" 'http://127.0.0.1:${port}/state/word-count/the'\n${refused.status} ${refused.body}\n`)

  // A second instance joins: the group splits the partitions, and each instance learns where each key lives.
  const second = yield* instance("b")
  while (second.stats.assigned.size === 0 || stats.assigned.size === 0) yield* Effect.sleep("200 millis")
  const where = yield* curl("/metadata?key=dog")
  console.log(`$ curl -s -H "Authorization: Bearer ${token}" 'http://127.0.0.1:${port}/metadata?key=dog'\n${where.status} ${where.body}\n`)
  // Asked at the instance that does not run it: forwarded to the one that does (x-skein-served-by says which).
  const owner = JSON.parse(where.body).active
  const other = owner === `127.0.0.1:${port}` ? second.stats : stats
  const forwarded = yield* curlAt(other, "/stores/totals/keys/dog")
  console.log(
    `$ curl -s -i -H "Authorization: Bearer ${token}" 'http://127.0.0.1:${other.queryPort}/stores/totals/keys/dog'\n` +
      `${forwarded.status} x-skein-served-by: ${forwarded.servedBy} ${forwarded.body}\n`
  )
  // Read your write: one more "dog", and the query waits until the store reflects its offset.
  const producer2 = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  yield* Effect.promise(() => producer2.connect())
  const [sent] = yield* Effect.promise(() => producer2.send({ topic: Words.name, acks: -1, messages: [{ key: "dog", value: "dog" }] }))
  yield* Effect.promise(() => producer2.disconnect())
  const bound = `/state/word-count/dog?position=${Words.name}:${sent?.baseOffset ?? "0"}&timeout=10000`
  const fresh = yield* curl(bound)
  console.log(`$ curl -s -H "Authorization: Bearer ${token}" 'http://127.0.0.1:${port}${bound}'\n${fresh.status} ${fresh.body}\n`)

  // The typed client: values decoded with the transformer's and the store's Schemas.
  const client = yield* QueryClient.make({ endpoints: [`127.0.0.1:${port}`], token: Redacted.make(token) })
  console.log("QueryClient: state(WordCount, \"dog\") =", yield* client.state(WordCount, "dog"))
  console.log("QueryClient: range(Totals) =", (yield* client.range(Totals)).entries.map((e) => `${e.key}=${e.value}`).join(" "))
  yield* Fiber.interrupt(second.fiber)
  yield* Fiber.interrupt(first.fiber)
})

program.pipe(
  Effect.provide(Layer.merge(Layer.orDie(KafkaBroker.layer()), FetchHttpClient.layer)),
  Effect.timeout("5 minutes"),
  Runner.runMain
)
