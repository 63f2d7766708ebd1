/**
 * Stream-global table joins in process (TestDriver, the global table's
 * records applied to the compiled topology's store as its loader applies
 * them): a re-keyed stream joins without a repartition, the global table is
 * in no sub-topology, a tombstone deletes and a record without a key is
 * skipped, an undecodable global record is skipped (not applied), a key
 * mapper that throws is an OperatorFailed for the rules, `describe` names
 * the global table. The differential test against Kafka Streams is
 * test/streams/table-join-driver.test.ts (stream-global-table-*); the broker
 * test (the loader) is test/streams/join.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { GlobalKTable, KStream, Topic, Topology, Transformer } from "../../src/index.ts"
import { OperatorFailed } from "../../src/SkeinError.ts"
import { TestDriver } from "../../src/testing/index.ts"

const Order = Schema.Struct({ region: Schema.String, amount: Schema.Number })
const Orders = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Order) })
const Regions = Topic.make({ name: "regions", key: Schema.String, value: Schema.String })
const Output = Topic.make({ name: "output", key: Schema.String, value: Schema.String })

const topologyOf = (kind: "inner" | "left") => {
  const regions = GlobalKTable.from(Regions, { name: "regions" })
  const orders = KStream.from(Orders).pipe(
    // Re-keyed: a join with a global table needs no repartition.
    KStream.selectKey((order) => `${order.key}!`)
  )
  const joined = kind === "inner"
    ? KStream.globalJoin(orders, regions, (order) => order.value.region === "boom" ? boom() : order.value.region, (o, r) => `${o.amount}@${r}`)
    : KStream.globalLeftJoin(orders, regions, (order) => order.value.region === "" ? null : order.value.region, (o, r) => `${o.amount}@${r ?? "none"}`)
  return Topology.make("order-regions", [KStream.to(joined, Output)])
}

const boom = (): string => {
  throw new Error("no region for boom")
}

const driverOf = (kind: "inner" | "left") =>
  Effect.gen(function*() {
    const compiled = Topology.compile(topologyOf(kind), "shop", { rules: [] })
    if (Either.isLeft(compiled)) return yield* Effect.die(compiled.left)
    assert.strictEqual(compiled.right.subTopologies.length, 1, "no repartition, no sub-topology for the global table")
    assert.deepStrictEqual(compiled.right.subTopologies[0]!.inputs, ["orders"])
    const [regions] = compiled.right.globalTables
    assert.strictEqual(regions?.topic, "regions")
    // The compiled transformer is Transformer.Any: its inputs, state and errors erased by compile.
    const driver = yield* TestDriver.make(
      compiled.right.subTopologies[0]!.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>
    )
    const apply = (key: string | null, value: string | null) =>
      regions!.store.apply(key === null ? null : Buffer.from(key), value === null ? null : Buffer.from(value))
    const results = Effect.map(driver.outputs(Output), (records) => records.map((r) => `${r.key}=${r.value}`))
    return { driver, apply, results, store: regions!.store }
  })

describe("streams: stream-global table joins in process", () => {
  it.scoped("an inner join of a re-keyed stream: the global table's latest value per key, a tombstone deleting it", () =>
    Effect.gen(function*() {
      const { apply, driver, results, store } = yield* driverOf("inner")
      assert.ok(Either.isRight(apply("eu", "Europe")))
      assert.ok(Either.isRight(apply("us", "Americas")))
      assert.deepStrictEqual(apply(null, "nowhere"), Either.left({ _tag: "NoKey" }))
      assert.strictEqual(store.size, 2)
      yield* driver.pipe(Orders, "o1", { region: "eu", amount: 3 })
      yield* driver.pipe(Orders, "o2", { region: "ap", amount: 4 })
      assert.ok(Either.isRight(apply("eu", null)))
      assert.ok(Either.isRight(apply("us", "North America")))
      yield* driver.pipe(Orders, "o3", { region: "eu", amount: 5 })
      yield* driver.pipe(Orders, "o4", { region: "us", amount: 6 })
      assert.deepStrictEqual(yield* results, ["o1!=3@Europe", "o4!=6@North America"])
    }))

  it.scoped("a left join joins a record whose key maps to none with null", () =>
    Effect.gen(function*() {
      const { apply, driver, results } = yield* driverOf("left")
      apply("eu", "Europe")
      yield* driver.pipe(Orders, "o1", { region: "eu", amount: 3 })
      yield* driver.pipe(Orders, "o2", { region: "ap", amount: 4 })
      yield* driver.pipe(Orders, "o3", { region: "", amount: 5 })
      assert.deepStrictEqual(yield* results, ["o1!=3@Europe", "o2!=4@none", "o3!=5@none"])
    }))

  it.scoped("an undecodable global record is skipped; a key mapper that throws fails its record with OperatorFailed", () =>
    Effect.gen(function*() {
      const { apply, driver, results, store } = yield* driverOf("inner")
      apply("eu", "Europe")
      // Not UTF-8: the value does not decode, and the key keeps its value.
      const skipped = store.apply(Buffer.from("eu"), Buffer.from([0xff, 0xfe]))
      assert.ok(Either.isLeft(skipped) && skipped.left._tag === "Undecodable")
      yield* driver.pipe(Orders, "o0", { region: "eu", amount: 2 })
      assert.deepStrictEqual(yield* results, ["o0!=2@Europe"])
      const error = yield* Effect.flip(driver.pipe(Orders, "o1", { region: "boom", amount: 1 }))
      assert.ok(error instanceof OperatorFailed)
      assert.include(error.message, "key mapper")
      assert.include(error.message, "no region for boom")
    }))

  it("describe lists the global table and the join", () => {
    const described = Topology.describe(topologyOf("left"), "shop")
    assert.include(described, "Global tables (every partition on every instance):\n    regions (topic: regions)")
    assert.include(described, "(leftJoin of KSTREAM-KEY-SELECT-0000000002 with the global table regions)")
  })
})
