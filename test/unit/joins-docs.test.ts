/**
 * The "Tables and joins" snippet of docs/streams.md, as written there (imports
 * from the sources instead of the package): it compiles, and the test driver
 * runs its topology.
 */
import { assert, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { KStream, KTable, Runner, SkeinConfig, Topic, Topology, type Transformer } from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"

const Customer = Schema.Struct({ name: Schema.String, region: Schema.String, active: Schema.Boolean })
const Order = Schema.Struct({ item: Schema.String, amount: Schema.Number })
const Enriched = Schema.Struct({ item: Schema.String, amount: Schema.Number, region: Schema.String })
// Both keyed by customer id, with the same partition count.
const Customers = Topic.make({ name: "customers", key: Schema.String, value: Topic.json(Customer) })
const Orders = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Order) })
const EnrichedOrders = Topic.make({ name: "orders-enriched", key: Schema.String, value: Topic.json(Enriched) })

const regions = KTable.from(Customers, { name: "customers" }).pipe(
  KTable.filter((customer) => customer.value.active), // an inactive customer is deleted from the table
  KTable.mapValues((customer) => customer.region)
)

const enriched = KStream.from(Orders).pipe(
  KStream.leftJoin(regions, (order, region) => ({ ...order, region: region ?? "unknown" }), { name: "enrich" }),
  KStream.to(EnrichedOrders)
)

const topology = Topology.make("enrich-orders", [enriched])

/** The snippet's program (not run here: it needs a broker). */
export const main = () => Topology.run(topology).pipe(Effect.provide(SkeinConfig.layerConfig()), Runner.runMain)

it.scoped("orders joined with their customer's region; an unknown or inactive customer's as unknown", () =>
  Effect.gen(function*() {
    const compiled = Topology.compile(topology, "shop")
    assert.ok(Either.isRight(compiled))
    if (Either.isLeft(compiled)) return
    // The compiled transformer is Transformer.Any: its inputs, state and errors erased by compile.
    const driver = yield* TestDriver.make(
      compiled.right.subTopologies[0]!.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>
    )
    yield* driver.pipe(Customers, "c1", { name: "Ada", region: "eu", active: true })
    yield* driver.pipe(Customers, "c2", { name: "Bob", region: "us", active: false })
    yield* driver.pipe(Orders, "c1", { item: "book", amount: 12 })
    yield* driver.pipe(Orders, "c2", { item: "pen", amount: 2 })
    yield* driver.pipe(Orders, "c3", { item: "ink", amount: 5 })
    const out = yield* driver.outputs(EnrichedOrders)
    assert.deepStrictEqual(out.map((r) => [r.key, r.value]), [
      ["c1", { item: "book", amount: 12, region: "eu" }],
      ["c2", { item: "pen", amount: 2, region: "unknown" }],
      ["c3", { item: "ink", amount: 5, region: "unknown" }]
    ])
  }))
