/**
 * LLM agents on Kafka: a tool-calling loop of `@effect/ai` as the handler of
 * an input topic, one run per record, on the contract of `KafkaWorkflow`.
 *
 * - **Durable steps** (`durable: true`, the default): each LLM turn is a
 *   step whose response is stored (its text and tool calls), and each tool
 *   call is a step whose result is stored, each before the loop goes on. A
 *   run cut short (a crash, a rebalance, a retried error) resumes from its
 *   stored turns and tool calls: none of them calls the model or the tool
 *   again, and the prompt of the next turn is rebuilt from what they stored,
 *   so the model gets the prompt the first run would have sent.
 * - **A completed run is not re-run**: a redelivered record whose run
 *   completed emits the stored answer, without an LLM call or a tool call.
 *   `durable: false` keeps nothing: every retry and redelivery runs the whole
 *   loop again.
 * - **Output delivery** follows the runner's `processingGuarantee`, as for
 *   any transformer: exactly-once by default (outputs and offsets in one
 *   transaction).
 * - **`maxTurns`** bounds the LLM calls of a run: a turn `maxTurns` that still
 *   calls tools fails the record with `SkeinError.AgentMaxTurnsExceeded`.
 * - **Handler errors** go through the transformer's error rules (retry, then
 *   `dlq`, `skip` or `fail`): the model's `AiError`s (tagged
 *   `HttpRequestError`, `HttpResponseError`, `MalformedInput`,
 *   `MalformedOutput`, `UnknownError`), `AgentMaxTurnsExceeded`,
 *   `AgentToolFailed` (a tool with `failureMode: "error"` failed; one with
 *   `"return"` shows the model its failure instead), and the run store's
 *   errors as for `KafkaWorkflow`.
 *
 * The language model (`LanguageModel.LanguageModel`, e.g.
 * `OpenAiLanguageModel.layer` of `@effect/ai-openai`) and the toolkit's
 * handlers (`toolkit.toLayer(...)`) are requirements of the transformer: the
 * program that runs it provides them. In tests, a scripted
 * `LanguageModel.make({ generateText, streamText })` stands in for a
 * provider.
 *
 * A stored turn keeps the response's text and the tool calls of the
 * toolkit's tools; reasoning parts, and tool calls a provider executes itself
 * (provider-defined tools), are not stored and do not reach the next prompt.
 *
 * Code outside the steps re-runs on every resume: `prompt` must be pure. A
 * run's identity is the record's position (topic, partition, offset) unless
 * `idempotencyKey` names another (e.g. a request id, so that a record
 * produced twice runs once on its partition).
 *
 * @since 0.3.0
 */
// Subpath imports: the package indexes re-export MCP and WorkflowProxy, whose types need @effect/rpc.
import * as AiError from "@effect/ai/AiError"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import type * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Workflow from "@effect/workflow/Workflow"
import { Schema } from "effect"
import type { Duration } from "effect"
import * as Loop from "./internal/agent/loop.ts"
import { defaultStateKey } from "./internal/runtime/StateKeyCheck.ts"
import * as KafkaWorkflow from "./KafkaWorkflow.ts"
import { AgentMaxTurnsExceeded, AgentToolFailed } from "./SkeinError.ts"
import * as Topic from "./Topic.ts"
import type { InputRecord, Rule, Transformer } from "./Transformer.ts"

/**
 * What a completed run produced: the text of its last turn (the one without
 * tool calls), how many turns (LLM calls) it took and how many tool calls ran.
 * `emit` receives it as stored, so a redelivery emits the same records.
 *
 * @example
 * ```ts
 * import { KafkaAgent } from "skein"
 *
 * const describe = (answer: KafkaAgent.Answer): string =>
 *   `${answer.text} (${answer.turns} turns, ${answer.toolCalls} tool calls)`
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export interface Answer extends Schema.Schema.Type<typeof Loop.Answer> {}

/**
 * The schema of `Answer` (e.g. to emit the whole answer as JSON:
 * `Topic.json(KafkaAgent.Answer)`).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
import type { Duration } from "effect"
 * import { KafkaAgent, Topic } from "skein"
 *
 * const Answers = Topic.make({ name: "answers", key: Schema.String, value: Topic.json(KafkaAgent.Answer) })
 * ```
 *
 * @since 0.3.0
 * @category schemas
 */
