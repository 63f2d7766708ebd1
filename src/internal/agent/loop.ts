/**
 * The durable loop of one agent run (`KafkaAgent`): each LLM turn and each
 * tool call is an `@effect/workflow` activity, so the engine of
 * `KafkaWorkflow` stores its success before the loop goes on and a resumed run
 * reads it back instead of calling the model or the tool again.
 *
 * - A turn stores the model's response as the loop uses it: its text and its
 *   tool calls (id, tool name, parameters as the encoded JSON the model sent).
 *   A tool call stores its encoded result (a failure too, for a tool whose
 *   `failureMode` is `"return"`: the model sees it).
 * - The prompt of turn n is rebuilt from what turns 1..n-1 and their tool
 *   calls stored, never from live values: a stored value is decoded from its
 *   JSON on the first run as on a replay, so a resumed run sends the model the
 *   same prompt the first one would have.
 * - Activity names are `turn-{n}` and `tool-{n}-{i}` (the i-th call of turn
 *   n, from 0): unique in a run, and fixed by the stored turn.
 * - The loop ends at the first turn without tool calls (its text is the
 *   answer). A turn `maxTurns` that still calls tools fails the run with
 *   `AgentMaxTurnsExceeded`; its tool calls are not run.
 *
 * Tool calls the provider executed itself (`providerExecuted`) are not kept:
 * the loop only runs and replays the toolkit's own tools.
 *
 * @internal
 */
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import * as Response from "@effect/ai/Response"
import type * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Activity from "@effect/workflow/Activity"
import type * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import { Effect, Schema } from "effect"
import { AgentMaxTurnsExceeded, AgentToolFailed } from "../../SkeinError.ts"

/** A JSON value: text when stored, the parsed value in the loop (the same on a replay as on the first run). */
const Json = Schema.parseJson()

/** A tool call of a turn, as the model made it. */
export const ToolCall = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  /** The parameters as the model sent them (encoded, before the tool's schema decodes them). */
  params: Json
})

/** What a turn stores: the response's text and its tool calls. */
export const Turn = Schema.Struct({ text: Schema.String, toolCalls: Schema.Array(ToolCall) })

/** What a tool call stores: the tool's encoded result (its success, or its failure for failureMode "return"). */
export const ToolResult = Schema.Struct({ isFailure: Schema.Boolean, result: Json })

/** A run's outcome: the last turn's text, how many turns it took, how many tool calls ran. */
export const Answer = Schema.Struct({
  text: Schema.String,
  turns: Schema.Number,
  toolCalls: Schema.Number
})

/** The errors an agent run can fail with. */
export type AgentError = AiError.AiError | AgentMaxTurnsExceeded | AgentToolFailed

/**
 * Errors pass through the activities as they are: failures are never stored,
 * so they need no encoding, and a rule or a log sees the original (its cause
 * intact).
 */
const TurnError = Schema.declare(AiError.isAiError, { identifier: "AiError" })
const ToolError = Schema.declare(
  (u: unknown): u is AiError.AiError | AgentToolFailed => AiError.isAiError(u) || u instanceof AgentToolFailed,
  { identifier: "AgentToolError" }
)

/** What the loop needs of an agent. */
export interface Agent<A, Tools extends Record<string, Tool.Any>> {
  readonly name: string
  readonly toolkit: Toolkit.Toolkit<Tools>
  readonly prompt: (payload: A) => string | Prompt.Prompt
  readonly system: string | undefined
  readonly maxTurns: number
}

/** The record a run is for. */
export interface Source<A> {
  readonly topic: string
  readonly partition: number
  readonly offset: number
  readonly value: A
}

/** What the toolkit's tools need: their handlers and the services those use. */
export type ToolContext<Tools extends Record<string, Tool.Any>> =
  | Tool.HandlersFor<Tools>
  | Tool.Requirements<Tools[keyof Tools]>

/** Runs the loop for `source` (the body of the agent's workflow). */
export const run = <A, Tools extends Record<string, Tool.Any>>(
  agent: Agent<A, Tools>,
  source: Source<A>,
  executionId: string
): Effect.Effect<
  typeof Answer.Type,
  AgentError,
  | LanguageModel.LanguageModel
  | ToolContext<Tools>
  | WorkflowEngine.WorkflowEngine
  | WorkflowEngine.WorkflowInstance
