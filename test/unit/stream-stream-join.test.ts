/**
 * Stream-stream windowed joins in process (TestDriver): a left join's
 * `l + null` only once the window plus grace has closed (never before, never
 * besides a join), an outer join's `null + r`, a record without a key
 * dropped by an inner join and counted in `skein_streams_dropped_records_total`,
 * a key's records leaving the state after the retention,
 * a throwing joiner as the record's `OperatorFailed`, and the startup checks
 * (co-partitioning, a re-keyed input, a self-join, an empty window). The
 * differential test against Kafka Streams is
 * test/streams/stream-join-driver.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Metric, MetricState, Option, Schema } from "effect"
import * as CoPartitioning from "../../src/internal/streams/coPartitioning.ts"
import { ErrorRule, JoinWindows, KStream, Topic, Topology, Transformer } from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"

const Orders = Topic.make({ name: "orders", key: Schema.String, value: Schema.String })
const Payments = Topic.make({ name: "payments", key: Schema.String, value: Schema.String })
const Output = Topic.make({ name: "paid", key: Schema.String, value: Schema.String })
const options = { value: Schema.String, otherValue: Schema.String, name: "paid" }
// Payments at most 10 ms from their order; late records admitted for 5 ms.
const windows = JoinWindows.ofTimeDifferenceAndGrace(10, 5)

const driverOf = (topology: Topology.Topology<never, never>, driverOptions: TestDriver.Options = {}, rules: Topology.RunOptions<never>["rules"] = []) =>
  Effect.gen(function*() {
    const compiled = Topology.compile(topology, "joins", { rules })
    if (Either.isLeft(compiled)) return yield* Effect.dieMessage(compiled.left.message)
    assert.strictEqual(compiled.right.subTopologies.length, 1)
    // The compiled transformer is Transformer.Any: its inputs, state and errors erased by compile.
    return yield* TestDriver.make(
      compiled.right.subTopologies[0]!.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>,
      driverOptions
    )
  })

type Driver = TestDriver.TestDriver<ReadonlyArray<Topic.Any>, unknown, unknown, never>

const text = (b: Buffer | null) => b === null ? null : b.toString("utf8")
const pipe = (driver: Driver, topic: string, key: string | null, value: string, timestamp: number) =>
  driver.pipeRaw(topic, { key: key === null ? null : Buffer.from(key), value: Buffer.from(value), timestamp })
const outputOf = (driver: Driver) =>
  Effect.map(driver.records("paid"), (records) => records.map((r) => [text(r.key), text(r.value), r.timestamp] as const))

describe("stream-stream joins", () => {
  it.scoped("a left join emits l+null only once the window plus grace has closed, and a join at once", () =>
    Effect.gen(function*() {
      const driver = yield* driverOf(Topology.make("pay", [
        KStream.from(Orders).pipe(
          KStream.windowedLeftJoin(KStream.from(Payments), (o, p) => `${o}+${p ?? "null"}`, windows, options),
          KStream.to(Output)
        )
      ]))
      yield* pipe(driver, "orders", "a", "o1", 100)
      yield* pipe(driver, "orders", "b", "o2", 101)
      yield* pipe(driver, "payments", "a", "p1", 108) // joins o1 at once, with the later timestamp
      yield* pipe(driver, "orders", "c", "o3", 115) // stream time 115: o2's window (111) plus grace (116) is open
      assert.deepStrictEqual(yield* outputOf(driver), [["a", "o1+p1", 108]])
      yield* pipe(driver, "orders", "c", "o4", 117) // stream time 117 > 116: o2 closes without a partner
      assert.deepStrictEqual((yield* outputOf(driver)).slice(1), [["b", "o2+null", 101]])
      // A payment for o3 within its window: joined, so o3 has no null result at its close.
      yield* pipe(driver, "payments", "c", "p2", 112)
      yield* pipe(driver, "orders", "d", "o5", 200) // closes o3 (joined) and o4 (not)
      assert.deepStrictEqual((yield* outputOf(driver)).slice(2), [["c", "o3+p2", 115], ["c", "o4+p2", 117]])
      // Nothing else is due before o5's close (215).
      yield* pipe(driver, "orders", "e", "o6", 216)
      assert.deepStrictEqual((yield* outputOf(driver)).slice(4), [["d", "o5+null", 200]])
      // A payment for o5, after o5's null result: it joins no more (its result was final).
      yield* pipe(driver, "payments", "d", "p3", 205)
      assert.deepStrictEqual((yield* outputOf(driver)).slice(5), [])
    }))

  it.scoped("an out-of-order record past its window end but within grace waits: joined later, it has no l+null", () =>
    Effect.gen(function*() {
      const driver = yield* driverOf(Topology.make("pay", [
        KStream.from(Orders).pipe(
          KStream.windowedLeftJoin(KStream.from(Payments), (o, p) => `${o}+${p ?? "null"}`, windows, options),
          KStream.to(Output)
        )
      ]))
      yield* pipe(driver, "orders", "x", "o0", 120) // stream time 120
      // o1 at 108: its window end (118) has passed, its close (123) not: Kafka Streams emits o1+null here at once.
      yield* pipe(driver, "orders", "a", "o1", 108)
      assert.deepStrictEqual(yield* outputOf(driver), [])
      yield* pipe(driver, "payments", "a", "p1", 110) // within grace: joins o1
      yield* pipe(driver, "orders", "y", "o2", 200) // closes o0 (no partner) and o1 (joined)
      assert.deepStrictEqual(yield* outputOf(driver), [["a", "o1+p1", 110], ["x", "o0+null", 120]])
    }))

  it.scoped("an outer join emits null+r for a payment without an order once its window closes", () =>
    Effect.gen(function*() {
      const driver = yield* driverOf(Topology.make("pay", [
        KStream.from(Orders).pipe(
          KStream.windowedOuterJoin(KStream.from(Payments), (o, p) => `${o ?? "null"}+${p ?? "null"}`, windows, options),
          KStream.to(Output)
        )
      ]))
      yield* pipe(driver, "payments", "a", "p1", 100)
      yield* pipe(driver, "orders", "b", "o1", 100)
      yield* pipe(driver, "orders", "c", "o2", 116)
      // At stream time 116 both closed (100 + 10 + 5 < 116): by timestamp, then the right side first.
      assert.deepStrictEqual(yield* outputOf(driver), [["a", "null+p1", 100], ["b", "o1+null", 100]])
    }))

  it.scoped("a key's records leave the state once their side's time passes the retention, though the key never comes again", () =>
    Effect.gen(function*() {
      const driver = yield* driverOf(Topology.make("pay", [
        KStream.from(Orders).pipe(
          KStream.windowedJoin(KStream.from(Payments), (o, p) => `${o}+${p}`, windows, options),
          KStream.to(Output)
        )
      ]))
      yield* pipe(driver, "orders", "a", "o1", 100)
      yield* pipe(driver, "payments", "a", "p1", 101)
      assert.ok(Option.isSome(yield* driver.state("la")), "o1 is kept")
      assert.ok(Option.isSome(yield* driver.state("ra")), "p1 is kept")
      // Retention: before + after + grace = 25 ms of each side's own time.
      yield* pipe(driver, "orders", "b", "o2", 124)
      assert.ok(Option.isSome(yield* driver.state("la")), "o1 is kept until the left time reaches 125")
      yield* pipe(driver, "orders", "b", "o3", 125)
      assert.ok(Option.isNone(yield* driver.state("la")), "o1 is gone")
      assert.ok(Option.isSome(yield* driver.state("ra")), "the right side's time is still 101")
      yield* pipe(driver, "payments", "c", "p2", 300)
      assert.ok(Option.isNone(yield* driver.state("ra")), "p1 is gone")
      assert.deepStrictEqual(yield* outputOf(driver), [["a", "o1+p1", 101]])
    }))

  it.scoped("a record without a key is dropped by an inner join and counted in skein_streams_dropped_records_total", () =>
    Effect.gen(function*() {
      const operator = "paid-dropping"
      const dropped = () => {
        let total = 0
        for (const pair of Metric.unsafeSnapshot()) {
          if (pair.metricKey.name !== "skein_streams_dropped_records_total" || !MetricState.isCounterState(pair.metricState)) continue
          if (pair.metricKey.tags.some((tag) => tag.key === "operator" && tag.value === operator)) total += Number(pair.metricState.count)
        }
        return total
      }
      const driver = yield* driverOf(Topology.make("pay", [
        KStream.from(Orders).pipe(
          KStream.windowedJoin(KStream.from(Payments), (o, p) => `${o}+${p}`, windows, { ...options, name: operator }),
          KStream.to(Output)
        )
      ]))
      const before = dropped()
      yield* pipe(driver, "orders", "a", "o1", 100)
      yield* pipe(driver, "payments", null, "p0", 100)
      yield* pipe(driver, "payments", "a", "p1", 101)
      assert.deepStrictEqual(yield* outputOf(driver), [["a", "o1+p1", 101]])
      assert.strictEqual(dropped() - before, 1)
    }))

  it.scoped("a throwing joiner fails the record with OperatorFailed, for the rules (dead letter topic)", () =>
    Effect.gen(function*() {
      const driver = yield* driverOf(
        Topology.make("pay", [
          KStream.from(Orders).pipe(
            KStream.windowedJoin(KStream.from(Payments), (o, p) => {
              if (p === "bad") throw new Error("joiner refused")
              return `${o}+${p}`
            }, windows, options),
            KStream.to(Output)
          )
        ]),
        { deadLetterTopic: "dead-letters" },
        [ErrorRule.tagged("OperatorFailed", { then: "dlq" })]
      )
      yield* pipe(driver, "orders", "a", "o1", 100)
      yield* pipe(driver, "payments", "a", "bad", 101)
      yield* pipe(driver, "payments", "a", "p2", 102)
      assert.deepStrictEqual(yield* outputOf(driver), [["a", "o1+p2", 102]])
      const dead = yield* driver.deadLetters
      assert.strictEqual(dead.length, 1)
      assert.strictEqual(text(dead[0]!.value), "bad")
      assert.include(dead[0]!.headers.find(([name]) => name === "skein.error")?.[1].toString("utf8") ?? "", "OperatorFailed")
    }))

  it("inputs with different partition counts fail at startup, naming both streams and the fix", () => {
    const compiled = Topology.compile(
      Topology.make("pay", [
        KStream.from(Orders).pipe(KStream.windowedJoin(KStream.from(Payments), (o, p) => `${o}+${p}`, windows, options), KStream.to(Output))
      ]),
      "joins"
    )
    assert.ok(Either.isRight(compiled))
    if (Either.isLeft(compiled)) return
    assert.deepStrictEqual(compiled.right.joins, [{
      name: "paid",
      streamTopics: ["orders"],
      tableTopics: ["payments"],
      labels: ["left stream", "right stream"]
    }])
    assert.ok(Either.isRight(CoPartitioning.check(compiled.right.joins, new Map([["orders", 4], ["payments", 4]]))))
    const mismatch = CoPartitioning.check(compiled.right.joins, new Map([["orders", 6], ["payments", 4]]))
    assert.ok(Either.isLeft(mismatch))
    if (Either.isRight(mismatch)) return
    assert.include(mismatch.left.message, "left stream orders (6 partitions)")
    assert.include(mismatch.left.message, "right stream payments (4 partitions)")
    assert.include(mismatch.left.message, "KStream.repartition({ key, value, partitions: 4 })")
  })

  it("a stream repartitioned before the join: its repartition topic gets the other stream's partition count", () => {
    const rekeyed = KStream.from(Orders).pipe(
      KStream.selectKey((r) => r.value),
      KStream.repartition({ key: Schema.String, value: Schema.String, name: "by-value" })
    )
    const compiled = Topology.compile(
      Topology.make("pay", [
        KStream.to(KStream.windowedJoin(rekeyed, KStream.from(Payments), (o, p) => `${o}+${p}`, windows, options), Output)
      ]),
      "joins"
    )
    assert.ok(Either.isRight(compiled))
    if (Either.isLeft(compiled)) return
    assert.strictEqual(compiled.right.subTopologies.length, 2)
    assert.deepStrictEqual(compiled.right.internalTopics, [{ name: "joins-by-value-repartition", partitions: undefined, upstreamInputs: ["payments"] }])
    assert.deepStrictEqual(compiled.right.joins[0]!.streamTopics, ["joins-by-value-repartition"])
  })

  it("describe names the join, its sides and its window", () => {
    const described = Topology.describe(
      Topology.make("pay", [
        KStream.from(Orders).pipe(
          KStream.windowedLeftJoin(KStream.from(Payments), (o, p) => `${o}+${p ?? "null"}`, windows, options),
          KStream.to(Output)
        )
      ]),
      "joins"
    )
    assert.include(described, "Processor paid (windowed left join of KSTREAM-SOURCE-0000000000 with KSTREAM-SOURCE-0000000001; ")
    assert.include(described, "window: before 10 ms, after 10 ms, grace 5 ms; state: paid)")
  })

  it("a re-keyed input, a self-join and an empty window fail to compile with the fix", () => {
    const compileError = (stream: KStream.KStream<string, string>) => {
      const compiled = Topology.compile(Topology.make("pay", [KStream.to(stream, Output)]), "joins")
      assert.ok(Either.isLeft(compiled))
      return Either.isLeft(compiled) ? compiled.left.message : ""
    }
    const orders = KStream.from(Orders)
    const rekeyed = orders.pipe(KStream.selectKey((r) => r.value))
    assert.include(
      compileError(KStream.windowedJoin(rekeyed, KStream.from(Payments), (o, p) => `${o}+${p}`, windows, options)),
      "KStream.repartition"
    )
    assert.include(compileError(KStream.windowedJoin(orders, orders, (o, p) => `${o}+${p}`, windows, options)), "with itself")
    assert.include(
      compileError(KStream.windowedJoin(orders, KStream.from(Payments), (o, p) => `${o}+${p}`, JoinWindows.ofTimeDifferenceAndGrace(-1, 0), options)),
      "before + after"
    )
  })
})
