/**
 * Defect: transactional ids could collide. In `runAll("shop", [orders, "orders-runs"])` the
 * run store of workflow "orders" (`shop-orders-runs-{partition}`) and the tasks of transformer
 * "orders-runs" (`shop-orders-runs-{partition}`) share their transactional ids: they fence each
 * other for ever, and validation passed. A collision is a ConfigurationError at startup,
 * naming both users of the id and the fix.
 */
import { Workflow } from "@effect/workflow"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { KafkaWorkflow, Runner, SkeinConfig, SkeinError, Topic, Transformer } from "../../src/index.ts"
import { brokers, createTopics, unique } from "../helpers/kafka.ts"

const Order = Workflow.make({
  name: "order",
  payload: { id: Schema.String },
  success: Schema.String,
  idempotencyKey: (p) => p.id
})

describe("transactional ids", () => {
  it.scopedLive("a workflow's run store and a transformer sharing them fail runAll at startup with ConfigurationError", () =>
    Effect.gen(function*() {
      const orders = unique("txid-orders")
      const payments = unique("txid-payments")
      const output = unique("txid-out")
      yield* createTopics([{ name: orders, partitions: 1 }, { name: payments, partitions: 1 }, { name: output, partitions: 1 }])
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const Payments = Topic.make({ name: payments, key: Schema.String, value: Schema.String })
      const flow = KafkaWorkflow.make({
        name: "orders",
        input: KafkaWorkflow.topic(orders, Order),
        workflow: Order,
        execute: (order) => Effect.succeed(order.id),
        emit: (result, record) => [Topic.record(Out, record.key, result)]
      })
      const runs = Transformer.stateless({
        name: "orders-runs",
        inputs: [Payments],
        transform: (record) => Effect.succeed({ emit: [Topic.record(Out, record.key, record.value)] })
      })
      const applicationId = unique("shop")
      const config = SkeinConfig.make({
        brokers: brokers(),
        applicationId,
        stateDir: fs.mkdtempSync(path.join(os.tmpdir(), "skein-txid-"))
      })
      // A guard against running on with the collision (today's behaviour), not a bound on the check's timing.
      const exit = yield* Runner.runAll([flow, runs]).pipe(
        Effect.provide(Layer.succeed(SkeinConfig.SkeinConfig, config)),
        Effect.timeoutFail({
          duration: "60 seconds",
          onTimeout: () => new Error("runAll was still running 60 s after its start: the colliding transactional ids were accepted")
        }),
        Effect.exit
      )
      assert.isTrue(Exit.isFailure(exit), "runAll failed")
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      assert.instanceOf(error, SkeinError.ConfigurationError, String(error))
      const message = error instanceof Error ? error.message : ""
      assert.include(message, `${applicationId}-orders-runs-0`)
      assert.include(message, `workflow "orders"`)
      assert.include(message, `transformer "orders-runs"`)
      assert.include(message, "Rename")
      process.stderr.write(`[transactional-id-collision] ${message}\n`)
    }))
})