export const Answer: Schema.Schema<Answer, Schema.Schema.Encoded<typeof Loop.Answer>> = Loop.Answer

/**
 * The errors of an agent's run: the model's, a run out of turns, a failed
 * tool.
 *
 * @example
 * ```ts
 * import { KafkaAgent } from "skein"
 *
 * const retryable = (error: KafkaAgent.AgentError): boolean =>
 *   error._tag === "HttpRequestError" || error._tag === "AgentToolFailed"
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export type AgentError = Loop.AgentError

/**
 * The errors of an agent's Kafka handler that its error rules see: its
 * run's (`AgentError`) and a suspended run (`WorkflowSuspended`). The run
 * store's errors are the runtime's (`Transformer.RuntimeError`): no rule sees
 * them. Error rules are written against it.
 *
 * @example
 * ```ts
 * import { Schedule } from "effect"
 * import { ErrorRule, type KafkaAgent, type Transformer } from "skein"
 *
 * const rules: ReadonlyArray<Transformer.Rule<KafkaAgent.HandlerError>> = [
 *   ErrorRule.tagged("HttpResponseError", { retry: Schedule.exponential("1 second").pipe(Schedule.intersect(Schedule.recurs(3))), then: "dlq" }),
 *   ErrorRule.tagged("AgentMaxTurnsExceeded", { then: "dlq" })
 * ]
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export type HandlerError = KafkaWorkflow.HandlerError<AgentError>

/**
 * What an agent needs from the program that runs it: a language model, and
 * the toolkit's handlers with what they use.
 *
 * @example
 * ```ts
 * import type { LanguageModel } from "@effect/ai"
 * import type { KafkaAgent } from "skein"
 *
 * // LanguageModel.LanguageModel | the Tool.Handler of each tool of OrderTools
 * type Needs = KafkaAgent.Requirements<typeof OrderTools.tools>
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export type Requirements<Tools extends Record<string, Tool.Any>> = LanguageModel.LanguageModel | Loop.ToolContext<Tools>

/** Typing only: the engine never encodes a run's failure (failures are never stored). */
const AgentErrorSchema = Schema.declare(
  (u: unknown): u is AgentError => AiError.isAiError(u) || u instanceof AgentMaxTurnsExceeded || u instanceof AgentToolFailed,
  { identifier: "AgentError" }
)

/**
 * A topic whose values are an agent's payloads, as JSON decoded through
 * `payload` (pass the same schema to `make`). Keys are text.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
import type { Duration } from "effect"
 * import { KafkaAgent } from "skein"
 *
 * const Question = Schema.Struct({ customer: Schema.String, text: Schema.String })
 * const Questions = KafkaAgent.topic("questions", Question)
 * ```
 *
 * @since 0.3.0
 * @category constructors
 */
export const topic = <A, I>(name: string, payload: Schema.Schema<A, I>): Topic.Topic<string, A> =>
  Topic.make({ name, key: Schema.String, value: Topic.json(payload) })

/**
 * Declares an agent as the handler of `input`: per record, the model is
 * called with `prompt(payload)` (after `system`, if given) and the toolkit's
 * tools; each tool call it makes runs with the toolkit's handler and its
 * result goes back to the model, until a turn answers without tool calls or
 * `maxTurns` turns have been made. `emit` turns the answer into records.
 *
 * @example
 * ```ts
 * import { Tool, Toolkit } from "@effect/ai"
 * import { Effect, Schema } from "effect"
 * import { ErrorRule, KafkaAgent, Runner, SkeinConfig, Topic } from "skein"
 *
 * const Question = Schema.Struct({ order: Schema.String, text: Schema.String })
 * const Questions = KafkaAgent.topic("questions", Question)
 * const Replies = Topic.make({ name: "replies", key: Schema.String, value: Schema.String })
 *
 * const OrderStatus = Tool.make("OrderStatus", {
 *   description: "The shipping status of an order",
 *   parameters: { order: Schema.String },
 *   success: Schema.String
 * })
 * const OrderTools = Toolkit.make(OrderStatus)
 *
 * const Support = KafkaAgent.make({
 *   name: "support",
 *   input: Questions,
 *   payload: Question,
 *   system: "You answer customers' questions about their orders. Be brief.",
 *   prompt: (q) => `Order ${q.order}: ${q.text}`,
 *   toolkit: OrderTools,
 *   maxTurns: 4,
 *   emit: (answer, record) => [Topic.record(Replies, record.key, answer.text)],
 *   rules: [ErrorRule.tagged("AgentMaxTurnsExceeded", { then: "dlq" })]
 * })
 *
 * const Handlers = OrderTools.toLayer({ OrderStatus: ({ order }) => Effect.succeed(`${order}: shipped`) })
 *
 * Runner.run(Support).pipe(
 *   Effect.provide([Handlers, Model, SkeinConfig.layerConfig()]), // Model: a LanguageModel layer
 *   Runner.runMain
 * )
 * ```
 *
 * @since 0.3.0
 * @category constructors
 */
