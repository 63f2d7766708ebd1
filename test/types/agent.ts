/**
 * Type-level tests of `KafkaAgent`, checked by `npm run typecheck`: inline
 * rules for the agent's error tags compile and a rule for a tag it cannot fail
 * with does not; the transformer requires exactly a language model and the
 * toolkit's handlers (and what the tools themselves use), and the runner
 * program is complete once those are provided; the snippet of docs/agents.md
 * compiles to a complete program. Each `@ts-expect-error` fails
 * the type check if the line below it compiles.
 */
import type { LanguageModel } from "@effect/ai"
import { Tool, Toolkit } from "@effect/ai"
import { Context, Effect, Layer, Schedule, Schema } from "effect"
import type { ConfigError } from "effect"
import { ErrorRule, KafkaAgent, Runner, SkeinConfig, Topic } from "../../src/index.ts"
import type { SkeinError, Transformer } from "../../src/index.ts"

class Inventory extends Context.Tag("Inventory")<Inventory, { readonly stock: (sku: string) => number }>() {}

const Question = Schema.Struct({ order: Schema.String, quantity: Schema.NumberFromString })
const Questions = KafkaAgent.topic("questions", Question)
const Replies = Topic.make({ name: "replies", key: Schema.String, value: Schema.String })

const Stock = Tool.make("Stock", { parameters: { sku: Schema.String }, success: Schema.Number })
const Tools = Toolkit.make(Stock)

export const Support = KafkaAgent.make({
  name: "support",
  input: Questions,
  payload: Question,
  prompt: (q) => `order ${q.order}, ${q.quantity.toFixed(0)} items`,
  toolkit: Tools,
  maxTurns: 3,
  emit: (answer, record) => [Topic.record(Replies, record.key, `${record.value.order}: ${answer.text}`)],
  rules: [
    ErrorRule.tagged("AgentMaxTurnsExceeded", { then: "dlq" }),
    ErrorRule.tagged("HttpResponseError", { retry: Schedule.recurs(2), then: "dlq" }),
    ErrorRule.tagged("AgentToolFailed", { then: "skip" }),
    ErrorRule.tagged("WorkflowSuspended", { then: "fail" })
  ]
})

export const unknownTag = KafkaAgent.make({
  name: "unknown-tag",
  input: Questions,
  payload: Question,
  prompt: (q) => q.order,
  toolkit: Tools,
  maxTurns: 3,
  emit: () => [],
  // @ts-expect-error an agent never fails with "Unavailable"
  rules: [ErrorRule.tagged("Unavailable", { then: "dlq" })]
})

export const wrongPayload = KafkaAgent.make({
  name: "wrong-payload",
  input: Questions,
  // @ts-expect-error the payload schema must be the input topic's value schema
  payload: Schema.Struct({ order: Schema.Number }),
  prompt: () => "",
  toolkit: Tools,
  maxTurns: 3,
  emit: () => []
})

/** The agent needs a language model and the toolkit's handler; nothing else. */
type Needs = Transformer.ContextOf<typeof Support>
export const needs: [Needs] extends [LanguageModel.LanguageModel | Tool.Handler<"Stock">] ? true : false = true
export const needsModel: [LanguageModel.LanguageModel] extends [Needs] ? true : false = true

declare const Model: Layer.Layer<LanguageModel.LanguageModel>
const Handlers = Tools.toLayer(Effect.gen(function*() {
  const inventory = yield* Inventory
  return { Stock: ({ sku }) => Effect.succeed(inventory.stock(sku)) }
}))

/** Provided with a model and the handlers (which need Inventory), the run needs nothing else. */
export const program: Effect.Effect<never, SkeinError.RunnerError | KafkaAgent.HandlerError> = Runner.run(Support).pipe(
  Effect.provide(Layer.mergeAll(Model, Handlers, SkeinConfig.layer({ applicationId: "a", brokers: ["localhost:9092"] }))),
  Effect.provide(Layer.succeed(Inventory, { stock: () => 1 }))
)

// @ts-expect-error without the toolkit's handlers the run is not complete
export const missingHandlers: Effect.Effect<never, unknown> = Runner.run(Support).pipe(
  Effect.provide(Layer.merge(Model, SkeinConfig.layer({ applicationId: "a", brokers: ["localhost:9092"] })))
)

/** The snippet of docs/agents.md, verbatim apart from `Model` (declared above) and `Runner.runMain`. */
export const readme = () => {
  const Question = Schema.Struct({ order: Schema.String, text: Schema.String })
  const Questions = KafkaAgent.topic("questions", Question) // JSON values through the schema
  const Replies = Topic.make({ name: "replies", key: Schema.String, value: Schema.String })

  const OrderStatus = Tool.make("OrderStatus", { parameters: { order: Schema.String }, success: Schema.String })
  const OrderTools = Toolkit.make(OrderStatus)

  const Support = KafkaAgent.make({
    name: "support",
    input: Questions,
    payload: Question,
    system: "You answer questions about orders.",
    prompt: (q) => `Order ${q.order}: ${q.text}`, // pure: it re-runs on every resume
    toolkit: OrderTools,
    maxTurns: 4,
    emit: (answer, record) => [Topic.record(Replies, record.key, answer.text)],
    rules: [ErrorRule.tagged("AgentMaxTurnsExceeded", { then: "dlq" })]
  })

  const Handlers = OrderTools.toLayer({ OrderStatus: ({ order }) => Effect.succeed(`${order}: shipped`) })

  const main = Runner.run(Support).pipe(
    Effect.provide([Handlers, Model]), // Model: a LanguageModel layer (see below)
    Effect.provide(SkeinConfig.layerConfig())
  )
  /** Complete: nothing left to provide, and the errors are the agent's and the runner's. */
  const complete: Effect.Effect<never, SkeinError.RunnerError | KafkaAgent.HandlerError | ConfigError.ConfigError, never> = main
  return complete
}
