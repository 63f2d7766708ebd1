/**
 * App under test: a three-step durable workflow per order (test/workflow/kill.test.ts).
 *
 *   node --import tsx test/apps/workflow.ts
 *
 * with SKEIN_APPLICATION_ID, KAFKA_BROKERS, CHAOS_INPUT_TOPIC, CHAOS_OUTPUT_TOPIC and
 * - WORKFLOW_LOG: a file each body start and step appends a line to (`body o1`, `step1 o1`),
 *   written synchronously so that a SIGKILL right after keeps it;
 * - WORKFLOW_KILL: where the process SIGKILLs itself, once per order (a marker file next to
 *   the log): `between-2-3` (after step 2 is stored, before step 3), `in-3` (inside step 3,
 *   before its result is stored), `after-complete` (the run is complete, its batch not
 *   committed); unset: never;
 * - WORKFLOW_DURABLE=false: no run store.
 *
 * The payload has a `Date` and a `NumberFromString` field; the output is computed from both,
 * so a resumed run that decoded them differently would emit a different value.
 */
import { Activity, Workflow } from "@effect/workflow"
import { Effect, Schema } from "effect"
import * as fs from "node:fs"
import { KafkaWorkflow, Topic } from "../../src/index.ts"
import { runApp } from "./main.ts"

const Order = Workflow.make({
  name: "order",
  payload: { order: Schema.String, placed: Schema.Date, quantity: Schema.NumberFromString },
  success: Schema.String,
  idempotencyKey: (p) => p.order
})

const logFile = process.env["WORKFLOW_LOG"] ?? ""
const kill = process.env["WORKFLOW_KILL"] ?? ""
const durable = process.env["WORKFLOW_DURABLE"] !== "false"

const note = (line: string) => fs.appendFileSync(logFile, `${line}\n`)

/** SIGKILLs this process at `point` the first time an order gets there. */
const killOnce = (point: string, order: string) => {
  if (kill !== point) return
  const marker = `${logFile}.${point}.${order}`
  if (fs.existsSync(marker)) return
  fs.writeFileSync(marker, "killed")
  note(`kill ${point} ${order}`)
  process.kill(process.pid, "SIGKILL")
}

const step = (name: string, order: string, value: string, before?: () => void) =>
  Activity.make({
    name,
    success: Schema.String,
    execute: Effect.sync(() => {
      note(`${name} ${order}`)
      before?.()
      return value
    })
  })

runApp((names) => {
  const Orders = KafkaWorkflow.topic(names.input, Order)
  const Done = Topic.make({ name: names.output, key: Schema.String, value: Schema.String })
  return KafkaWorkflow.make({
    name: "orders",
    input: Orders,
    workflow: Order,
    durable,
    execute: (payload) =>
      Effect.gen(function*() {
        note(`body ${payload.order}`)
        const a = yield* step("step1", payload.order, `${payload.placed.toISOString()}`)
        const b = yield* step("step2", payload.order, `${payload.quantity * 2}`)
        killOnce("between-2-3", payload.order)
        const c = yield* step("step3", payload.order, `${a}/${b}`, () => killOnce("in-3", payload.order))
        return `${payload.order}:${c}`
      }),
    emit: (result, record) => {
      killOnce("after-complete", record.value.order)
      return [Topic.record(Done, record.key, result)]
    }
  })
})
