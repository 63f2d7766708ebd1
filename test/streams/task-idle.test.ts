/**
 * Timestamp-ordered consumption across a task's inputs (issue 32, item 5;
 * Kafka Streams' `max.task.idle.ms`), on a broker. A stream-table left join
 * whose table topic holds some 3 MB of updates, the last of them (time t1)
 * the update of the customer an order (time t2 > t1) names: kafkajs fetches
 * at most 1 MB of a partition at a time, so the table input lags the order's
 * input, which is fetched whole in the first fetch. The order must be joined
 * with that update, as Kafka Streams joins it (it takes records by smallest
 * timestamp and waits for an input whose records are on the broker). Then,
 * the table caught up and quiet, new orders are joined at once (the task
 * goes on without an input that has nothing to fetch: never held).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, Schema } from "effect"
import { KStream, KTable, SkeinConfig, Topic, Topology } from "../../src/index.ts"
import { brokers, createTopics, eventually, produceRaw, readCommitted, unique } from "../helpers/kafka.ts"

describe("streams: timestamp order across a task's inputs", () => {
  it.scopedLive("a lagging table input: the order is joined with the table update written before it in event time", () =>
    Effect.gen(function*() {
      const applicationId = unique("task-idle-app")
      const customers = unique("customers")
      const orders = unique("orders")
      const output = unique("enriched")
      yield* createTopics([{ name: customers, partitions: 1 }, { name: orders, partitions: 1 }, { name: output, partitions: 1 }])
      const Customers = Topic.make({ name: customers, key: Schema.String, value: Schema.String })
      const Orders = Topic.make({ name: orders, key: Schema.String, value: Schema.String })
      const Output = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const topology = Topology.make("enrich", [
        KStream.from(Orders).pipe(
          KStream.leftJoin(KTable.from(Customers, { name: "customers" }), (order, customer) => `${order}+${customer ?? "null"}`, {
            name: "enrich"
          }),
          KStream.to(Output)
        )
      ])
      // Event times a minute ago (the topics' retention keeps them): c1's first value, 3,000 other customers
      // of 1 KB each, then c1's update at t1; the order at t2 = t1 + 1 s.
      const base = Date.now() - 60_000
      const filler = "x".repeat(1_000)
      yield* produceRaw(customers, [
        { key: "c1", value: "v1", timestamp: String(base) },
        ...Array.from({ length: 3_000 }, (_, i) => ({ key: `f${i}`, value: filler, timestamp: String(base + 1 + Math.floor(i / 3)) }))
      ], 200)
      const t1 = base + 2_000
      yield* produceRaw(customers, [{ key: "c1", value: "v2", timestamp: String(t1) }])
      yield* produceRaw(orders, [{ key: "c1", value: "o1", timestamp: String(t1 + 1_000) }])

      const fiber = yield* Effect.forkScoped(
        Topology.run(topology).pipe(Effect.provide(SkeinConfig.layer({ applicationId, brokers: brokers() })))
      )
      const joined = Effect.map(readCommitted(output), (records) => records.map((r) => `${r.key}=${r.value}`))
      yield* eventually(Effect.map(joined, (records) => records.length >= 1), { timeout: 60_000, what: "the order joined" })
      assert.deepStrictEqual(yield* joined, ["c1=o1+v2"], "the order sees the table update written before it (t1 < t2)")

      // The table caught up and quiet: the next orders are joined without waiting for it (one with no customer).
      yield* produceRaw(orders, [
        { key: "c1", value: "o2", timestamp: String(t1 + 2_000) },
        { key: "c9", value: "o3", timestamp: String(t1 + 3_000) }
      ])
      yield* eventually(Effect.map(joined, (records) => records.length >= 3), { timeout: 30_000, what: "two more orders joined" })
      assert.deepStrictEqual(yield* joined, ["c1=o1+v2", "c1=o2+v2", "c9=o3+null"])
      assert.ok(Option.isNone(yield* Fiber.poll(fiber)), "the topology is still running")
    }), 120_000)
})
