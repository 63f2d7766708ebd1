/**
 * Orders per customer per minute, end to end: starts a Kafka broker (or uses
 * KAFKA_BROKERS), produces orders keyed by order id with the time each was
 * placed in the value, and runs a topology that re-keys them by customer
 * (through a repartition topic), counts them in tumbling one-minute windows
 * of event time with 10 seconds of grace, and emits each window's final
 * count once, when the window closes.
 *
 * - Out-of-order orders within the grace period still count in their window.
 * - An order placed after its window closed (late) goes to the dead letter
 *   topic with the reason, as the rule says; so does an order with a negative
 *   time.
 * - A last order ten minutes later moves stream time past every earlier
 *   window's end plus grace, so their final results are emitted.
 *
 *   npm run example:windows
 *
 * docs/streams.md explains event time, windows, late records and final results.
 */
import { Effect, Fiber, Layer, Schema } from "effect"
import kafkajs from "kafkajs"
import {
  ErrorRule,
  KStream,
  KGroupedStream,
  KTable,
  Runner,
  SkeinConfig,
  TimeWindowedKStream,
  TimeWindows,
  Topic,
  Topology,
  Windowed
} from "../src/index.ts"
import { KafkaBroker } from "../src/testing/index.ts"

const run = `${Date.now()}`
const minute = 60_000
/**
 * The start of the example's first minute of event time: a quarter of an hour ago, so that every
 * order was placed in the past (a broker rejects a record stamped more than
 * `message.timestamp.after.max.ms`, an hour by default, in the future).
 */
const t0 = Math.floor((Date.now() - 15 * minute) / minute) * minute

const Order = Schema.Struct({ customer: Schema.String, amount: Schema.Number, placedAt: Schema.Number })
const Orders = Topic.make({ name: `orders-${run}`, key: Schema.String, value: Topic.json(Order) })
const PerMinute = Topic.make({
  name: `orders-per-customer-minute-${run}`,
  key: Windowed.json(Schema.String),
  value: Topic.json(Schema.Number)
})
const deadLetters = `orders-dead-letters-${run}`

/** [order id, customer, seconds after t0]: the order they are produced in is not event-time order. */
const orders: ReadonlyArray<readonly [string, string, number]> = [
  ["o1", "ada", 5],
  ["o2", "bob", 12],
  ["o3", "ada", 40],
  ["o4", "ada", 65], // minute 1
  ["o5", "bob", 58], // out of order: minute 0 is still open (stream time 65 s < 60 s + 10 s grace)
  ["o6", "bob", 75],
  ["o7", "ada", 130], // minute 2: stream time 130 s closes minute 0 (70 s) and minute 1 (130 s)
  ["o8", "bob", 30], // late: minute 0 closed at 70 s of stream time
  ["o9", "ada", -1], // a negative event time
  ["o10", "ada", 600] // ten minutes in: closes minute 2
]

const perCustomerMinute = KStream.fromTopics([Orders], { timestamp: (order) => order.value.placedAt }).pipe(
  KStream.groupBy((order) => order.value.customer, { key: Schema.String, value: Topic.json(Order), name: "by-customer" }),
  KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace("1 minute", "10 seconds")),
  TimeWindowedKStream.count({ name: "orders-per-minute", emit: "onWindowClose", late: "error" }),
  KTable.toStream,
  KStream.to(PerMinute)
)
const topology = Topology.make("orders-per-minute", [perCustomerMinute])

const program = Effect.gen(function*() {
  const { brokers, kind } = yield* KafkaBroker.KafkaBroker
  yield* Effect.log(`Kafka (${kind}) at ${brokers.join(",")}, run ${run}`)
  const applicationId = `orders-per-minute-${run}`
  console.log(Topology.describe(topology, applicationId))

  const kafka = new kafkajs.Kafka({ brokers: [...brokers], logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  yield* Effect.promise(() => admin.connect())
  yield* Effect.promise(() =>
    admin.createTopics({
      waitForLeaders: true,
      topics: [Orders.name, PerMinute.name, deadLetters].map((topic) => ({ topic, numPartitions: 1 }))
    })
  )
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  yield* Effect.promise(() => producer.connect())
  yield* Effect.promise(() =>
    producer.send({
      topic: Orders.name,
      acks: -1,
      messages: orders.map(([id, customer, seconds]) => ({
        key: id,
        value: JSON.stringify({ customer, amount: 10, placedAt: seconds < 0 ? -1 : t0 + seconds * 1000 })
      }))
    })
  )
  yield* Effect.promise(() => producer.disconnect())

  const runner = yield* Effect.fork(
    Topology.run(topology, {
      rules: [
        ErrorRule.tagged("LateRecord", { then: "dlq" }),
        ErrorRule.tagged("InvalidTimestamp", { then: "dlq" }),
        // An event time further ahead than the topics' message.timestamp.after.max.ms (an hour by default).
        ErrorRule.tagged("TimestampOutOfRange", { then: "dlq" })
      ]
    }).pipe(
      Effect.provide(SkeinConfig.layer({
        applicationId,
        brokers,
        stateDir: ".skein/example-state",
        deadLetterTopic: deadLetters
      }))
    )
  )

  // Read the final results and the dead letters back, read_committed: five windows closed
  // (ada and bob in minutes 0 and 1, ada in minute 2), two orders dead-lettered.
  const results: Array<string> = []
  const dead: Array<string> = []
  const consumer = kafka.consumer({ groupId: `reader-${run}`, readUncommitted: false })
  yield* Effect.promise(() => consumer.connect())
  yield* Effect.promise(() => consumer.subscribe({ topics: [PerMinute.name, deadLetters], fromBeginning: true }))
  yield* Effect.promise(() =>
    consumer.run({
      eachMessage: async ({ message, topic }) => {
        if (topic === PerMinute.name) {
          const { key, window } = JSON.parse(message.key?.toString() ?? "{}")
          const from = (window.start - t0) / 1000
          const count = message.value?.toString() ?? ""
          results.push(`${String(key).padEnd(4)} [${from}s, ${from + 60}s)  ${count} order${count === "1" ? "" : "s"}`)
        } else {
          const error = message.headers?.["skein.error"]?.toString() ?? ""
          dead.push(`${message.key?.toString()}: ${error.split("\n")[0]}`)
        }
      }
    })
  )
  while (results.length < 5 || dead.length < 2) {
    yield* Effect.sleep("200 millis")
  }
  yield* Effect.promise(() => consumer.disconnect())
  yield* Fiber.interrupt(runner)
  yield* Effect.promise(() => admin.disconnect())

  console.log("final results, one per customer and minute (read_committed):")
  for (const line of results) console.log(`  ${line}`)
  console.log(`dead letters (${dead.length}):`)
  for (const line of dead) console.log(`  ${line.slice(0, 160)}`)
})

program.pipe(
  Effect.provide(Layer.orDie(KafkaBroker.layer())),
  Effect.timeout("5 minutes"),
  Runner.runMain // Ctrl-C: the runs stop gracefully; exit code 0, or 1 on a failure
)
