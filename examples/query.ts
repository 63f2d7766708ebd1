/**
 * Interactive queries, end to end: starts a Kafka broker (or uses
 * KAFKA_BROKERS), counts words exactly once (the count in the transformer's
 * state and in a KeyValueStore), and asks the running instance for its
 * committed state over HTTP, printing each curl line with its answer.
 *
 *   npm run example:query
 */
import { Effect, Fiber, Layer, Option, Redacted, Schema } from "effect"
import kafkajs from "kafkajs"
import { KeyValueStore, Runner, SkeinConfig, Topic, Transformer } from "../src/index.ts"
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

  const stats = Runner.makeStats()
  const app = yield* Effect.fork(
    Runner.runWithStats(WordCount, stats).pipe(
      Effect.provide(SkeinConfig.layer({
        applicationId: `query-${run}`,
        brokers,
        stateDir: ".skein/example-state",
        queryPort: 0, // any free port; a fixed one in production (SKEIN_QUERY_PORT)
        queryToken: Redacted.make(token)
      }))
    )
  )
  const curl = (path: string, authorization = `Bearer ${token}`) =>
    Effect.promise(async () => {
      const response = await fetch(`http://127.0.0.1:${stats.queryPort}${path}`, { headers: { authorization } })
      return { status: response.status, body: await response.text() }
    })
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
  console.log(`$ curl -s -H "Authorization: Bearer wrong" 'http://127.0.0.1:${port}/state/word-count/the'\n${refused.status} ${refused.body}`)
  yield* Fiber.interrupt(app)
})

program.pipe(
  Effect.provide(Layer.orDie(KafkaBroker.layer())),
  Effect.timeout("5 minutes"),
  Runner.runMain
)