> =>
  Effect.gen(function*() {
    if (!(Number.isInteger(agent.maxTurns) && agent.maxTurns >= 1)) {
      return yield* Effect.dieMessage(`KafkaAgent ${agent.name}: maxTurns must be a whole number of at least 1, got ${agent.maxTurns}`)
    }
    const toolkit = yield* agent.toolkit
    const first = Prompt.make(agent.prompt(source.value))
    const messages: Array<Prompt.Message> = [...(agent.system === undefined ? first : Prompt.setSystem(first, agent.system)).content]
    let toolCalls = 0
    for (let turn = 1;; turn++) {
      const saved = yield* Activity.make({
        name: `turn-${turn}`,
        success: Turn,
        error: TurnError,
        execute: generate(toolkit, Prompt.fromMessages([...messages]))
      })
      messages.push(assistantMessage(saved))
      if (saved.toolCalls.length === 0) return { text: saved.text, turns: turn, toolCalls }
      if (turn >= agent.maxTurns) {
        return yield* new AgentMaxTurnsExceeded({
          agent: agent.name,
          maxTurns: agent.maxTurns,
          executionId,
          topic: source.topic,
          partition: source.partition,
          offset: source.offset
        })
      }
      const results: Array<Prompt.ToolResultPart> = []
      for (const [index, call] of saved.toolCalls.entries()) {
        const result = yield* Activity.make({
          name: `tool-${turn}-${index}`,
          success: ToolResult,
          error: ToolError,
          execute: callTool(toolkit, call).pipe(
            Effect.mapError((cause) =>
              AiError.isAiError(cause) ? cause : new AgentToolFailed({
                agent: agent.name,
                tool: call.name,
                callId: call.id,
                turn,
                topic: source.topic,
                partition: source.partition,
                offset: source.offset,
                cause
              })
            )
          )
        })
        toolCalls++
        results.push(Prompt.makePart("tool-result", {
          id: call.id,
          name: call.name,
          isFailure: result.isFailure,
          result: result.result,
          providerExecuted: false
        }))
      }
      messages.push(Prompt.makeMessage("tool", { content: results }))
    }
  })

/** One LLM turn: the model's response to `prompt`, its tool calls not run. */
const generate = <Tools extends Record<string, Tool.Any>>(toolkit: Toolkit.WithHandler<Tools>, prompt: Prompt.Prompt) =>
  LanguageModel.generateText({ prompt, toolkit, disableToolCallResolution: true }).pipe(
    // Back to the encoded parts the model sent: tool parameters as JSON, whatever the tools' schemas decode them to.
    Effect.flatMap((response) => Schema.encode(Schema.Array(Response.Part(toolkit)))(response.content)),
    Effect.catchTag("ParseError", (error) =>
      Effect.fail(AiError.MalformedOutput.fromParseError({ module: "KafkaAgent", method: "turn", error }))),
    Effect.map((parts): typeof Turn.Type => {
      const text: Array<string> = []
      const toolCalls: Array<typeof ToolCall.Type> = []
      for (const part of parts) {
        if (part.type === "text") text.push(part.text)
        if (part.type === "tool-call" && part.providerExecuted !== true) {
          toolCalls.push({ id: part.id, name: part.name, params: part.params })
        }
      }
      return { text: text.join(""), toolCalls }
    })
  )

/** The assistant message of a stored turn: its text and its tool calls. */
const assistantMessage = (turn: typeof Turn.Type): Prompt.AssistantMessage =>
  Prompt.makeMessage("assistant", {
    content: [
      ...(turn.text === "" ? [] : [Prompt.makePart("text", { text: turn.text })]),
      ...turn.toolCalls.map((call) =>
        Prompt.makePart("tool-call", { id: call.id, name: call.name, params: call.params, providerExecuted: false })
      )
    ]
  })

const isToolOf = <Tools extends Record<string, Tool.Any>>(
  toolkit: Toolkit.WithHandler<Tools>,
  name: string
): name is Extract<keyof Tools, string> => Object.hasOwn(toolkit.tools, name)

/**
 * Runs a stored tool call with the toolkit's handler; its result encoded for
 * the run store (a failure of a `failureMode: "return"` tool is a result too).
 */
const callTool = <Tools extends Record<string, Tool.Any>>(
  toolkit: Toolkit.WithHandler<Tools>,
  call: typeof ToolCall.Type
): Effect.Effect<typeof ToolResult.Type, unknown, Tool.Requirements<Tools[keyof Tools]>> => {
  const name = call.name
  if (!isToolOf(toolkit, name)) {
    const names = Object.keys(toolkit.tools).join(", ")
    return Effect.fail(
      new AiError.MalformedOutput({
        module: "KafkaAgent",
        method: "tool",
        description: `The model called tool '${name}', which the toolkit does not have (it has: ${names})`
      })
    )
  }
  // `handle` decodes the parameters itself, from the encoded form a model sends (as
  // LanguageModel's own tool resolution passes them); its type names the decoded form.
  const params = call.params as Tool.Parameters<Tools[typeof name]>
  return Effect.map(toolkit.handle(name, params), (handled) => ({
    isFailure: handled.isFailure,
    result: handled.encodedResult ?? null
  }))
}
