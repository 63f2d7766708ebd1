/**
 * Foreign-key table-table joins in process (TestDriver, one driver per
 * sub-topology, the internal topics piped by hand): what the differential
 * test against Kafka Streams cannot show, as its driver answers every
 * subscription before the next record. A response that comes back after the
 * left value changed is dropped (its hash is another value's), and the
 * newer one joins; the response goes to the partition of the left record it
 * answers; a throwing foreign-key extractor fails the record (the dead letter
 * topic); `describe`; the startup checks (a table joined with itself, a side
 * that is not a table of a topic). The differential tests are
 * test/streams/table-join-driver.test.ts (fk-*).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { ErrorRule, KGroupedStream, KStream, KTable, Topic, Topology, Transformer } from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"

const Orders = Topic.make({ name: "orders", key: Schema.String, value: Schema.String })
const Customers = Topic.make({ name: "customers", key: Schema.String, value: Schema.String })
const Output = Topic.make({ name: "output", key: Schema.String, value: Schema.String })

/** An order "c{n}:{item}" names its customer c{n} ("none:..." names none). */
const customerOf = (order: string): string | null => {
  const [customer] = order.split(":")
  if (customer === "boom") throw new Error("no customer in a boom order")
  return customer === undefined || customer === "none" ? null : customer
}

const topologyOf = (kind: "inner" | "left") =>
  Topology.make("order-customers", [
    (kind === "inner"
      ? KTable.foreignKeyJoin(KTable.from(Orders, { name: "orders" }), KTable.from(Customers, { name: "customers" }), customerOf, (o, c) =>
        `${o}+${c}`, { name: "fk" })
      : KTable.foreignKeyLeftJoin(KTable.from(Orders, { name: "orders" }), KTable.from(Customers, { name: "customers" }), customerOf, (o, c) =>
        `${o}+${c ?? "null"}`, { name: "fk" })).pipe(KTable.toStream, KStream.to(Output))
  ])

const subscriptions = "joins-fk-subscription-registration-topic"
const responses = "joins-fk-subscription-response-topic"

const text = (b: Buffer | null) => b === null ? null : b.toString("utf8")
const raw = (key: string | null, value: string | null, timestamp: number, partition = 0) => ({
  key: key === null ? null : Buffer.from(key),
  value: value === null ? null : Buffer.from(value),
  timestamp,
  partition
})

/** The left (orders) and right (customers) sub-topologies' drivers, and a pipe of an internal topic's records from one to the other. */
const driversOf = (kind: "inner" | "left") =>
  Effect.gen(function*() {
    const compiled = Topology.compile(topologyOf(kind), "joins", { rules: [ErrorRule.tagged("OperatorFailed", { then: "dlq" })] })
    if (Either.isLeft(compiled)) return yield* Effect.die(compiled.left)
    const [left, right] = compiled.right.subTopologies
    assert.deepStrictEqual(left?.inputs, ["orders", responses])
    assert.deepStrictEqual(right?.inputs, ["customers", subscriptions])
    // The compiled transformers are Transformer.Any: their inputs, state and errors erased by compile.
    const make = (sub: typeof left) =>
      TestDriver.make(sub!.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>, {
        deadLetterTopic: "dead-letters"
      })
    const orders = yield* make(left)
    const customers = yield* make(right)
    const seen = new Map<string, number>()
    /** The records `from` wrote to `topic` since the last call, each piped into `to` (one batch each), in order. */
    const forward = (from: typeof orders, topic: string, to: typeof orders, only?: (index: number) => boolean) =>
      Effect.gen(function*() {
        const written = yield* from.records(topic)
        const done = seen.get(topic) ?? 0
        seen.set(topic, written.length)
        const fresh = written.slice(done)
        for (const [i, record] of fresh.entries()) {
          if (only !== undefined && !only(i)) continue
          yield* to.pipeRaw(topic, { key: record.key, value: record.value, timestamp: record.timestamp ?? 0, partition: record.partition ?? 0 })
        }
        return fresh
      })
    const results = Effect.map(orders.records("output"), (records) => records.map((r) => `${text(r.key)}=${text(r.value) ?? "tombstone"}`))
    return { orders, customers, forward, results }
  })

