/**
 * Headers, timestamps and binary data, end to end: starts a Kafka broker (or
 * uses KAFKA_BROKERS), produces Protobuf-encoded orders with binary and
 * repeated `trace` headers, and turns each into a Protobuf receipt that:
 *
 * - keeps every input header byte for byte and appends its own `trace` hop
 *   (a repeated header name, values in order);
 * - goes to the partition of the order's region (`partition`);
 * - carries the order's timestamp (the default: the input record's).
 *
 * An order for a region the receipts topic has no partition for fails with
 * `PartitionOutOfRange`, which a rule sends to the dead letter topic.
 *
 * The codecs are protobufjs (https://github.com/protobufjs/protobuf.js)
 * message types behind `Topic.binary`; any byte encoding (Avro with avsc,
 * MessagePack, a hand-written format) plugs in the same way.
 *
 *   npm run example:metadata
 */
import { Effect, Fiber, Layer, ParseResult, Schema } from "effect"
import kafkajs from "kafkajs"
import protobuf from "protobufjs"
import { ErrorRule, Runner, SkeinConfig, Topic, Transformer } from "../src/index.ts"
import { KafkaBroker } from "../src/testing/index.ts"

const run = `${Date.now()}`

/**
 * A binary codec from a Protobuf message type and the Schema of its plain
 * object form: bytes that do not parse, or an object the Schema rejects, are
 * a poison record; a value that does not verify is an `EncodeError`.
 */
const protobufCodec = <A, I extends { readonly [field: string]: unknown }>(
  type: protobuf.Type,
  schema: Schema.Schema<A, I>
): Topic.BinaryCodec<A> =>
  Topic.binary(Schema.transformOrFail(Schema.Uint8ArrayFromSelf, schema, {
    strict: false,
    decode: (bytes, _, ast) => {
      try {
        return ParseResult.succeed(type.toObject(type.decode(bytes), { defaults: true }))
      } catch (error) {
        return ParseResult.fail(new ParseResult.Type(ast, bytes, `not a ${type.name} message: ${String(error)}`))
      }
    },
    encode: (value, _, ast) => {
      const problem = type.verify(value)
      return problem === null
        ? ParseResult.succeed(type.encode(type.fromObject(value)).finish())
        : ParseResult.fail(new ParseResult.Type(ast, value, `not a ${type.name} message: ${problem}`))
    }
  }))

// message Order { string id = 1; uint32 cents = 2; uint32 region = 3; }
const OrderMessage = new protobuf.Type("Order")
  .add(new protobuf.Field("id", 1, "string"))
  .add(new protobuf.Field("cents", 2, "uint32"))
  .add(new protobuf.Field("region", 3, "uint32"))
// message Receipt { string order = 1; uint32 cents = 2; }
const ReceiptMessage = new protobuf.Type("Receipt")
  .add(new protobuf.Field("order", 1, "string"))
  .add(new protobuf.Field("cents", 2, "uint32"))

const Order = Schema.Struct({ id: Schema.String, cents: Schema.Number, region: Schema.Number })
const Receipt = Schema.Struct({ order: Schema.String, cents: Schema.Number })

const Orders = Topic.make({ name: `orders-${run}`, key: Schema.String, value: protobufCodec(OrderMessage, Order) })
const Receipts = Topic.make({ name: `receipts-${run}`, key: Topic.bytes, value: protobufCodec(ReceiptMessage, Receipt) })
const deadLetters = `orders-dead-letters-${run}`
const regions = 3 // the receipts topic's partitions: one per region

/** One receipt per order, in its region's partition, with the order's headers and one more trace hop. */
export const Receipting = Transformer.stateless({
  name: "receipting",
  inputs: [Orders],
  rules: [ErrorRule.tagged("PartitionOutOfRange", { then: "dlq" })],
  transform: (order) =>
    Effect.succeed({
      emit: [
        Topic.record(
          Receipts,
          Buffer.from(order.value.id),
          { order: order.value.id, cents: order.value.cents },
          [...order.rawHeaders, ["trace", Buffer.from([0xbe, 0xef])]],
          { partition: order.value.region } // timestamp: the order's
        )
      ]
    })
})

const orders = [
  { id: "o1", cents: 1250, region: 0 },
  { id: "o2", cents: 99, region: 2 },
  { id: "o3", cents: 4000, region: 1 },
  { id: "o4", cents: 10, region: 9 } // no partition 9: dead-lettered
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
      topics: [
        { topic: Orders.name, numPartitions: 1 },
        { topic: Receipts.name, numPartitions: regions },
        { topic: deadLetters, numPartitions: 1 }
      ]
    })
  )
  const placed = Date.now() - 60_000
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  yield* Effect.promise(() => producer.connect())
  yield* Effect.promise(() =>
    producer.send({
      topic: Orders.name,
      acks: -1,
      messages: orders.map((order, i) => ({
        key: order.id,
        value: Buffer.from(OrderMessage.encode(OrderMessage.fromObject(order)).finish()),
        timestamp: String(placed + i),
        // a repeated header with binary values, and a text one
        headers: { trace: [Buffer.from([0x00, 0x01]), Buffer.from([0xff, 0xfe])], source: "web" }
      }))
    })
  )
  yield* Effect.promise(() => producer.disconnect())

  const runner = yield* Effect.fork(
    Runner.run(Receipting).pipe(
      Effect.provide(SkeinConfig.layer({
        applicationId: `receipting-${run}`,
        brokers,
        stateDir: ".skein/example-state",
        deadLetterTopic: deadLetters
      }))
    )
  )

  // Read receipts and dead letters back, read_committed, until every order is accounted for.
  const lines: Array<string> = []
  const dead: Array<string> = []
  const consumer = kafka.consumer({ groupId: `reader-${run}`, readUncommitted: false })
  yield* Effect.promise(() => consumer.connect())
  yield* Effect.promise(() => consumer.subscribe({ topics: [Receipts.name, deadLetters], fromBeginning: true }))
  yield* Effect.promise(() =>
    consumer.run({
      eachMessage: async ({ message, partition, topic }) => {
        if (topic === deadLetters) {
          dead.push(`${message.key?.toString()}: ${message.headers?.["skein.error"]?.toString().split(" (from ")[0]}`)
          return
        }
        const receipt = ReceiptMessage.toObject(ReceiptMessage.decode(message.value ?? Buffer.alloc(0)))
        const trace = [message.headers?.["trace"] ?? []].flat().map((v) => Buffer.from(v ?? "").toString("hex"))
        const order = orders.findIndex((o) => o.id === receipt["order"])
        lines.push(
          `${receipt["order"]} ${receipt["cents"]} partition=${partition} ` +
            `timestamp=${Number(message.timestamp) === placed + order ? "order's" : message.timestamp} ` +
            `trace=${trace.join(",")} source=${message.headers?.["source"]?.toString()}`
        )
      }
    })
  )
  while (lines.length + dead.length < orders.length) {
    yield* Effect.sleep("200 millis")
  }
  yield* Effect.promise(() => consumer.disconnect())
  yield* Fiber.interrupt(runner)
  yield* Effect.promise(() => admin.disconnect())

  console.log("receipts (read_committed):")
  for (const line of lines.sort()) console.log(`  ${line}`)
  console.log(`dead letters (${dead.length}):`)
  for (const line of dead) console.log(`  ${line}`)
})

program.pipe(
  Effect.provide(Layer.orDie(KafkaBroker.layer())),
  Effect.timeout("5 minutes"),
  Runner.runMain
)
