/**
 * A scripted `LanguageModel` for agent tests: no provider, no network. Each
 * call is answered by the script from the prompt it was sent (its turn is 1 +
 * the assistant messages already in it), with text and tool calls in the
 * encoded form a provider returns (tool parameters as JSON), or fails with an
 * `AiError`. Every call is recorded (its turn and prompt) in memory; a child
 * process counts its calls in a file instead (`appendLine`, synchronous, so a
 * SIGKILL right after keeps the line).
 */
import { AiError, LanguageModel } from "@effect/ai"
import type { Prompt, Response } from "@effect/ai"
import { Effect, Layer, Stream } from "effect"
import * as fs from "node:fs"

/** What a scripted reply may hold: text and tool calls (a finish part is added). */
export type ReplyPart = Response.TextPartEncoded | Response.ToolCallPartEncoded

/** A call the model received. */
export interface Call {
  /** 1 + the assistant messages in the prompt: the agent's turn. */
  readonly turn: number
  readonly prompt: Prompt.Prompt
}

/** The model's reply to a call: its parts, or an error to fail the call with. */
export type Reply = ReadonlyArray<ReplyPart> | AiError.AiError

export const text = (text: string): Response.TextPartEncoded => ({ type: "text", text })

export const toolCall = (id: string, name: string, params: unknown): Response.ToolCallPartEncoded => ({
  type: "tool-call",
  id,
  name,
  params
})

/** A failed call, as a provider's outage would be. */
export const unavailable = (description: string): AiError.AiError =>
  new AiError.UnknownError({ module: "ScriptedModel", method: "generateText", description })

export const turnOf = (prompt: Prompt.Prompt): number =>
  1 + prompt.content.filter((message) => message.role === "assistant").length

/** The text of the prompt's user messages, joined. */
export const userText = (prompt: Prompt.Prompt): string =>
  prompt.content.flatMap((message) =>
    message.role === "user" ? message.content.flatMap((part) => (part.type === "text" ? [part.text] : [])) : []
  ).join("\n")

/** The results of the prompt's tool calls, in order (the encoded results the agent stored). */
export const toolResults = (prompt: Prompt.Prompt): ReadonlyArray<{ readonly name: string; readonly result: unknown; readonly isFailure: boolean }> =>
  prompt.content.flatMap((message) =>
    message.role === "tool" ? message.content.map((part) => ({ name: part.name, result: part.result, isFailure: part.isFailure })) : []
  )

/** The prompt as JSON text, to compare the prompts of two calls (or two processes). */
export const promptText = (prompt: Prompt.Prompt): string =>
  JSON.stringify(prompt.content.map((message) => ({ role: message.role, content: message.content })))

export interface ScriptedModel {
  /** The calls so far, in order. */
  readonly calls: ReadonlyArray<Call>
  readonly layer: Layer.Layer<LanguageModel.LanguageModel>
}

const finish = (parts: ReadonlyArray<ReplyPart>): Response.FinishPartEncoded => ({
  type: "finish",
  reason: parts.some((part) => part.type === "tool-call") ? "tool-calls" : "stop",
  usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 }
})

/** A model that answers each call with `script(call)`; `onCall` runs first (to log, or to crash the process). */
export const make = (
  script: (call: Call) => Reply,
  options: { readonly onCall?: (call: Call) => void } = {}
): ScriptedModel => {
  const calls: Array<Call> = []
  const reply = (prompt: Prompt.Prompt) =>
    Effect.suspend(() => {
      const call: Call = { turn: turnOf(prompt), prompt }
      options.onCall?.(call)
      calls.push(call)
      const answer = script(call)
      return AiError.isAiError(answer) ? Effect.fail(answer) : Effect.succeed(answer)
    })
  const layer = Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: (request) => Effect.map(reply(request.prompt), (parts) => [...parts, finish(parts)]),
      streamText: (request) =>
        Stream.unwrap(Effect.map(reply(request.prompt), (parts) =>
          Stream.fromIterable<Response.StreamPartEncoded>([
            ...parts.flatMap((part, i): ReadonlyArray<Response.StreamPartEncoded> =>
              part.type === "text"
                ? [
                  { type: "text-start", id: `t${i}` },
                  { type: "text-delta", id: `t${i}`, delta: part.text },
                  { type: "text-end", id: `t${i}` }
                ]
                : [part]
            ),
            finish(parts)
          ])))
    })
  )
  return { calls, layer }
}

/** Appends a line to `file` synchronously: a SIGKILL right after keeps it. */
export const appendLine = (file: string, line: string): void => fs.appendFileSync(file, `${line}\n`)

/** The lines of `file` (empty when it is empty). */
export const readLines = (file: string): ReadonlyArray<string> => {
  const content = fs.readFileSync(file, "utf8").trim()
  return content === "" ? [] : content.split("\n")
}
