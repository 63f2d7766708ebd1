import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, Schema } from "effect"
import { KGroupedStream, KStream, KTable, SkeinConfig, Topic, Topology } from "../../src/index.ts"
import { brokers, createTopics, eventually, kafka, produce, readCommitted, unique } from "../helpers/kafka.ts"

const Order = Schema.Struct({ customer: Schema.String, amount: Schema.Number })

describe("Topology: groupBy + count through a repartition topic", () => {
  it.scopedLive("counts orders per customer across input partitions, each update once, in order", () =>
    Effect.gen(function*() {
      const applicationId = unique("stream-count")
      const input = unique("orders")
      const output = unique("order-counts")
      yield* createTopics([{ name: input, partitions: 3 }, { name: output, partitions: 2 }])
      const Orders = Topic.make({ name: input, key: Schema.String, value: Topic.json(Order) })
      const Counts = Topic.make({ name: output, key: Schema.String, value: Topic.json(Schema.Number) })
      const topology = Topology.make("orders", [
        KStream.from(Orders).pipe(
          KStream.groupBy((order) => order.value.customer, { key: Schema.String, value: Topic.json(Order), name: "by-customer" }),
          KGroupedStream.count({ name: "order-counts" }),
          KTable.toStream,
          KStream.to(Counts)
        )
      ])
      console.log(Topology.describe(topology, applicationId))

      const customers = ["ann", "bob", "cid", "dee", "eve", "fay", "gus"]
      // Keyed by order id: one customer's orders arrive on every input partition.
      const orders = Array.from({ length: 210 }, (_, i) => ({
        key: `order-${i}`,
        value: JSON.stringify({ customer: customers[(i * 5) % customers.length]!, amount: i })
      }))
      yield* produce(input, orders)
      const fiber = yield* Effect.forkScoped(
        Topology.run(topology, { repartitionPurgeInterval: "200 millis" }).pipe(
          Effect.provide(SkeinConfig.layer({ applicationId, brokers: brokers() }))
        )
      )
      yield* eventually(
        Effect.map(readCommitted(output), (records) => records.length >= orders.length),
        { timeout: 90_000, what: `${orders.length} count updates in ${output}` }
      )
      assert.ok(Option.isNone(yield* Fiber.poll(fiber)), "the topology is still running")

      const updates = yield* readCommitted(output)
      assert.strictEqual(updates.length, orders.length, "one update per order, none repeated")
      const perCustomer = new Map<string, Array<number>>()
      for (const update of updates) {
        const list = perCustomer.get(update.key!) ?? []
        list.push(Number(update.value))
        perCustomer.set(update.key!, list)
      }
      for (const customer of customers) {
        const expected = orders.filter((o) => JSON.parse(o.value).customer === customer).length
        assert.deepStrictEqual(
          perCustomer.get(customer),
          Array.from({ length: expected }, (_, i) => i + 1),
          `${customer}'s counts go 1, 2, ... ${expected}, each once`
        )
      }
      // The repartition topic was created with the input's partition count.
      const metadata = yield* Effect.promise(async () => {
        const admin = kafka().admin()
        await admin.connect()
        try {
          return await admin.fetchTopicMetadata({ topics: [`${applicationId}-by-customer-repartition`] })
        } finally {
          await admin.disconnect()
        }
      })
      assert.strictEqual(metadata.topics[0]?.partitions.length, 3)

      // It keeps records without a time limit: their timestamps are event times (a default
      // retention.ms deletes records of old events before they are read) ...
      const repartition = `${applicationId}-by-customer-repartition`
      const withAdmin = <A>(f: (admin: ReturnType<ReturnType<typeof kafka>["admin"]>) => Promise<A>) =>
        Effect.promise(async () => {
          const admin = kafka().admin()
          await admin.connect()
          try {
            return await f(admin)
          } finally {
            await admin.disconnect()
          }
        })
      const configs = yield* withAdmin((admin) =>
        admin.describeConfigs({ includeSynonyms: false, resources: [{ type: 2, name: repartition, configNames: ["retention.ms"] }] })
      )
      assert.strictEqual(configs.resources[0]?.configEntries.find((e) => e.configName === "retention.ms")?.configValue, "-1")
      // ... and deletes what the counting sub-topology has read and committed.
      yield* eventually(
        Effect.map(
          withAdmin((admin) => admin.fetchTopicOffsets(repartition)),
          (offsets) => offsets.every((o) => Number(o.low) === Number(o.high)) && offsets.some((o) => Number(o.high) > 0)
        ),
        { timeout: 60_000, what: `the records read from ${repartition} deleted` }
      )
    }), 180_000)

  it.scopedLive("a repartition topic that exists with another partition count fails at startup with the fix", () =>
    Effect.gen(function*() {
      const applicationId = unique("stream-count-bad")
      const input = unique("orders")
      const repartition = `${applicationId}-by-customer-repartition`
      // Left by an earlier version of the topology, say, with 2 partitions: the topology needs 3 (its input's).
      yield* createTopics([{ name: input, partitions: 3 }, { name: repartition, partitions: 2 }])
      const Orders = Topic.make({ name: input, key: Schema.String, value: Topic.json(Order) })
      const topology = Topology.make("orders", [
        KStream.from(Orders).pipe(
          KStream.groupBy((order) => order.value.customer, { key: Schema.String, value: Topic.json(Order), name: "by-customer" }),
          KGroupedStream.count({ name: "order-counts" }),
          KTable.toStream,
          KStream.to(Topic.make({ name: unique("order-counts"), key: Schema.String, value: Topic.json(Schema.Number) }))
        )
      ])
      const error = yield* Effect.flip(
        Topology.run(topology).pipe(Effect.provide(SkeinConfig.layer({ applicationId, brokers: brokers() })))
      )
      assert.strictEqual(error._tag, "ConfigurationError")
      assert.strictEqual(
        error.message,
        `The repartition topic ${repartition} has 2 partitions; the topology needs 3 (as many as the largest of ${input}). ` +
          `Set the repartition's partitions to 2 (KStream.groupBy / repartition / groupByKey option "partitions"), or, once the ` +
          `application is stopped and the topic fully consumed, delete ${repartition} so it is created again`
      )
    }), 60_000)
})
