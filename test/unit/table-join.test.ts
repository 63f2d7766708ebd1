/**
 * Table-table joins, aggregations' tables as join inputs and the automatic
 * repartition before a join, in process (TestDriver): the three kinds on a
 * hand-written sequence (each output checked), both tables kept in one state
 * per key, a joiner that throws (OperatorFailed to the dead letter topic), a
 * stream joined with a count, a re-keyed stream repartitioned by the join
 * with its repartition topic co-partitioned with the table, and the startup
 * checks. The differential tests against Kafka Streams are
 * test/streams/table-join-driver.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Option, Schema } from "effect"
import * as CoPartitioning from "../../src/internal/streams/coPartitioning.ts"
import { ErrorRule, KGroupedStream, KStream, KTable, Topic, Topology, Transformer } from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"

const Customers = Topic.make({ name: "customers", key: Schema.String, value: Schema.String })
const Addresses = Topic.make({ name: "addresses", key: Schema.String, value: Schema.String })
const Orders = Topic.make({ name: "orders", key: Schema.String, value: Schema.String })
const Output = Topic.make({ name: "output", key: Schema.String, value: Schema.String })

const compiled = (topology: Topology.Topology<never, never>, rules: Topology.RunOptions<never>["rules"] = []) => {
  const result = Topology.compile(topology, "joins", { rules })
  if (Either.isLeft(result)) throw new Error(result.left.message)
  return result.right
}

const driverOf = (topology: Topology.Topology<never, never>, rules: Topology.RunOptions<never>["rules"] = []) =>
  Effect.gen(function*() {
    const { subTopologies } = compiled(topology, rules)
    assert.strictEqual(subTopologies.length, 1)
    // The compiled transformer is Transformer.Any: its inputs, state and errors erased by compile.
    return yield* TestDriver.make(
      subTopologies[0]!.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>,
      { deadLetterTopic: "dead-letters" }
    )
  })

const text = (b: Buffer | null) => b === null ? null : b.toString("utf8")
const raw = (key: string | null, value: string | null, timestamp: number) => ({
  key: key === null ? null : Buffer.from(key),
  value: value === null ? null : Buffer.from(value),
  timestamp
})
const joiner = (c: string | null, a: string | null) => `${c ?? "null"}+${a ?? "null"}`

const tableJoin = (kind: "inner" | "left" | "outer") => {
  const customers = KTable.from(Customers, { name: "customers" })
  const addresses = KTable.from(Addresses, { name: "addresses" })
  const joined = kind === "inner"
    ? KTable.join(customers, addresses, joiner, { name: "profile" })
    : kind === "left"
    ? KTable.leftJoin(customers, addresses, joiner, { name: "profile" })
    : KTable.outerJoin(customers, addresses, joiner, { name: "profile" })
  return Topology.make("profiles", [joined.pipe(KTable.toStream, KStream.to(Output))])
}

/** customers c1 (t1), address c1 (t5), address c2 (t3), customer c1 again (t2, out of order), delete customer c1, delete address c2, delete customer c3 (never there). */
const sequence = [
  ["customers", raw("c1", "n1", 1)],
  ["addresses", raw("c1", "a1", 5)],
  ["addresses", raw("c2", "a2", 3)],
  ["customers", raw("c1", "n1b", 2)],
  ["customers", raw("c1", null, 6)],
  ["addresses", raw("c2", null, 7)],
  ["customers", raw("c3", null, 8)]
] as const

const run = (kind: "inner" | "left" | "outer") =>
  Effect.gen(function*() {
    const driver = yield* driverOf(tableJoin(kind))
    for (const [topic, record] of sequence) yield* driver.pipeRaw(topic, record)
    return (yield* driver.records("output")).map((r) => [text(r.key), text(r.value), r.timestamp])
  })

