/**
 * Tables from a topic and stream-table joins, in process (TestDriver): table
 * semantics of `KTable.filter` and `mapValues` (a filtered-out update deletes
 * and forwards a tombstone), a join reading the table through its operators,
 * records dropped visibly (the metric), a table record that fails to decode
 * going to the dead letter topic, and the startup checks (co-partitioning, a
 * re-keyed stream without codecs, a windowed aggregation's table). The differential test against
 * Kafka Streams is test/streams/join-driver.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Metric, MetricState, Schema } from "effect"
import * as CoPartitioning from "../../src/internal/streams/coPartitioning.ts"
import {
  ErrorRule,
  KGroupedStream,
  KStream,
  KTable,
  TimeWindowedKStream,
  TimeWindows,
  Topic,
  Topology,
  Transformer,
  Windowed
} from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"

const Orders = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Schema.Number) })
const Customers = Topic.make({
  name: "customers",
  key: Schema.String,
  value: Topic.json(Schema.Struct({ region: Schema.String, active: Schema.Boolean }))
})
const Enriched = Topic.make({ name: "enriched", key: Schema.String, value: Schema.String })
const Regions = Topic.make({ name: "active-regions", key: Schema.String, value: Schema.String })
const Windows = Topic.make({ name: "windows", key: Windowed.json(Schema.String), value: Schema.String })
const WindowsOut = Topic.make({ name: "windows-out", key: Windowed.json(Schema.String), value: Schema.String })

const driverOf = (
  topology: Topology.Topology<never, never>,
  options: TestDriver.Options = {},
  rules: Topology.RunOptions<never>["rules"] = []
) =>
  Effect.gen(function*() {
    const compiled = Topology.compile(topology, "joins", { rules })
    if (Either.isLeft(compiled)) return yield* Effect.dieMessage(compiled.left.message)
    assert.strictEqual(compiled.right.subTopologies.length, 1)
    // The compiled transformer is Transformer.Any: its inputs, state and errors erased by compile.
    return yield* TestDriver.make(
      compiled.right.subTopologies[0]!.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>,
      options
    )
  })

const text = (b: Buffer | null) => b === null ? null : b.toString("utf8")
const json = (value: unknown) => Buffer.from(JSON.stringify(value), "utf8")

const activeRegions = () =>
  KTable.from(Customers).pipe(
    KTable.filter((customer) => customer.value.active, { name: "active" }),
    KTable.mapValues((customer) => customer.region, { name: "region" })
  )

describe("KTable.from and stream-table joins", () => {
  it.scoped("filter and mapValues keep table semantics: a filtered-out update and a tombstone forward tombstones", () =>
    Effect.gen(function*() {
      const driver = yield* driverOf(Topology.make("regions", [activeRegions().pipe(KTable.toStream, KStream.to(Regions))]))
      yield* driver.pipeRaw("customers", { key: Buffer.from("c1"), value: json({ region: "eu", active: true }), timestamp: 1 })
      yield* driver.pipeRaw("customers", { key: Buffer.from("c2"), value: json({ region: "us", active: false }), timestamp: 2 })
      yield* driver.pipeRaw("customers", { key: Buffer.from("c1"), value: json({ region: "eu", active: false }), timestamp: 3 })
      yield* driver.pipeRaw("customers", { key: Buffer.from("c3"), value: json({ region: "ap", active: true }), timestamp: 4 })
      yield* driver.pipeRaw("customers", { key: Buffer.from("c3"), value: null, timestamp: 5 })
      const out = (yield* driver.records("active-regions")).map((r) => [text(r.key), text(r.value), r.timestamp])
      assert.deepStrictEqual(out, [["c1", "eu", 1], ["c2", null, 2], ["c1", null, 3], ["c3", "ap", 4], ["c3", null, 5]])
      // The table keeps the source's latest value per key; a tombstone deletes it.
      assert.ok((yield* driver.state("c1"))._tag === "Some")
      assert.ok((yield* driver.state("c3"))._tag === "None")
    }))

  it.scoped("a join reads the table through its operators; a filtered-out or deleted key joins nothing (inner) or null (left)", () =>
    Effect.gen(function*() {
      const regions = activeRegions()
      const orders = KStream.from(Orders)
      const driver = yield* driverOf(Topology.make("enrich", [
        orders.pipe(KStream.join(regions, (amount, region) => `${amount}@${region}`, { name: "inner" }), KStream.to(Enriched)),
        orders.pipe(
          KStream.leftJoin(regions, (amount, region) => `${amount}@${region ?? "none"}`, { name: "left" }),
          KStream.mapValues((value) => `left:${value}`),
          KStream.to(Enriched)
        )
      ]))
      yield* driver.pipeRaw("orders", { key: Buffer.from("c1"), value: json(5), timestamp: 1 })
      yield* driver.pipeRaw("customers", { key: Buffer.from("c1"), value: json({ region: "eu", active: true }), timestamp: 2 })
      yield* driver.pipeRaw("orders", { key: Buffer.from("c1"), value: json(7), timestamp: 3 })
      yield* driver.pipeRaw("customers", { key: Buffer.from("c1"), value: json({ region: "eu", active: false }), timestamp: 4 })
      yield* driver.pipeRaw("orders", { key: Buffer.from("c1"), value: json(9), timestamp: 5 })
      yield* driver.pipeRaw("customers", { key: Buffer.from("c1"), value: json({ region: "us", active: true }), timestamp: 6 })
      yield* driver.pipeRaw("customers", { key: Buffer.from("c1"), value: null, timestamp: 7 })
      yield* driver.pipeRaw("orders", { key: Buffer.from("c1"), value: json(11), timestamp: 8 })
      const out = (yield* driver.records("enriched")).map((r) => [text(r.key), text(r.value), r.timestamp])
      assert.deepStrictEqual(out, [
        ["c1", "left:5@none", 1],
        ["c1", "7@eu", 3],
        ["c1", "left:7@eu", 3],
        ["c1", "left:9@none", 5],
        ["c1", "left:11@none", 8]
      ])
    }))

  it.scoped("a stream record without a key is dropped by an inner join and counted in skein_streams_dropped_records_total", () =>
    Effect.gen(function*() {
      const operator = "enrich-dropping"
      const dropped = () => {
        let total = 0
        for (const pair of Metric.unsafeSnapshot()) {
          if (pair.metricKey.name !== "skein_streams_dropped_records_total" || !MetricState.isCounterState(pair.metricState)) continue
          if (pair.metricKey.tags.some((tag) => tag.key === "operator" && tag.value === operator)) total += Number(pair.metricState.count)
        }
        return total
      }
      const driver = yield* driverOf(Topology.make("enrich", [
        KStream.from(Orders).pipe(KStream.join(KTable.from(Customers), (amount, c) => `${amount}@${c.region}`, { name: operator }), KStream.to(Enriched))
      ]))
      const before = dropped()
      yield* driver.pipeRaw("customers", { key: Buffer.from("c1"), value: json({ region: "eu", active: true }), timestamp: 1 })
      yield* driver.pipeRaw("orders", { key: null, value: json(5), timestamp: 2 })
      yield* driver.pipeRaw("orders", { key: Buffer.from("c1"), value: json(6), timestamp: 3 })
      assert.deepStrictEqual((yield* driver.records("enriched")).map((r) => text(r.value)), ["6@eu"])
      assert.strictEqual(dropped() - before, 1)
    }))

  it.scoped("a table record that fails to decode goes to the dead letter topic; the table keeps its value", () =>
    Effect.gen(function*() {
      const driver = yield* driverOf(
        Topology.make("enrich", [
          KStream.from(Orders).pipe(KStream.join(KTable.from(Customers), (amount, c) => `${amount}@${c.region}`), KStream.to(Enriched))
        ]),
        { deadLetterTopic: "dead-letters" }
      )
      yield* driver.pipeRaw("customers", { key: Buffer.from("c1"), value: json({ region: "eu", active: true }), timestamp: 1 })
      yield* driver.pipeRaw("customers", { key: Buffer.from("c1"), value: Buffer.from("not json"), timestamp: 2 })
      yield* driver.pipeRaw("orders", { key: Buffer.from("c1"), value: json(5), timestamp: 3 })
      const letters = yield* driver.deadLetters
      assert.deepStrictEqual(letters.map((r) => [text(r.key), text(r.value)]), [["c1", "not json"]])
      assert.deepStrictEqual((yield* driver.records("enriched")).map((r) => text(r.value)), ["5@eu"])
    }))

  it.scoped("a joiner or a table operator that throws fails its record with OperatorFailed, for the rules (dead letter topic)", () =>
    Effect.gen(function*() {
      const table = KTable.from(Customers).pipe(
        KTable.mapValues((customer) => {
          if (customer.region === "??") throw new Error("no region")
          return customer.region
        }, { name: "region" })
      )
      const driver = yield* driverOf(
        Topology.make("enrich", [
          KStream.from(Orders).pipe(
            KStream.join(table, (amount, region) => {
              if (amount < 0) throw new Error("negative amount")
              return `${amount}@${region}`
            }, { name: "enrich" }),
            KStream.to(Enriched)
          )
        ]),
        { deadLetterTopic: "dead-letters" },
        [ErrorRule.tagged("OperatorFailed", { then: "dlq" })]
      )
      yield* driver.pipeRaw("customers", { key: Buffer.from("c1"), value: json({ region: "eu", active: true }), timestamp: 1 })
      yield* driver.pipeRaw("customers", { key: Buffer.from("c2"), value: json({ region: "??", active: true }), timestamp: 2 })
      yield* driver.pipeRaw("orders", { key: Buffer.from("c1"), value: json(-1), timestamp: 3 })
      yield* driver.pipeRaw("orders", { key: Buffer.from("c2"), value: json(4), timestamp: 4 })
      yield* driver.pipeRaw("orders", { key: Buffer.from("c1"), value: json(5), timestamp: 5 })
      const letters = yield* driver.deadLetters
      const errors = letters.map((r) => r.headers.find(([name]) => name === "skein.error")?.[1].toString("utf8") ?? "")
      assert.strictEqual(letters.length, 2)
      assert.include(errors[0], "negative amount")
      assert.include(errors[0], "enrich")
      assert.include(errors[1], "no region")
      assert.deepStrictEqual((yield* driver.records("enriched")).map((r) => text(r.value)), ["5@eu"])
    }))

  it("a topic read both as a stream and as a table fails to compile with the fix", () => {
    const topology = Topology.make("twice", [
      KStream.from(Customers).pipe(
        KStream.join(KTable.from(Customers), (customer) => customer.region),
        KStream.to(Enriched)
      )
    ])
    const error = Topology.compile(topology, "joins")
    assert.ok(Either.isLeft(error))
    if (Either.isLeft(error)) assert.include(error.left.message, "both as a stream (KStream.from) and as a table")
  })

  it("a join after a key change without codecs, and a join of a windowed aggregation's table, fail to compile with the fix", () => {
    const rekeyed = Topology.make("rekeyed", [
      KStream.from(Orders).pipe(
        KStream.selectKey((order) => `${order.value}`),
        KStream.join(KTable.from(Customers), (amount) => `${amount}`),
        KStream.to(Enriched)
      )
    ])
    const error = Topology.compile(rekeyed, "joins")
    assert.ok(Either.isLeft(error))
    if (Either.isLeft(error)) assert.include(error.left.message, "KStream.repartition")

    // An aggregation's table joins (test/unit/table-join.test.ts); a windowed one's does not yet.
    const windowed = KStream.from(Orders).pipe(
      KStream.groupByKey(),
      KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace("1 minute", "0 seconds")),
      TimeWindowedKStream.count()
    )
    const aggregated = Topology.make("aggregated", [
      KStream.from(Windows).pipe(KStream.join(windowed, (v, n) => `${v}:${n}`), KStream.to(WindowsOut))
    ])
    const second = Topology.compile(aggregated, "joins")
    assert.ok(Either.isLeft(second))
    if (Either.isLeft(second)) assert.include(second.left.message, "a windowed aggregation's table and a table join's result cannot be joined yet")
  })

  it("co-partitioning: a join's inputs with different partition counts fail with both topics and the fix", () => {
    const topology = Topology.make("enrich", [
      KStream.from(Orders).pipe(KStream.join(KTable.from(Customers), (amount) => `${amount}`, { name: "enrich" }), KStream.to(Enriched))
    ])
    const compiled = Topology.compile(topology, "joins")
    assert.ok(Either.isRight(compiled))
    if (Either.isLeft(compiled)) return
    assert.deepStrictEqual(compiled.right.joins, [{ name: "enrich", streamTopics: ["orders"], tableTopics: ["customers"] }])
    assert.ok(Either.isRight(CoPartitioning.check(compiled.right.joins, new Map([["orders", 4], ["customers", 4]]))))
    const mismatch = CoPartitioning.check(compiled.right.joins, new Map([["orders", 6], ["customers", 4]]))
    assert.ok(Either.isLeft(mismatch))
    if (Either.isRight(mismatch)) return
    assert.strictEqual(mismatch.left._tag, "ConfigurationError")
    assert.include(mismatch.left.message, "orders (6 partitions)")
    assert.include(mismatch.left.message, "customers (4 partitions)")
    assert.include(mismatch.left.message, "KStream.repartition")
  })
})
