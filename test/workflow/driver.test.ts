/**
 * A durable workflow on TestDriver, no broker: the run store is in memory, with the same
 * semantics (a retried record runs only its unfinished steps, a completed run is read back).
 */
import { Activity, Workflow } from "@effect/workflow"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schedule, Schema } from "effect"
import { ErrorRule, KafkaWorkflow, Topic } from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"

class Declined extends Schema.TaggedError<Declined>()("Declined", {}) {}

const Charge = Workflow.make({
  name: "charge",
  payload: { order: Schema.String, amount: Schema.NumberFromString },
  success: Schema.String,
  error: Declined,
  idempotencyKey: (p) => p.order
})

const Orders = KafkaWorkflow.topic("orders", Charge)
const Receipts = Topic.make({ name: "receipts", key: Schema.String, value: Schema.String })

describe("KafkaWorkflow on TestDriver", () => {
  it.scoped("a retry runs only the failed step; a redelivered completed run is read back", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      let declines = 1
      const flow = KafkaWorkflow.make({
        name: "charging",
        input: Orders,
        workflow: Charge,
        execute: (order) =>
          Effect.gen(function*() {
            ran.push(`body ${order.order}`)
            const quote = yield* Activity.make({
              name: "quote",
              success: Schema.Number,
              execute: Effect.sync(() => {
                ran.push(`quote ${order.order}`)
                return order.amount * 2
              })
            })
            return yield* Activity.make({
              name: "pay",
              success: Schema.String,
              error: Declined,
              execute: Effect.suspend(() => {
                ran.push(`pay ${order.order}`)
                return declines-- > 0 ? Effect.fail(new Declined()) : Effect.succeed(`paid ${quote}`)
              })
            })
          }),
        emit: (receipt, record) => [Topic.record(Receipts, record.key, receipt)],
        rules: [ErrorRule.tagged("Declined", { retry: Schedule.recurs(1), then: "fail" })]
      })
      const driver = yield* TestDriver.make(flow)
      const order = JSON.stringify({ order: "o1", amount: "21" })
      yield* driver.pipeRaw(Orders, { key: Buffer.from("o1"), value: Buffer.from(order) })
      yield* driver.pipeRaw(Orders, { key: Buffer.from("o1"), value: Buffer.from(order) }) // a redelivery
      assert.deepStrictEqual(ran, ["body o1", "quote o1", "pay o1", "body o1", "pay o1"])
      assert.deepStrictEqual((yield* driver.outputs(Receipts)).map((r) => r.value), ["paid 42", "paid 42"])
      // The in-memory run store topic, as the broker's would hold it: steps, then their deletes and the completion.
      const id = yield* Charge.executionId({ order: "o1", amount: 21 })
      const runs = (yield* driver.records("test-charging-runs")).map((r) =>
        `${r.key?.toString().replace(id, "<id>")}${r.value === null ? " (deleted)" : ""}`
      )
      assert.deepStrictEqual(runs, [
        "step/<id>/1/quote",
        "step/<id>/1/pay",
        "step/<id>/1/pay (deleted)",
        "step/<id>/1/quote (deleted)",
        "done/<id>"
      ])
    }))
})