describe("table-table joins", () => {
  it.scoped("inner: emits while both sides have a value, a tombstone when one side deletes; timestamps the larger of both", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* run("inner"), [["c1", "n1+a1", 5], ["c1", "n1b+a1", 5], ["c1", null, 6]])
    }))

  it.scoped("left: every update of the left table, the right's while the left has a value; deleting what neither had emits nothing", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* run("left"), [["c1", "n1+null", 1], ["c1", "n1+a1", 5], ["c1", "n1b+a1", 5], ["c1", null, 6]])
    }))

  it.scoped("outer: updates of either table, a deletion the other side joined with null, a tombstone once both are gone", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* run("outer"), [
        ["c1", "n1+null", 1],
        ["c1", "n1+a1", 5],
        ["c2", "null+a2", 3],
        ["c1", "n1b+a1", 5],
        ["c1", "null+a1", 6],
        ["c2", null, 7]
      ])
    }))

  it.scoped("both tables are kept in one state per key, one entry per table; a key gone from both has no state", () =>
    Effect.gen(function*() {
      const driver = yield* driverOf(tableJoin("outer"))
      yield* driver.pipeRaw("customers", raw("c1", "n1", 1))
      yield* driver.pipeRaw("addresses", raw("c1", "a1", 2))
      assert.deepStrictEqual(
        yield* driver.state("c1"),
        Option.some({ customers: { value: "n1", timestamp: 1 }, addresses: { value: "a1", timestamp: 2 } })
      )
      yield* driver.pipeRaw("customers", raw("c1", null, 3))
      assert.deepStrictEqual(yield* driver.state("c1"), Option.some({ addresses: { value: "a1", timestamp: 2 } }))
      yield* driver.pipeRaw("addresses", raw("c1", null, 4))
      assert.ok(Option.isNone(yield* driver.state("c1")))
    }))

  it.scoped("a joiner that throws fails the table update with OperatorFailed, for the rules (dead letter topic); the next update joins", () =>
    Effect.gen(function*() {
      const topology = Topology.make("profiles", [
        KTable.join(KTable.from(Customers), KTable.from(Addresses), (c, a) => {
          if (a === "bad") throw new Error("bad address")
          return `${c}+${a}`
        }, { name: "profile" }).pipe(KTable.toStream, KStream.to(Output))
      ])
      const driver = yield* driverOf(topology, [ErrorRule.tagged("OperatorFailed", { then: "dlq" })])
      yield* driver.pipeRaw("customers", raw("c1", "n1", 1))
      yield* driver.pipeRaw("addresses", raw("c1", "bad", 2))
      yield* driver.pipeRaw("addresses", raw("c1", "a1", 3))
      const letters = yield* driver.deadLetters
      assert.strictEqual(letters.length, 1)
      assert.include(letters[0]!.headers.find(([name]) => name === "skein.error")?.[1].toString("utf8") ?? "", "bad address")
      assert.deepStrictEqual((yield* driver.records("output")).map((r) => text(r.value)), ["n1+a1"])
    }))
})

describe("aggregations' tables as join inputs", () => {
  it.scoped("a stream joined with a count of another stream, in one sub-topology keeping the count", () =>
    Effect.gen(function*() {
      const counts = KStream.from(Orders).pipe(KStream.groupByKey(), KGroupedStream.count({ name: "order-counts" }))
      const driver = yield* driverOf(Topology.make("enrich", [
        KStream.from(Customers).pipe(KStream.leftJoin(counts, (name, n) => `${name}:${n ?? 0}`), KStream.to(Output))
      ]))
      yield* driver.pipeRaw("customers", raw("c1", "n1", 1))
      yield* driver.pipeRaw("orders", raw("c1", "o1", 2))
      yield* driver.pipeRaw("orders", raw("c1", "o2", 3))
      yield* driver.pipeRaw("customers", raw("c1", "n1", 4))
      assert.deepStrictEqual((yield* driver.records("output")).map((r) => [text(r.value), r.timestamp]), [["n1:0", 1], ["n1:2", 4]])
      // One store: the form an aggregation's state always had.
      assert.deepStrictEqual(yield* driver.state("c1"), Option.some({ value: 2, timestamp: 3 }))
    }))

  it.scoped("a table joined with a reduce: the aggregate's updates join as a table's", () =>
    Effect.gen(function*() {
      const latest = KStream.from(Orders).pipe(
        KStream.groupByKey(),
        KGroupedStream.reduce((a: string, b: string) => `${a},${b}`, { state: Schema.String, name: "orders-of" })
      )
      const driver = yield* driverOf(Topology.make("profiles", [
        KTable.leftJoin(KTable.from(Customers), latest, joiner).pipe(KTable.toStream, KStream.to(Output))
      ]))
      yield* driver.pipeRaw("orders", raw("c1", "o1", 1))
      yield* driver.pipeRaw("customers", raw("c1", "n1", 2))
      yield* driver.pipeRaw("orders", raw("c1", "o2", 3))
      assert.deepStrictEqual((yield* driver.records("output")).map((r) => [text(r.value), r.timestamp]), [["n1+o1", 2], ["n1+o1,o2", 3]])
    }))
})

