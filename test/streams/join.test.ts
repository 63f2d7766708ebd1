/**
 * A stream-table join on a real broker (Topology.run): the table is loaded
 * from its topic (tombstone and update included) into the task's state, its
 * changelog written in the task's transactions, then each order is joined
 * with its customer's value exactly once, read committed. A join whose
 * inputs have different partition counts fails at startup, naming both
 * topics and the fix, before it reads anything. The differential test against
 * Kafka Streams is join-driver.test.ts (in process).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Fiber, Option, Schema } from "effect"
import { applicationIdOf } from "../../src/internal/runAll.ts"
import { KStream, KTable, SkeinConfig, Topic, Topology, Transformer } from "../../src/index.ts"
import { brokers, caughtUp, createTopics, eventually, produceRaw, readCommitted, unique } from "../helpers/kafka.ts"

const joinOf = (customers: string, orders: string, output: string) => {
  const Customers = Topic.make({ name: customers, key: Schema.String, value: Schema.String })
  const Orders = Topic.make({ name: orders, key: Schema.String, value: Schema.String })
  const Output = Topic.make({ name: output, key: Schema.String, value: Schema.String })
  return Topology.make("enrich", [
    KStream.from(Orders).pipe(
      KStream.leftJoin(KTable.from(Customers, { name: "customers" }), (order, customer) => `${order}+${customer ?? "null"}`, {
        name: "enrich"
      }),
      KStream.to(Output)
    )
  ])
}

describe("streams: a stream-table join on a broker", () => {
  it.scopedLive("orders joined with their customer's latest value, exactly once; a tombstone deletes", () =>
    Effect.gen(function*() {
      const applicationId = unique("join-app")
      const customers = unique("customers")
      const orders = unique("orders")
      const output = unique("enriched")
      yield* createTopics([{ name: customers, partitions: 2 }, { name: orders, partitions: 2 }, { name: output, partitions: 2 }])
      const topology = joinOf(customers, orders, output)
      const compiled = Topology.compile(topology, applicationId)
      assert.ok(Either.isRight(compiled))
      if (Either.isLeft(compiled)) return
      const sub = compiled.right.subTopologies[0]!
      const changelog = Transformer.changelogTopic(applicationIdOf(applicationId, sub), sub)

      yield* produceRaw(customers, [
        ...Array.from({ length: 10 }, (_, i) => ({ key: `c${i}`, value: `r${i}` })),
        { key: "c3", value: null },
        { key: "c4", value: "r4b" }
      ])
      const fiber = yield* Effect.forkScoped(
        Topology.run(topology).pipe(Effect.provide(SkeinConfig.layer({ applicationId, brokers: brokers() })))
      )
      // The table is loaded (its topic consumed and committed, with its changelog) before any order is produced.
      yield* caughtUp(applicationIdOf(applicationId, sub), customers)
      yield* produceRaw(orders, Array.from({ length: 12 }, (_, i) => ({ key: `c${i}`, value: `o${i}` })))
      yield* eventually(Effect.map(readCommitted(output), (records) => records.length >= 12), { timeout: 60_000, what: "12 joined orders" })
      assert.ok(Option.isNone(yield* Fiber.poll(fiber)), "the topology is still running")

      const joined = (yield* readCommitted(output)).map((r) => `${r.key}=${r.value}`).sort()
      const expected = Array.from({ length: 12 }, (_, i) =>
        `c${i}=o${i}+${i === 3 || i >= 10 ? "null" : i === 4 ? "r4b" : `r${i}`}`).sort()
      assert.deepStrictEqual(joined, expected)
      // The table's changelog, read committed: each key's latest state (a batch writes a key's last change only).
      const latest = new Map((yield* readCommitted(changelog)).map((r) => [r.key, r.value]))
      assert.strictEqual(latest.get("c3") ?? null, null, "the tombstone deleted c3 from the table's changelog too")
      assert.include(latest.get("c4") ?? "", "r4b")
      assert.strictEqual([...latest.values()].filter((v) => v !== null).length, 9)
    }), 120_000)

  it.scopedLive("a join of inputs with different partition counts fails at startup, naming both topics and the fix", () =>
    Effect.gen(function*() {
      const customers = unique("customers")
      const orders = unique("orders")
      const output = unique("enriched")
      yield* createTopics([{ name: customers, partitions: 3 }, { name: orders, partitions: 2 }, { name: output, partitions: 1 }])
      const error = yield* Topology.run(joinOf(customers, orders, output)).pipe(
        Effect.provide(SkeinConfig.layer({ applicationId: unique("join-mismatch"), brokers: brokers() })),
        Effect.flip
      )
      assert.strictEqual(error._tag, "ConfigurationError")
      assert.include(error.message, `${orders} (2 partitions)`)
      assert.include(error.message, `${customers} (3 partitions)`)
      assert.include(error.message, "KStream.repartition")
    }), 60_000)
})
