/**
 * A stream's record errors in process (TestDriver): a function given to an
 * operator that throws (a groupBy key function, a map, a reduce, windowed or
 * not, a timestamp extractor) fails its record with `OperatorFailed`,
 * which the topology's rules send to the dead letter topic with the error;
 * without a rule it is the run's typed failure, never a defect. An output
 * whose event time its topic refuses (`TimestampOutOfRange`) goes the same
 * way, and neither moves the task's stream time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Either, Exit, Option, Schema, TestClock } from "effect"
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

const Order = Schema.Struct({ customer: Schema.String, amount: Schema.Number })
const Orders = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Order) })
const Counts = Topic.make({ name: "counts", key: Schema.String, value: Topic.json(Schema.Number) })
const Amounts = Topic.make({ name: "amounts", key: Schema.String, value: Topic.json(Schema.Number) })
const Totals = Topic.make({ name: "totals", key: Windowed.json(Schema.String), value: Topic.json(Schema.Number) })

/** The customer of an order, or a throw for a customer named "" (the user's bug). */
const customerOf = (order: { readonly value: { readonly customer: string } }): string => {
  if (order.value.customer === "") throw new Error("no customer on this order")
  return order.value.customer
}

const rules = [ErrorRule.tagged("OperatorFailed", { then: "dlq" })] as const

/** Sub-topology `index` of `topology` in a TestDriver with a dead letter topic (compile erases its types). */
const driverOf = <E>(
  topology: Topology.Topology<E, never>,
  options: Topology.RunOptions<E> = {},
  index = 0,
  driver: TestDriver.Options = {}
) =>
  Effect.gen(function*() {
    const compiled = Topology.compile(topology, "shop", options)
    if (Either.isLeft(compiled)) return yield* Effect.dieMessage(compiled.left.message)
    const transformer = compiled.right.subTopologies[index]!.transformer
    return yield* TestDriver.make(
      transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>,
      { deadLetterTopic: "dead-letters", ...driver }
    )
  })

const errorOf = (letter: TestDriver.RawRecord): string =>
  letter.headers.find(([name]) => name === "skein.error")?.[1].toString("utf8") ?? ""

/** The run's failure: its typed error's tag, or `defect: ...` when it died. */
const failureOf = <A, E>(exit: Exit.Exit<A, E>): string =>
  Exit.match(exit, {
    onSuccess: () => "succeeded",
    onFailure: (cause) =>
      Option.match(Cause.failureOption(cause), {
        onSome: (error) => typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : String(error),
        onNone: () => `defect: ${Cause.pretty(cause)}`
      })
  })

const countsByCustomer = () =>
  Topology.make("orders", [
    KStream.from(Orders).pipe(
      KStream.groupBy(customerOf, { key: Schema.String, value: Topic.json(Order), name: "by-customer" }),
      KGroupedStream.count({ name: "order-counts" }),
      KTable.toStream,
      KStream.to(Counts)
    )
  ])