describe("re-keying before a join", () => {
  it("a re-keyed stream joined with codecs is repartitioned first, its topic as many partitions as the table's", () => {
    const topology = Topology.make("rekeyed", [
      KStream.from(Orders).pipe(
        KStream.selectKey((order) => order.value),
        KStream.join(KTable.from(Customers), (order, customer) => `${order}@${customer}`, {
          key: Schema.String,
          value: Schema.String,
          name: "by-customer"
        }),
        KStream.to(Output)
      )
    ])
    const { subTopologies, internalTopics } = compiled(topology)
    assert.deepStrictEqual(subTopologies.map((s) => s.inputs), [["orders"], ["customers", "joins-by-customer-left-repartition"]])
    assert.deepStrictEqual(internalTopics, [{ name: "joins-by-customer-left-repartition", partitions: undefined, upstreamInputs: ["customers"] }])
  })

  it.scoped("the re-keyed records join their new key's table value", () =>
    Effect.gen(function*() {
      const topology = Topology.make("rekeyed", [
        KStream.from(Orders).pipe(
          KStream.selectKey((order) => order.value.split("@")[1] ?? null),
          KStream.leftJoin(KTable.from(Customers), (order, customer) => `${order}:${customer ?? "none"}`, {
            key: Schema.String,
            value: Schema.String,
            name: "by-customer"
          }),
          KStream.to(Output)
        )
      ])
      const { subTopologies } = compiled(topology)
      // The compiled transformers are Transformer.Any: their inputs, state and errors erased by compile.
      const [upstream, joining] = yield* Effect.forEach(subTopologies, (sub) =>
        TestDriver.make(sub.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>))
      yield* joining!.pipeRaw("customers", raw("c7", "seven", 1))
      yield* upstream!.pipeRaw("orders", raw("o1", "x@c7", 2))
      yield* upstream!.pipeRaw("orders", raw("o2", "y@c8", 3))
      const repartitioned = yield* upstream!.records("joins-by-customer-left-repartition")
      assert.deepStrictEqual(repartitioned.map((r) => text(r.key)), ["c7", "c8"])
      for (const r of repartitioned) {
        yield* joining!.pipeRaw("joins-by-customer-left-repartition", { key: r.key, value: r.value, timestamp: r.timestamp ?? 0 })
      }
      assert.deepStrictEqual((yield* joining!.records("output")).map((r) => [text(r.key), text(r.value)]), [["c7", "x@c7:seven"], [
        "c8",
        "y@c8:none"
      ]])
    }))
})

describe("startup checks", () => {
  it("a re-keyed stream joined without codecs, a table joined with itself, and a join's result joined again fail with the fix", () => {
    const error = (topology: Topology.Topology<never, never>) => {
      const result = Topology.compile(topology, "joins")
      assert.ok(Either.isLeft(result))
      return Either.isLeft(result) ? result.left.message : ""
    }
    assert.include(
      error(Topology.make("rekeyed", [
        KStream.from(Orders).pipe(
          KStream.selectKey((order) => order.value),
          KStream.join(KTable.from(Customers), (o, c) => `${o}${c}`),
          KStream.to(Output)
        )
      ])),
      "KStream.join(table, joiner, { key: ..., value: ... })"
    )
    const customers = KTable.from(Customers)
    assert.include(
      error(Topology.make("self", [KTable.join(customers, customers, (a, b) => `${a}${b}`).pipe(KTable.toStream, KStream.to(Output))])),
      "joins a table with itself"
    )
    const profiles = KTable.join(KTable.from(Customers), KTable.from(Addresses), (c, a) => `${c}${a}`)
    assert.include(
      error(Topology.make("again", [KStream.from(Orders).pipe(KStream.join(profiles, (o, p) => `${o}${p}`), KStream.to(Output))])),
      "cannot be joined yet"
    )
  })

  it("co-partitioning: a table-table join's topics with different partition counts fail naming both tables", () => {
    const { joins } = compiled(tableJoin("inner"))
    assert.deepStrictEqual(joins, [{
      name: "profile",
      streamTopics: ["customers"],
      tableTopics: ["addresses"],
      labels: ["left table", "right table"]
    }])
    const mismatch = CoPartitioning.check(joins, new Map([["customers", 3], ["addresses", 2]]))
    assert.ok(Either.isLeft(mismatch))
    if (Either.isRight(mismatch)) return
    assert.include(mismatch.left.message, "the left table customers (3 partitions) and the right table addresses (2 partitions)")
    assert.include(mismatch.left.message, "same partition count (2)")
  })
})
