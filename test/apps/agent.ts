/**
 * App under test: an agent per order with a scripted model (test/agent/kill.test.ts).
 *
 *   node --import tsx test/apps/agent.ts
 *
 * with SKEIN_APPLICATION_ID, KAFKA_BROKERS, CHAOS_INPUT_TOPIC, CHAOS_OUTPUT_TOPIC and
 * - AGENT_LOG: a file each model call and tool call appends a line to, synchronously (so a
 *   SIGKILL right after keeps it): `prompt o1 turn-2 <prompt as JSON>` when a call arrives,
 *   `llm o1 turn-2` once it is made, `tool o1 <pid>` when the tool runs;
 * - AGENT_KILL: where the process SIGKILLs itself, once per order (a marker file next to the
 *   log): `before-turn-2` (turn 1's tool call has run and its result is stored; the call of
 *   turn 2 arrives at the model and the process dies before it is made), `after-complete`
 *   (the run is complete, its batch not committed); unset: never.
 *
 * The conversation: turn 1 calls `Reserve` with the order and its quantity (a
 * `NumberFromString` parameter, sent as text as a model does); the tool answers with the
 * quantity and the pid of the process that ran it; turn 2 answers from the tool result it
 * finds in its prompt. A tool that ran again after a restart would show another pid.
 */
import { Tool, Toolkit } from "@effect/ai"
import { Effect, Layer, Schema } from "effect"
import * as fs from "node:fs"
import { KafkaAgent, Topic } from "../../src/index.ts"
import * as ScriptedModel from "../helpers/scriptedModel.ts"
import { runAppWith } from "./main.ts"

const Order = Schema.Struct({ order: Schema.String, quantity: Schema.NumberFromString })

const Reserve = Tool.make("Reserve", {
  description: "Reserves stock for an order",
  parameters: { order: Schema.String, quantity: Schema.NumberFromString },
  success: Schema.Struct({ reserved: Schema.Number, pid: Schema.Number })
})
const Tools = Toolkit.make(Reserve)

const logFile = process.env["AGENT_LOG"] ?? ""
const kill = process.env["AGENT_KILL"] ?? ""
const note = (line: string) => ScriptedModel.appendLine(logFile, line)

/** SIGKILLs this process at `point` the first time an order gets there. */
const killOnce = (point: string, order: string) => {
  if (kill !== point) return
  const marker = `${logFile}.${point}.${order}`
  if (fs.existsSync(marker)) return
  fs.writeFileSync(marker, "killed")
  note(`kill ${point} ${order}`)
  process.kill(process.pid, "SIGKILL")
}

/** The order and quantity of the prompt's user message ("order o1, quantity 3"). */
const orderOf = (call: ScriptedModel.Call) => {
  const [, order = "", quantity = ""] = /^order (\S+), quantity (\S+)$/.exec(ScriptedModel.userText(call.prompt)) ?? []
  return { order, quantity }
}

const model = ScriptedModel.make(
  (call) => {
    const { order, quantity } = orderOf(call)
    if (call.turn === 1) return [ScriptedModel.toolCall(`call-${order}`, "Reserve", { order, quantity })]
    const [reserved] = ScriptedModel.toolResults(call.prompt)
    return [ScriptedModel.text(`${order}: ${JSON.stringify(reserved?.result)}`)]
  },
  {
    onCall: (call) => {
      const { order } = orderOf(call)
      note(`prompt ${order} turn-${call.turn} ${ScriptedModel.promptText(call.prompt)}`)
      if (call.turn === 2) killOnce("before-turn-2", order)
      note(`llm ${order} turn-${call.turn}`)
    }
  }
)

const handlers = Tools.toLayer({
  Reserve: ({ order, quantity }) =>
    Effect.sync(() => {
      note(`tool ${order} ${process.pid}`)
      return { reserved: quantity, pid: process.pid }
    })
})

runAppWith((names) => {
  const Orders = KafkaAgent.topic(names.input, Order)
  const Answers = Topic.make({ name: names.output, key: Schema.String, value: Schema.String })
  return KafkaAgent.make({
    name: "orders",
    input: Orders,
    payload: Order,
    system: "You reserve stock for orders.",
    prompt: (payload) => `order ${payload.order}, quantity ${payload.quantity}`,
    toolkit: Tools,
    maxTurns: 4,
    emit: (answer, record) => {
      killOnce("after-complete", record.value.order)
      return [Topic.record(Answers, record.key, `${answer.text} turns=${answer.turns} tools=${answer.toolCalls}`)]
    }
  })
}, Layer.merge(model.layer, handlers))
