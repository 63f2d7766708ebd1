/**
 * Word count, end to end: starts a Kafka broker (or uses KAFKA_BROKERS),
 * produces lines of text, counts words exactly once with a stateful
 * transformer, and reads the counts back read_committed. Both stages (split
 * lines into words, count words) run in this one process with `Runner.runAll`.
 *
 *   npm run example               # Node
 *   npx bun examples/word-count.ts
 *   npx deno run -A examples/word-count.ts
 */
import { Effect, Fiber, Layer, Option, Schema } from "effect"
import kafkajs from "kafkajs"
import { Runner, SkeinConfig, Topic, Transformer } from "../src/index.ts"
import { KafkaBroker } from "../src/testing/index.ts"

const run = `${Date.now()}`
const Lines = Topic.make({ name: `lines-${run}`, key: Schema.String, value: Schema.String })
const Words = Topic.make({ name: `words-${run}`, key: Schema.String, value: Schema.String })
const Counts = Topic.make({ name: `word-counts-${run}`, key: Schema.String, value: Topic.json(Schema.Number) })

/** Stage 1 (stateless): split lines into words, keyed by word. */
export const SplitWords = Transformer.stateless({
  name: "split-words",
  inputs: [Lines],
  transform: (line) =>
    Effect.succeed({
      emit: line.value.toLowerCase().split(/\W+/).filter((w) => w.length > 0).map((word) =>
        Topic.record(Words, word, word)
      )
    })
})

/** Stage 2 (stateful): count each word; the count is changelog-backed state. */
export const WordCount = Transformer.make({
  name: "word-count",
  inputs: [Words],
  state: Schema.Number,
  transform: (record, count) => {
    const next = Option.getOrElse(count, () => 0) + 1
    return Effect.succeed({ emit: [Topic.record(Counts, record.key, next)], state: Transformer.set(next) })
  }
})

const text = [
  "the quick brown fox jumps over the lazy dog",
  "the dog barks",
  "exactly once means the fox is counted once"
]

const program = Effect.gen(function*() {
  const { brokers, kind } = yield* KafkaBroker.KafkaBroker
  yield* Effect.log(`Kafka (${kind}) at ${brokers.join(",")}, run ${run}`)
  const kafka = new kafkajs.Kafka({ brokers: [...brokers], logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  yield* Effect.promise(() => admin.connect())
  yield* Effect.promise(() =>
    admin.createTopics({
      waitForLeaders: true,
      topics: [Lines, Words, Counts].map((t) => ({ topic: t.name, numPartitions: 3 }))
    })
  )
  // Idempotent, so that a retried send never duplicates a line.
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  yield* Effect.promise(() => producer.connect())
  yield* Effect.promise(() => producer.send({ topic: Lines.name, acks: -1, messages: text.map((value) => ({ value })) }))
  yield* Effect.promise(() => producer.disconnect())

  // Both stages in this one process: each its own consumer group, transactional ids and
  // changelog (application ids word-count-<run>-split-words and word-count-<run>-word-count).
  const stages = yield* Effect.fork(
    Runner.runAll([SplitWords, WordCount]).pipe(
      Effect.provide(SkeinConfig.layer({ applicationId: `word-count-${run}`, brokers, stateDir: ".skein/example-state" }))
    )
  )

  // Read the counts back, read_committed, until every word is counted.
  const expected = text.join(" ").split(/\W+/).filter((w) => w.length > 0).length
  const counts = new Map<string, number>()
  let received = 0
  const consumer = kafka.consumer({ groupId: `reader-${run}`, readUncommitted: false })
  yield* Effect.promise(() => consumer.connect())
  yield* Effect.promise(() => consumer.subscribe({ topic: Counts.name, fromBeginning: true }))
  yield* Effect.promise(() =>
    consumer.run({
      eachMessage: async ({ message }) => {
        received++
        const word = message.key?.toString() ?? ""
        counts.set(word, Math.max(counts.get(word) ?? 0, Number(message.value?.toString())))
      }
    })
  )
  while (received < expected) {
    yield* Effect.sleep("200 millis")
  }
  yield* Effect.promise(() => consumer.disconnect())
  yield* Fiber.interrupt(stages)
  yield* Effect.promise(() => admin.disconnect())
  const sorted = [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
  console.log(`read back ${received} committed records; word counts:`)
  for (const [word, n] of sorted) console.log(`  ${word.padEnd(10)} ${n}`)
})

program.pipe(
  Effect.provide(Layer.orDie(KafkaBroker.layer())),
  Effect.timeout("5 minutes"),
  Runner.runMain // Ctrl-C: the runs stop gracefully; exit code 0, or 1 on a failure
)