describe("streams: record errors", () => {
  it.scoped("a groupBy key function that throws: the record to the dead letter topic with the error; unruled, a typed failure", () =>
    Effect.gen(function*() {
      const driver = yield* driverOf(countsByCustomer(), { rules })
      yield* driver.pipeAll(Orders, [
        { key: "o-1", value: { customer: "alice", amount: 1 } },
        { key: "o-2", value: { customer: "", amount: 2 } },
        { key: "o-3", value: { customer: "bob", amount: 3 } }
      ])
      const repartitioned = yield* driver.records("shop-by-customer-repartition")
      assert.deepStrictEqual(repartitioned.map((r) => r.key?.toString("utf8")), ["alice", "bob"])
      const letters = yield* driver.deadLetters
      assert.deepStrictEqual(letters.map((l) => l.key?.toString("utf8")), ["o-2"])
      assert.strictEqual(
        errorOf(letters[0]!),
        "OperatorFailed: The selectKey function of the operator KSTREAM-KEY-SELECT-0000000001 threw on orders/0@1: " +
          "Error: no customer on this order. Make the function total (return a value for every record), " +
          "or add an error rule for OperatorFailed (e.g. to the dead letter topic)"
      )

      const unruled = yield* driverOf(countsByCustomer())
      const exit = yield* Effect.exit(unruled.pipe(Orders, "o-2", { customer: "", amount: 2 }))
      assert.strictEqual(failureOf(exit), "OperatorFailed")
    }))

  it.scoped("a map or selectKey that throws a non-Error, and a predicate rule: the rules see OperatorFailed", () =>
    Effect.gen(function*() {
      const topology = Topology.make("amounts", [
        KStream.from(Orders).pipe(
          KStream.map((order) => {
            if (order.value.amount < 0) throw "negative amount"
            return { key: order.value.customer, value: order.value.amount }
          }, { name: "to-amounts" }),
          KStream.to(Amounts)
        )
      ])
      const driver = yield* driverOf(topology, {
        rules: [ErrorRule.make<Topology.StreamError<never>>({ when: (error) => error._tag === "OperatorFailed", then: "dlq" })]
      })
      yield* driver.pipeAll(Orders, [
        { key: "o-1", value: { customer: "alice", amount: -1 } },
        { key: "o-2", value: { customer: "alice", amount: 5 } }
      ])
      assert.deepStrictEqual((yield* driver.outputs(Amounts)).map((r) => [r.key, r.value]), [["alice", 5]])
      const letters = yield* driver.deadLetters
      assert.strictEqual(letters.length, 1)
      assert.include(errorOf(letters[0]!), "The map function of the operator to-amounts threw on orders/0@0: negative amount.")
    }))

  it.scoped("a reduce (not windowed) that throws: dead-lettered, the key's sum unchanged", () =>
    Effect.gen(function*() {
      const topology = Topology.make("sums", [
        KStream.from(Orders).pipe(
          KStream.mapValues((order) => order.amount),
          KStream.groupByKey(),
          KGroupedStream.reduce((sum: number, amount: number) => {
            if (amount === 7) throw new Error("seven is not allowed")
            return sum + amount
          }, { state: Schema.Number, name: "sums" }),
          KTable.toStream,
          KStream.to(Amounts)
        )
      ])
      const driver = yield* driverOf(topology, { rules })
      yield* driver.pipeAll(Orders, [1, 7, 2].map((amount) => ({ key: "a", value: { customer: "c", amount } })))
      assert.deepStrictEqual((yield* driver.outputs(Amounts)).map((r) => r.value), [1, 3])
      const letters = yield* driver.deadLetters
      assert.strictEqual(letters.length, 1)
      assert.include(errorOf(letters[0]!), "OperatorFailed: The reduce function of the operator sums threw on orders/0@1: Error: seven is not allowed")
      const unruled = yield* driverOf(topology)
      yield* unruled.pipe(Orders, "a", { customer: "c", amount: 1 })
      assert.strictEqual(failureOf(yield* Effect.exit(unruled.pipe(Orders, "a", { customer: "c", amount: 7 }))), "OperatorFailed")
    }))

  it.scoped("a windowed reduce that throws, and a timestamp extractor that throws: dead-lettered, stream time and state unchanged", () =>
    Effect.gen(function*() {
      const topology = Topology.make("totals", [
        KStream.fromTopics([Orders], {
          timestamp: (order) => {
            if (order.value.amount === 0) throw new RangeError("no time on a zero order")
            return order.value.amount * 100
          }
        }).pipe(
          KStream.mapValues((order) => order.amount),
          KStream.groupByKey(),
          KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace(1000, 0)),
          TimeWindowedKStream.reduce((sum: number, amount: number) => {
            if (amount === 7) throw new Error("seven is not allowed")
            return sum + amount
          }, { state: Schema.Number, name: "totals" }),
          KTable.toStream,
          KStream.to(Totals)
        )
      ])
      const driver = yield* driverOf(topology, { rules })
      // Event times are amounts times 100: 100, a throw in the extractor (0), 300, a throw in the reduce (700), 500.
      yield* driver.pipeAll(Orders, [1, 0, 3, 7, 5].map((amount, i) => ({ key: "a", value: { customer: `c${i}`, amount } })))
      const totals = (yield* driver.outputs(Totals)).map((r) => `${r.key?.key}@${r.key?.window.start}=${r.value}@${r.timestamp}`)
      // The reduce's failed record left the window as it was: its sum 4, then 4 + 5 at 500 (not at 700).
      assert.deepStrictEqual(totals, ["a@0=1@100", "a@0=4@300", "a@0=9@500"])
      const letters = yield* driver.deadLetters
      assert.deepStrictEqual(letters.map(errorOf).map((e) => e.split(":").slice(0, 2).join(":")), [
        "OperatorFailed: The timestamp extractor function of the operator KSTREAM-SOURCE-0000000000 threw on orders/0@1",
        "OperatorFailed: The reduce function of the operator totals threw on orders/0@3"
      ])
      assert.include(errorOf(letters[0]!), "RangeError: no time on a zero order")
      assert.include(errorOf(letters[1]!), "Error: seven is not allowed")
    }))

  it.scoped("an event time past the output topic's message.timestamp.after.max.ms: TimestampOutOfRange, to the dead letter topic", () =>
    Effect.gen(function*() {
      const hour = 3_600_000
      yield* TestClock.setTime(1_000 * hour)
      const topology = Topology.make("amounts", [
        KStream.fromTopics([Orders], { timestamp: (order) => order.value.amount }).pipe(
          KStream.mapValues((order) => order.amount),
          KStream.to(Amounts)
        )
      ])
      const ruled = [ErrorRule.tagged("TimestampOutOfRange", { then: "dlq" })]
      const driver = yield* driverOf(topology, { rules: ruled }, 0, { timestampAfterMaxMs: hour })
      const now = 1_000 * hour
      yield* driver.pipeAll(Orders, [now, now + hour, now + 30 * 24 * hour, 5].map((amount) => ({ key: "a", value: { customer: "c", amount } })))
      assert.deepStrictEqual((yield* driver.outputs(Amounts)).map((r) => r.timestamp), [now, now + hour, 5])
      const letters = yield* driver.deadLetters
      assert.strictEqual(letters.length, 1)
      assert.include(
        errorOf(letters[0]!),
        `An output for amounts has the timestamp ${now + 30 * 24 * hour} (1970-03-13T16:00:00.000Z), ${30 * 24 * hour} ms ahead of the clock`
      )

      const unruled = yield* driverOf(topology, {}, 0, { timestampAfterMaxMs: hour })
      const exit = yield* Effect.exit(unruled.pipe(Orders, "a", { customer: "c", amount: now + 2 * hour }))
      assert.strictEqual(failureOf(exit), "TimestampOutOfRange")
    }))
})