export const make = <A, I, Tools extends Record<string, Tool.Any>>(options: {
  readonly name: string
  readonly input: Topic.Topic<string, A>
  /** The schema of `input`'s values (what `topic` was made with). */
  readonly payload: Schema.Schema<A, I>
  /** The user message of the first turn (or a whole prompt); pure: it re-runs on every resume. */
  readonly prompt: (payload: A) => string | Prompt.Prompt
  /** The system message (replaces one `prompt` gives). */
  readonly system?: string
  readonly toolkit: Toolkit.Toolkit<Tools>
  /** The most LLM turns a run makes (a whole number, at least 1). */
  readonly maxTurns: number
  /** The records a completed run produces (its answer as read back from the run store). */
  readonly emit: (answer: Answer, record: InputRecord<string, A>) => ReadonlyArray<Topic.OutputRecord>
  /** The run's identity on its partition (default: `{topic}/{partition}/{offset}`). */
  readonly idempotencyKey?: (record: InputRecord<string, A>) => string
  /** Store turns and tool calls (default `true`); `false` re-runs the whole loop on every retry and redelivery. */
  readonly durable?: boolean
  /** How long a completed run is remembered (default 7 days), as `KafkaWorkflow.make`'s `retention`. */
  readonly retention?: Duration.DurationInput
  readonly rules?: ReadonlyArray<Rule<NoInfer<HandlerError>>>
}): Transformer<[Topic.Topic<string, A>], never, HandlerError, Requirements<Tools>> => {
  const agent: Loop.Agent<A, Tools> = {
    name: options.name,
    toolkit: options.toolkit,
    prompt: options.prompt,
    system: options.system,
    maxTurns: options.maxTurns
  }
  const idempotencyKey = options.idempotencyKey ??
    ((record: InputRecord<string, A>) => `${record.topic}/${record.partition}/${record.offset}`)
  // The workflow's payload carries the record's position, so that its run is named by it.
  const workflow = Workflow.make({
    name: options.name,
    payload: {
      key: Schema.String,
      topic: Schema.String,
      partition: Schema.Number,
      offset: Schema.Number,
      value: options.payload
    },
    success: Loop.Answer,
    error: AgentErrorSchema,
    idempotencyKey: (run) => run.key
  })
  const runs = KafkaWorkflow.make({
    name: options.name,
    // Types the records of the workflow's transformer only: the agent reads `options.input`.
    input: KafkaWorkflow.topic(options.input.name, workflow),
    workflow,
    execute: (run, executionId) => Loop.run(agent, run, executionId),
    emit: (answer, record) => options.emit(answer, { ...record, value: record.value.value }),
    durable: options.durable ?? true,
    ...(options.retention === undefined ? {} : { retention: options.retention }),
    rules: options.rules ?? []
  })
  // The workflow's record of an input record: its value carries the record's position.
  const asRun = (record: InputRecord<string, A>) => ({
    ...record,
    value: { key: idempotencyKey(record), topic: record.topic, partition: record.partition, offset: record.offset, value: record.value }
  })
  const runStore = runs.runStore
  const runOf = runStore?.runOf
  return {
    name: runs.name,
    inputs: [options.input],
    state: runs.state,
    stateKey: defaultStateKey,
    ...(runStore === undefined
      ? {}
      : {
        runStore: {
          retention: runStore.retention,
          runOf: runOf === undefined ? undefined : (record: InputRecord<string, A>) => runOf(asRun(record))
        }
      }),
    rules: runs.rules,
    transform: (record, state) => runs.transform(asRun(record), state)
  }
}
