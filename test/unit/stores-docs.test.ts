/**
 * The "State stores" snippets of docs/streams.md, as written there (imports
 * from the sources instead of the package): they compile, and the test
 * driver's runs.
 */
import { assert, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { KeyValueStore, Runner, SkeinConfig, Topic, Transformer } from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"

const Order = Schema.Struct({ order: Schema.String, amount: Schema.Number })
// Keyed by customer: a customer's orders are on one partition, so in one task's store.
const Orders = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Order) })
const Summaries = Topic.make({ name: "customer-summaries", key: Schema.String, value: Schema.String })

/** The open orders, keyed "{customer}/{order}": a prefix scan reads one customer's, in order. */
const OpenOrders = KeyValueStore.make({ name: "open-orders", key: Schema.String, value: Schema.Number })

export const Summarize = Transformer.make({
  name: "summarize",
  inputs: [Orders],
  state: Schema.Null, // no per-key state: the store holds it all
  stores: [OpenOrders],
  transform: (record) =>
    Effect.gen(function*() {
      const customer = record.key ?? "unknown"
      const { amount, order } = record.value
      if (amount === 0) yield* OpenOrders.delete(`${customer}/${order}`) // an amount of 0 closes the order
      else yield* OpenOrders.put(`${customer}/${order}`, amount)
      const open = yield* OpenOrders.prefix(`${customer}/`) // sees this record's own write
      const total = open.reduce((sum, entry) => sum + entry.value, 0)
      const orders = open.map((entry) => entry.key.slice(customer.length + 1)).join(" ")
      return { emit: [Topic.record(Summaries, customer, `${open.length} open (${orders}), ${total} in all`)] }
    })
})

/** The snippet's program (not run here: it needs a broker). */
export const main = () => Runner.run(Summarize).pipe(Effect.provide(SkeinConfig.layerConfig()), Runner.runMain)

it.scoped("one summary per order, from the customer's open orders", () =>
  Effect.gen(function*() {
    const driver = yield* TestDriver.make(Summarize)
    yield* driver.pipe(Orders, "ada", { order: "o2", amount: 5 })
    yield* driver.pipe(Orders, "ada", { order: "o1", amount: 10 })
    yield* driver.pipe(Orders, "bob", { order: "o3", amount: 7 })
    yield* driver.pipe(Orders, "ada", { order: "o2", amount: 0 })
    const summaries = yield* driver.outputs(Summaries)
    assert.deepStrictEqual(summaries.map((s) => `${s.key}: ${s.value}`), [
      "ada: 1 open (o2), 5 in all",
      "ada: 2 open (o1 o2), 15 in all",
      "bob: 1 open (o3), 7 in all",
      "ada: 1 open (o1), 10 in all"
    ])
  }))