describe("streams: foreign-key joins in process", () => {
  it.scoped("a response to a value the left table no longer has is dropped; the newer one joins", () =>
    Effect.gen(function*() {
      const { customers, forward, orders, results } = yield* driversOf("inner")
      yield* customers.pipeRaw("customers", raw("c1", "Ada", 1))
      yield* orders.pipeRaw("orders", raw("o1", "c1:book", 2))
      const first = yield* forward(orders, subscriptions, customers)
      assert.strictEqual(first.length, 1)
      // The order changes (same customer) while its first answer is on its way.
      yield* orders.pipeRaw("orders", raw("o1", "c1:pen", 3))
      const stale = yield* forward(customers, responses, orders)
      assert.strictEqual(stale.length, 1)
      assert.deepStrictEqual(yield* results, [], "the answer to c1:book is not joined with c1:pen")
      yield* forward(orders, subscriptions, customers)
      yield* forward(customers, responses, orders)
      assert.deepStrictEqual(yield* results, ["o1=c1:pen+Ada"])
    }))

  it.scoped("a response goes to the partition of the left record; a left join answers a value without a foreign key with null", () =>
    Effect.gen(function*() {
      const { customers, forward, orders, results } = yield* driversOf("left")
      yield* orders.pipeRaw("orders", raw("o7", "c2:ink", 5, 1))
      yield* orders.pipeRaw("orders", raw("o8", "none:cup", 6, 1))
      const sent = yield* forward(orders, subscriptions, customers)
      assert.deepStrictEqual(sent.map((r) => text(r.key)), ["c2", null])
      const answered = yield* forward(customers, responses, orders)
      assert.deepStrictEqual(answered.map((r) => [text(r.key), r.partition, r.timestamp]), [["o7", 1, 5], ["o8", 1, 6]])
      // Partition 1's task of the orders holds o7 and o8: their answers join there.
      assert.deepStrictEqual(yield* results, ["o7=c2:ink+null", "o8=none:cup+null"])
      // The customer arrives: its subscriber gets the value, at the customer's timestamp.
      yield* customers.pipeRaw("customers", raw("c2", "Bob", 9))
      yield* forward(customers, responses, orders)
      const output = yield* orders.records("output")
      assert.deepStrictEqual(output.map((r) => [text(r.key), text(r.value), r.timestamp]).slice(-1), [["o7", "c2:ink+Bob", 9]])
    }))

  it.scoped("a throwing foreign-key extractor fails its record: OperatorFailed, to the dead letter topic", () =>
    Effect.gen(function*() {
      const { forward, orders } = yield* driversOf("inner")
      yield* orders.pipeRaw("orders", raw("o1", "boom:x", 1))
      assert.strictEqual((yield* forward(orders, subscriptions, orders, () => false)).length, 0)
      const letters = yield* orders.deadLetters
      assert.strictEqual(letters.length, 1)
      const error = text(letters[0]!.headers.find(([name]) => name === "skein.error")?.[1] ?? null) ?? ""
      assert.include(error, "foreign key extractor")
      assert.include(error, "no customer in a boom order")
    }))

  it("describe names the internal topics, their partition counts' source and the subscription store", () => {
    const described = Topology.describe(topologyOf("left"), "shop")
    assert.include(described, "Processor fk (foreign-key leftJoin of orders with customers)")
    assert.include(described, "Processor fk-subscription-store (foreign-key join's subscriptions to customers; state: fk-subscription-store)")
    assert.include(described, "shop-fk-subscription-registration-topic (partitions: as customers)")
    assert.include(described, "shop-fk-subscription-response-topic (partitions: as orders)")
  })

  it("a table joined with itself, and a side that is not a table of a topic, fail at compile with the fix", () => {
    const orders = KTable.from(Orders, { name: "orders" })
    const self = Topology.make("self", [
      KTable.foreignKeyJoin(orders, orders.pipe(KTable.mapValues((o) => o)), customerOf, (a, b) => `${a}+${b}`).pipe(
        KTable.toStream,
        KStream.to(Output)
      )
    ])
    const selfError = Topology.compile(self, "joins")
    assert.ok(Either.isLeft(selfError))
    if (Either.isLeft(selfError)) assert.include(selfError.left.message, "joins a table with itself")
    const counts = KStream.from(Customers).pipe(KStream.groupByKey(), KGroupedStream.count())
    const aggregate = Topology.make("aggregate", [
      KTable.foreignKeyJoin(orders, counts, customerOf, (o, n) => `${o}+${n}`).pipe(KTable.toStream, KStream.to(Output))
    ])
    const aggregateError = Topology.compile(aggregate, "joins")
    assert.ok(Either.isLeft(aggregateError))
    if (Either.isLeft(aggregateError)) assert.include(aggregateError.left.message, "not read from a topic")
  })
})
