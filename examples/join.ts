/**
 * Orders enriched with their customer's region, end to end: starts a Kafka
 * broker (or uses KAFKA_BROKERS), produces customers (keyed by customer id,
 * compacted style: an update, an inactive customer, a deleted one and a
 * record that is not JSON), runs a topology that keeps the active customers'
 * regions as a table and left-joins each order (keyed by customer id) with
 * it, exactly once, and reads the enriched orders back, read_committed.
 *
 * - The table's updates are consumed before the orders are produced: Skein
 *   does not yet order a task's inputs by timestamp (Kafka Streams'
 *   max.task.idle.ms), see docs/streams.md "Tables and joins".
 * - An inactive or deleted customer's orders get the region "unknown" (a
 *   left join); the customer record that is not JSON goes to the dead letter
 *   topic with the reason.
 *
 *   npm run example:join
 */
import { Effect, Either, Fiber, Layer, Schema } from "effect"
import kafkajs from "kafkajs"
import { KStream, KTable, Runner, SkeinConfig, Topic, Topology } from "../src/index.ts"
import { KafkaBroker } from "../src/testing/index.ts"

const run = `${Date.now()}`

const Customer = Schema.Struct({ name: Schema.String, region: Schema.String, active: Schema.Boolean })
const Order = Schema.Struct({ item: Schema.String, amount: Schema.Number })
const Enriched = Schema.Struct({ item: Schema.String, amount: Schema.Number, region: Schema.String })
const Customers = Topic.make({ name: `customers-${run}`, key: Schema.String, value: Topic.json(Customer) })
const Orders = Topic.make({ name: `orders-${run}`, key: Schema.String, value: Topic.json(Order) })
const EnrichedOrders = Topic.make({ name: `orders-enriched-${run}`, key: Schema.String, value: Topic.json(Enriched) })
const deadLetters = `customers-dead-letters-${run}`

const regions = KTable.from(Customers, { name: "customers" }).pipe(
  KTable.filter((customer) => customer.value.active),
  KTable.mapValues((customer) => customer.region)
)
const enriched = KStream.from(Orders).pipe(
  KStream.leftJoin(regions, (order, region) => ({ ...order, region: region ?? "unknown" }), { name: "enrich" }),
  KStream.to(EnrichedOrders)
)
const topology = Topology.make("enrich-orders", [enriched])

const customers: ReadonlyArray<readonly [string, string | null]> = [
  ["ada", JSON.stringify({ name: "Ada", region: "eu", active: true })],
  ["bob", JSON.stringify({ name: "Bob", region: "us", active: true })],
  ["cid", JSON.stringify({ name: "Cid", region: "ap", active: false })], // inactive: not in the table
  ["dee", JSON.stringify({ name: "Dee", region: "eu", active: true })],
  ["dee", null], // deleted (a tombstone)
  ["bob", JSON.stringify({ name: "Bob", region: "sa", active: true })], // moved
  ["eve", "{not json"] // to the dead letter topic
]
const orders: ReadonlyArray<readonly [string, string, number]> = [
  ["ada", "book", 12],
  ["bob", "pen", 2],
  ["cid", "ink", 5],
  ["dee", "lamp", 30],
  ["fay", "cup", 4] // no such customer
]

const program = Effect.gen(function*() {
  const { brokers, kind } = yield* KafkaBroker.KafkaBroker
  yield* Effect.log(`Kafka (${kind}) at ${brokers.join(",")}, run ${run}`)
  const applicationId = `enrich-orders-${run}`
  console.log(Topology.describe(topology, applicationId))
  const compiled = Topology.compile(topology, applicationId)
  if (Either.isLeft(compiled)) return yield* Effect.fail(compiled.left)
  const groupId = `${applicationId}-${compiled.right.subTopologies[0]!.name}`

  const kafka = new kafkajs.Kafka({ brokers: [...brokers], logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  yield* Effect.promise(() => admin.connect())
  yield* Effect.promise(() =>
    admin.createTopics({
      waitForLeaders: true,
      // The join's inputs are co-partitioned: the same partition count (Topology.run checks it).
      topics: [Customers.name, Orders.name, EnrichedOrders.name, deadLetters].map((topic) => ({ topic, numPartitions: 2 }))
    })
  )
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  yield* Effect.promise(() => producer.connect())
  yield* Effect.promise(() =>
    producer.send({ topic: Customers.name, acks: -1, messages: customers.map(([key, value]) => ({ key, value })) })
  )

  const runner = yield* Effect.fork(
    Topology.run(topology).pipe(
      Effect.provide(SkeinConfig.layer({ applicationId, brokers, stateDir: ".skein/example-state", deadLetterTopic: deadLetters }))
    )
  )

  // The table is loaded once the topology's group has committed the customers topic to its end.
  const ends = yield* Effect.promise(() => admin.fetchTopicOffsets(Customers.name))
  const loaded = Effect.promise(() => admin.fetchOffsets({ groupId, topics: [Customers.name] })).pipe(
    Effect.map(([committed]) =>
      ends.every((end) => Number(committed?.partitions.find((p) => p.partition === end.partition)?.offset ?? -1) >= Number(end.high))
    )
  )
  while (!(yield* loaded)) yield* Effect.sleep("200 millis")
  yield* Effect.log("the customers table is loaded; producing orders")
  yield* Effect.promise(() =>
    producer.send({
      topic: Orders.name,
      acks: -1,
      messages: orders.map(([customer, item, amount]) => ({ key: customer, value: JSON.stringify({ item, amount }) }))
    })
  )
  yield* Effect.promise(() => producer.disconnect())

  const results: Array<string> = []
  const dead: Array<string> = []
  const consumer = kafka.consumer({ groupId: `reader-${run}`, readUncommitted: false })
  yield* Effect.promise(() => consumer.connect())
  yield* Effect.promise(() => consumer.subscribe({ topics: [EnrichedOrders.name, deadLetters], fromBeginning: true }))
  yield* Effect.promise(() =>
    consumer.run({
      eachMessage: async ({ message, topic }) => {
        if (topic === EnrichedOrders.name) results.push(`${message.key?.toString()}: ${message.value?.toString()}`)
        else dead.push(`${message.key?.toString()}: ${(message.headers?.["skein.error"]?.toString() ?? "").split("\n")[0]}`)
      }
    })
  )
  while (results.length < orders.length || dead.length < 1) yield* Effect.sleep("200 millis")
  yield* Effect.promise(() => consumer.disconnect())
  yield* Fiber.interrupt(runner)
  yield* Effect.promise(() => admin.disconnect())

  console.log("enriched orders (read_committed):")
  for (const line of results.sort()) console.log(`  ${line}`)
  console.log(`dead letters (${dead.length}):`)
  for (const line of dead) console.log(`  ${line.slice(0, 160)}`)
})

program.pipe(
  Effect.provide(Layer.orDie(KafkaBroker.layer())),
  Effect.timeout("5 minutes"),
  Runner.runMain // Ctrl-C: the runs stop gracefully; exit code 0, or 1 on a failure
)
