/**
 * A durable workflow as a Kafka handler, end to end: starts a Kafka broker
 * (or uses KAFKA_BROKERS), produces orders, and runs a three-step shipping
 * workflow per order (reserve stock, charge, book a courier) with
 * `@effect/workflow` activities. Each step's result is durable in the run
 * store before the next step starts; a crash resumes after the last finished
 * step, and a redelivered order whose run completed is read back, not re-run.
 *
 * The payment provider fails the first charge of every order: the error rule
 * retries the record, and the retry runs only the charge (the reservation is
 * read back from the run store). An order for an unknown item fails its
 * workflow and goes to the dead letter topic; a malformed order never reaches
 * the workflow.
 *
 *   npm run example:workflow
 */
import { Activity, Workflow } from "@effect/workflow"
import { Effect, Fiber, Layer, Schedule, Schema } from "effect"
import kafkajs from "kafkajs"
import { ErrorRule, KafkaWorkflow, Runner, SkeinConfig, Topic } from "../src/index.ts"
import { KafkaBroker } from "../src/testing/index.ts"

const run = `${Date.now()}`

class PaymentDeclined extends Schema.TaggedError<PaymentDeclined>()("PaymentDeclined", { order: Schema.String }) {}
class OutOfStock extends Schema.TaggedError<OutOfStock>()("OutOfStock", { item: Schema.String }) {}

/** An ordinary @effect/workflow workflow: the execution id comes from the order id. */
const ShipOrder = Workflow.make({
  name: "ship-order",
  payload: { order: Schema.String, item: Schema.String, placed: Schema.Date },
  success: Schema.Struct({ order: Schema.String, reservation: Schema.String, payment: Schema.String, courier: Schema.String }),
  error: Schema.Union(PaymentDeclined, OutOfStock),
  idempotencyKey: (order) => order.order
})

const Orders = KafkaWorkflow.topic(`orders-${run}`, ShipOrder)
const Shipments = Topic.make({ name: `shipments-${run}`, key: Schema.String, value: Topic.json(Schema.String) })
const deadLetters = `orders-dead-letters-${run}`

/** How often each step really ran, per order (what the run store saves you). */
const ran = new Map<string, number>()
const count = (step: string, order: string) => ran.set(`${step} ${order}`, (ran.get(`${step} ${order}`) ?? 0) + 1)

const Shipping = KafkaWorkflow.make({
  name: "shipping",
  input: Orders,
  workflow: ShipOrder,
  execute: (order) =>
    Effect.gen(function*() {
      const reservation = yield* Activity.make({
        name: "reserve",
        success: Schema.String,
        error: OutOfStock,
        execute: Effect.suspend(() => {
          count("reserve", order.order)
          return order.item === "unobtainium" ? Effect.fail(new OutOfStock({ item: order.item })) : Effect.succeed(`stock-${order.item}`)
        })
      })
      const payment = yield* Activity.make({
        name: "charge",
        success: Schema.String,
        error: PaymentDeclined,
        execute: Effect.suspend(() => {
          count("charge", order.order)
          // The provider declines every order's first attempt.
          return (ran.get(`charge ${order.order}`) ?? 0) === 1 ? Effect.fail(new PaymentDeclined({ order: order.order })) : Effect.succeed(`paid-${order.order}`)
        })
      })
      const courier = yield* Activity.make({
        name: "book-courier",
        success: Schema.String,
        execute: Effect.sync(() => {
          count("book-courier", order.order)
          return `courier-${order.placed.getUTCDay()}`
        })
      })
      return { order: order.order, reservation, payment, courier }
    }),
  emit: (shipment, record) => [Topic.record(Shipments, record.key, `${shipment.reservation} ${shipment.payment} ${shipment.courier}`)],
  rules: [
    ErrorRule.tagged("PaymentDeclined", { retry: Schedule.recurs(2), then: "dlq" }),
    ErrorRule.tagged("OutOfStock", { then: "dlq" })
  ]
})

const orders: ReadonlyArray<{ readonly key: string; readonly value: string }> = [
  { key: "o1", value: JSON.stringify({ order: "o1", item: "kettle", placed: "2026-12-01T09:00:00.000Z" }) },
  { key: "o2", value: JSON.stringify({ order: "o2", item: "lamp", placed: "2026-12-02T09:00:00.000Z" }) },
  { key: "o3", value: JSON.stringify({ order: "o3", item: "unobtainium", placed: "2026-12-02T10:00:00.000Z" }) },
  { key: "o4", value: "{ not an order" }
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
      topics: [Orders.name, Shipments.name, deadLetters].map((topic) => ({ topic, numPartitions: 1 }))
    })
  )
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  yield* Effect.promise(() => producer.connect())
  yield* Effect.promise(() => producer.send({ topic: Orders.name, acks: -1, messages: [...orders] }))
  yield* Effect.promise(() => producer.disconnect())

  const runner = yield* Effect.fork(
    Runner.run(Shipping).pipe(
      Effect.provide(SkeinConfig.layer({
        applicationId: `shipping-${run}`,
        brokers,
        stateDir: ".skein/example-state",
        deadLetterTopic: deadLetters
      }))
    )
  )

  const shipped: Array<string> = []
  const dead: Array<string> = []
  const consumer = kafka.consumer({ groupId: `reader-${run}`, readUncommitted: false })
  yield* Effect.promise(() => consumer.connect())
  yield* Effect.promise(() => consumer.subscribe({ topics: [Shipments.name, deadLetters], fromBeginning: true }))
  yield* Effect.promise(() =>
    consumer.run({
      eachMessage: async ({ message, topic }) => {
        if (topic === Shipments.name) shipped.push(`${message.key?.toString()}: ${message.value?.toString()}`)
        else dead.push(`${message.key?.toString()}: ${(message.headers?.["skein.error"]?.toString() ?? "").split("\n")[0]}`)
      }
    })
  )
  while (shipped.length + dead.length < orders.length) yield* Effect.sleep("200 millis")
  yield* Effect.promise(() => consumer.disconnect())
  yield* Fiber.interrupt(runner)
  yield* Effect.promise(() => admin.disconnect())

  console.log("shipments (read_committed):")
  for (const line of shipped.sort()) console.log(`  ${line}`)
  console.log("steps run (the retried charge did not re-run the reservation):")
  for (const [step, n] of [...ran].sort()) console.log(`  ${step.padEnd(18)} ${n}`)
  console.log(`dead letters (${dead.length}):`)
  for (const line of dead.sort()) console.log(`  ${line.slice(0, 150)}`)
})

program.pipe(
  Effect.provide(Layer.orDie(KafkaBroker.layer())),
  Effect.timeout("5 minutes"),
  Runner.runMain
)
