/**
 * A stream-table join on a real broker (Topology.run): the table is loaded
 * from its topic (tombstone and update included) into the task's state, its
 * changelog written in the task's transactions, then each order is joined
 * with its customer's value exactly once, read committed. A join whose
 * inputs have different partition counts fails at startup, naming both
 * topics and the fix, before it reads anything. A table-table outer join
 * emits on updates of either table, and a tombstone once a key is gone from
 * both. A foreign-key join of tables with different partition counts joins
 * each order with the customer it names through its subscription and
 * response topics, on updates of either table, and again after a restart on
 * an empty state directory (its subscriptions restored). A stream-global table left
 * join sees the whole table loaded before its first record, then its
 * updates. A stream-stream inner join
 * joins each order with its payment, once.
 * The differential tests against Kafka Streams are join-driver.test.ts,
 * table-join-driver.test.ts and stream-join-driver.test.ts (in process).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Fiber, Option, Schema } from "effect"
import { applicationIdOf } from "../../src/internal/runtime/runAll.ts"
import { GlobalKTable, JoinWindows, KStream, KTable, SkeinConfig, Topic, Topology, Transformer } from "../../src/index.ts"
import { brokers, caughtUp, createTopics, eventually, produceRaw, readCommitted, unique } from "../helpers/kafka.ts"
import { tempDir } from "../helpers/tempDir.ts"

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

  it.scopedLive("a table-table outer join: an update of either table emits the joined value, a deletion the rest or a tombstone, once", () =>
    Effect.gen(function*() {
      const applicationId = unique("table-join-app")
      const customers = unique("customers")
      const addresses = unique("addresses")
      const output = unique("profiles")
      yield* createTopics([{ name: customers, partitions: 2 }, { name: addresses, partitions: 2 }, { name: output, partitions: 2 }])
      const Customers = Topic.make({ name: customers, key: Schema.String, value: Schema.String })
      const Addresses = Topic.make({ name: addresses, key: Schema.String, value: Schema.String })
      const Output = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const topology = Topology.make("profiles", [
        KTable.from(Customers, { name: "customers" }).pipe(
          KTable.outerJoin(KTable.from(Addresses, { name: "addresses" }), (c, a) => `${c ?? "null"}+${a ?? "null"}`, { name: "profile" }),
          KTable.toStream,
          KStream.to(Output)
        )
      ])
      const fiber = yield* Effect.forkScoped(
        Topology.run(topology).pipe(Effect.provide(SkeinConfig.layer({ applicationId, brokers: brokers() })))
      )
      const results = Effect.map(readCommitted(output), (records) => records.map((r) => `${r.key}=${r.value ?? "tombstone"}`))
      // One phase at a time (which table's record a task reads first is not ordered across topics): after
      // each, every result so far, sorted (records of two partitions), equals the expected ones, and no more.
      const expected: Array<string> = []
      const phase = (produced: Effect.Effect<unknown, unknown>, emitted: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          expected.push(...emitted)
          yield* produced
          yield* eventually(Effect.map(results, (all) => all.length >= expected.length), {
            timeout: 60_000,
            what: `${expected.length} joined results`
          })
          assert.deepStrictEqual((yield* results).sort(), [...expected].sort())
        })
      yield* phase(
        produceRaw(customers, Array.from({ length: 5 }, (_, i) => ({ key: `c${i}`, value: `n${i}` }))),
        ["c0=n0+null", "c1=n1+null", "c2=n2+null", "c3=n3+null", "c4=n4+null"]
      )
      yield* phase(
        produceRaw(addresses, Array.from({ length: 5 }, (_, i) => ({ key: `c${i + 2}`, value: `a${i + 2}` }))),
        ["c2=n2+a2", "c3=n3+a3", "c4=n4+a4", "c5=null+a5", "c6=null+a6"]
      )
      yield* phase(produceRaw(customers, [{ key: "c2", value: null }, { key: "c0", value: null }]), ["c0=tombstone", "c2=null+a2"])
      yield* phase(produceRaw(addresses, [{ key: "c5", value: null }, { key: "c4", value: "a4b" }]), ["c4=n4+a4b", "c5=tombstone"])
      assert.ok(Option.isNone(yield* Fiber.poll(fiber)), "the topology is still running")
    }), 120_000)

  it.scopedLive("a foreign-key join across topics with different partition counts: updates of either table, deletions, a changed foreign key", () =>
    Effect.gen(function*() {
      const applicationId = unique("fk-join-app")
      const orders = unique("orders")
      const customers = unique("customers")
      const output = unique("order-customers")
      // Not co-partitioned: the subscriptions get the customers' 3 partitions, the responses the orders' 2.
      yield* createTopics([{ name: orders, partitions: 2 }, { name: customers, partitions: 3 }, { name: output, partitions: 2 }])
      const Orders = Topic.make({ name: orders, key: Schema.String, value: Schema.String })
      const Customers = Topic.make({ name: customers, key: Schema.String, value: Schema.String })
      const Output = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const topology = Topology.make("order-customers", [
        KTable.from(Orders, { name: "orders" }).pipe(
          // An order "c{n}:{item}" names its customer c{n}.
          KTable.foreignKeyJoin(KTable.from(Customers, { name: "customers" }), (order) => order.split(":")[0] ?? null, (o, c) => `${o}+${c}`, {
            name: "order-customer"
          }),
          KTable.toStream,
          KStream.to(Output)
        )
      ])
      const compiled = Topology.compile(topology, applicationId)
      assert.ok(Either.isRight(compiled))
      if (Either.isLeft(compiled)) return
      assert.deepStrictEqual(compiled.right.internalTopics.map((t) => [t.name, t.upstreamInputs]), [
        [`${applicationId}-order-customer-subscription-registration-topic`, [customers]],
        [`${applicationId}-order-customer-subscription-response-topic`, [orders]]
      ])
      const runIn = (stateDir: string) =>
        Effect.forkScoped(Topology.run(topology).pipe(Effect.provide(SkeinConfig.layer({ applicationId, brokers: brokers(), stateDir }))))
      const fiber = yield* runIn(yield* tempDir("skein-fk-"))
      const results = Effect.map(readCommitted(output), (records) => records.map((r) => `${r.key}=${r.value ?? "tombstone"}`))
      const expected: Array<string> = []
      const phase = (produced: Effect.Effect<unknown, unknown>, emitted: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          expected.push(...emitted)
          yield* produced
          yield* eventually(Effect.map(results, (all) => all.length >= expected.length), {
            timeout: 60_000,
            what: `${expected.length} joined results`
          })
          assert.deepStrictEqual((yield* results).sort(), [...expected].sort())
        })
      yield* phase(produceRaw(customers, Array.from({ length: 5 }, (_, i) => ({ key: `c${i}`, value: `name${i}` }))), [])
      // o5 names c5, which has no value yet: an inner join emits nothing for it.
      yield* phase(
        produceRaw(orders, Array.from({ length: 8 }, (_, i) => ({ key: `o${i}`, value: `c${i % 6}:item${i}` }))),
        ["o0=c0:item0+name0", "o1=c1:item1+name1", "o2=c2:item2+name2", "o3=c3:item3+name3", "o4=c4:item4+name4", "o6=c0:item6+name0", "o7=c1:item7+name1"]
      )
      // A customer's update reaches each of its orders.
      yield* phase(produceRaw(customers, [{ key: "c1", value: "name1b" }]), ["o1=c1:item1+name1b", "o7=c1:item7+name1b"])
      // A deleted order, and an order moved to a customer without a value: tombstones.
      yield* phase(produceRaw(orders, [{ key: "o0", value: null }, { key: "o2", value: "c5:item2" }]), ["o0=tombstone", "o2=tombstone"])
      // The new customer answers both orders that name it; a deleted customer deletes its orders' results.
      yield* phase(produceRaw(customers, [{ key: "c5", value: "name5" }, { key: "c3", value: null }]), [
        "o2=c5:item2+name5",
        "o5=c5:item5+name5",
        "o3=tombstone"
      ])
      assert.ok(Option.isNone(yield* Fiber.poll(fiber)), "the topology is still running")
      // Restarted on an empty state directory: the subscriptions are restored from their changelog, so a
      // customer's update still reaches its orders (each result once, read committed).
      yield* Fiber.interrupt(fiber)
      const restarted = yield* runIn(yield* tempDir("skein-fk-"))
      yield* phase(produceRaw(customers, [{ key: "c4", value: "name4b" }]), ["o4=c4:item4+name4b"])
      assert.ok(Option.isNone(yield* Fiber.poll(restarted)), "the restarted topology is still running")
    }), 120_000)

  it.scopedLive("a stream-global table left join: the whole table loaded before the first record, then kept up to date", () =>
    Effect.gen(function*() {
      const applicationId = unique("global-join-app")
      const orders = unique("orders")
      const regions = unique("regions")
      const output = unique("order-regions")
      // Not co-partitioned: the global table has every partition of its topic on every instance.
      yield* createTopics([{ name: orders, partitions: 2 }, { name: regions, partitions: 3 }, { name: output, partitions: 2 }])
      const Orders = Topic.make({ name: orders, key: Schema.String, value: Schema.String })
      const Regions = Topic.make({ name: regions, key: Schema.String, value: Schema.String })
      const Output = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const topology = Topology.make("order-regions", [
        KStream.from(Orders).pipe(
          // An order "r{n}:{item}" names its region r{n}.
          KStream.globalLeftJoin(GlobalKTable.from(Regions, { name: "regions" }), (order) => order.value.split(":")[0] ?? null, (o, r) =>
            `${o}+${r ?? "null"}`),
          KStream.to(Output)
        )
      ])
      // The table and the first orders are there before the run: every order is joined with the loaded table.
      yield* produceRaw(regions, [
        ...Array.from({ length: 6 }, (_, i) => ({ key: `r${i}`, value: `region${i}` })),
        { key: "r5", value: null },
        { key: "r0", value: "region0b" }
      ])
      yield* produceRaw(orders, Array.from({ length: 7 }, (_, i) => ({ key: `o${i}`, value: `r${i}:item${i}` })))
      const fiber = yield* Effect.forkScoped(
        Topology.run(topology).pipe(Effect.provide(SkeinConfig.layer({ applicationId, brokers: brokers() })))
      )
      const results = Effect.map(readCommitted(output), (records) => records.map((r) => `${r.key}=${r.value}`).sort())
      yield* eventually(Effect.map(results, (all) => all.length >= 7), { timeout: 60_000, what: "7 joined orders" })
      assert.deepStrictEqual(yield* results, [
        "o0=r0:item0+region0b",
        "o1=r1:item1+region1",
        "o2=r2:item2+region2",
        "o3=r3:item3+region3",
        "o4=r4:item4+region4",
        "o5=r5:item5+null",
        "o6=r6:item6+null"
      ])
      // An update of the table reaches the orders after it (it is read apart from the orders: wait for it).
      yield* produceRaw(regions, [{ key: "r6", value: "region6" }])
      let n = 0
      yield* eventually(
        Effect.gen(function*() {
          n++
          yield* produceRaw(orders, [{ key: `p${n}`, value: `r6:probe${n}` }])
          yield* eventually(Effect.map(results, (all) => all.some((r) => r.startsWith(`p${n}=`))), { timeout: 60_000, what: `probe ${n}` })
          return (yield* results).includes(`p${n}=r6:probe${n}+region6`)
        }),
        { timeout: 60_000, what: "an order joined with the updated region" }
      )
      assert.ok(Option.isNone(yield* Fiber.poll(fiber)), "the topology is still running")
    }), 120_000)

  it.scopedLive("a stream-stream inner join: each order joined with its payment within the window, exactly once", () =>
    Effect.gen(function*() {
      const applicationId = unique("stream-join-app")
      const orders = unique("orders")
      const payments = unique("payments")
      const output = unique("paid")
      yield* createTopics([{ name: orders, partitions: 2 }, { name: payments, partitions: 2 }, { name: output, partitions: 2 }])
      const Orders = Topic.make({ name: orders, key: Schema.String, value: Schema.String })
      const Payments = Topic.make({ name: payments, key: Schema.String, value: Schema.String })
      const Output = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const topology = Topology.make("paid", [
        KStream.from(Orders).pipe(
          KStream.windowedJoin(KStream.from(Payments), (o, p) => `${o}+${p}`, JoinWindows.ofTimeDifferenceAndGrace("1 minute", "1 minute"), {
            value: Schema.String,
            otherValue: Schema.String,
            name: "paid"
          }),
          KStream.to(Output)
        )
      ])
      const fiber = yield* Effect.forkScoped(
        Topology.run(topology).pipe(Effect.provide(SkeinConfig.layer({ applicationId, brokers: brokers() })))
      )
      const base = Date.now()
      // Orders o0..o10 and payments for o0..o9 (500 ms after their order) and o11: 10 pairs, 2 without a partner.
      yield* produceRaw(orders, Array.from({ length: 11 }, (_, i) => ({ key: `o${i}`, value: `order${i}`, timestamp: String(base + i * 1000) })))
      yield* produceRaw(payments, [...Array.from({ length: 10 }, (_, i) => i), 11].map((i) => ({
        key: `o${i}`,
        value: `pay${i}`,
        timestamp: String(base + i * 1000 + 500)
      })))
      yield* eventually(Effect.map(readCommitted(output), (records) => records.length >= 10), { timeout: 60_000, what: "10 joined orders" })
      assert.ok(Option.isNone(yield* Fiber.poll(fiber)), "the topology is still running")
      const joined = (yield* readCommitted(output)).map((r) => `${r.key}=${r.value}@${r.timestamp - base}`).sort()
      assert.deepStrictEqual(joined, Array.from({ length: 10 }, (_, i) => `o${i}=order${i}+pay${i}@${i * 1000 + 500}`).sort())
    }), 60_000)

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
