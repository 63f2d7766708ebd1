/**
 * maxTurns on the real broker, in process: a run whose model keeps calling tools fails its
 * record with AgentMaxTurnsExceeded after maxTurns LLM calls. With a "dlq" rule and a dead
 * letter topic the record goes there and the next record is processed; without a rule the run
 * ends with the typed error and nothing past the record commits.
 */
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Layer, Option, Schema } from "effect"
import type { Context } from "effect"
import { ErrorRule, KafkaAgent, SkeinError, Topic } from "../../src/index.ts"
import type { Transformer } from "../../src/index.ts"
import {
  caughtUp,
  createTopics,
  eventually,
  groupOffsets,
  produce,
  readCommitted,
  startInstance,
  unique
} from "../helpers/kafka.ts"
import * as ScriptedModel from "../helpers/scriptedModel.ts"

const Ask = Schema.Struct({ id: Schema.String, text: Schema.String })

const Search = Tool.make("Search", { parameters: { query: Schema.String }, success: Schema.String })
const Tools = Toolkit.make(Search)

/** "loop" questions get a tool call on every turn; others are answered at once. */
const script = (call: ScriptedModel.Call): ScriptedModel.Reply =>
  ScriptedModel.userText(call.prompt).startsWith("loop")
    ? [ScriptedModel.toolCall(`c${call.turn}`, "Search", { query: `try ${call.turn}` })]
    : [ScriptedModel.text(`answer to ${ScriptedModel.userText(call.prompt)}`)]

/** The transformer with its services provided from `context` (built once for the test). */
const provided = <I extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer.Transformer<I, S, E, R>,
  context: Context.Context<R>
): Transformer.Transformer<I, S, E, never> => {
  const { onTimer, ...rest } = transformer
  return {
    ...rest,
    transform: (record, state) => Effect.provide(transformer.transform(record, state), context),
    ...(onTimer === undefined ? {} : { onTimer: (timer, state) => Effect.provide(onTimer(timer, state), context) })
  }
}

const setup = (rules: ReadonlyArray<ErrorRule.ErrorRule<KafkaAgent.HandlerError>>) =>
  Effect.gen(function*() {
    const input = unique("agent-turns-in")
    const output = unique("agent-turns-out")
    const dlq = unique("agent-turns-dlq")
    yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }, { name: dlq, partitions: 1 }])
    const Asks = KafkaAgent.topic(input, Ask)
    const Answers = Topic.make({ name: output, key: Schema.String, value: Schema.String })
    const model = ScriptedModel.make(script)
    const searches: Array<string> = []
    const handlers = Tools.toLayer({ Search: ({ query }) => Effect.sync(() => void searches.push(query)).pipe(Effect.as("nothing")) })
    const context = yield* Layer.build(Layer.merge(model.layer, handlers))
    const agent = KafkaAgent.make({
      name: "asker",
      input: Asks,
      payload: Ask,
      prompt: (ask) => ask.text,
      toolkit: Tools,
      maxTurns: 2,
      emit: (answer, record) => [Topic.record(Answers, record.key, `${answer.text} (${answer.turns})`)],
      rules
    })
    yield* produce(input, [
      { key: "a", value: JSON.stringify({ id: "a", text: "loop forever" }) },
      { key: "b", value: JSON.stringify({ id: "b", text: "hello" }) }
    ])
    return { input, output, dlq, model, searches, transformer: provided(agent, context) }
  })

describe("KafkaAgent maxTurns", () => {
  it.scopedLive("exceeded: AgentMaxTurnsExceeded goes to the dead letter topic by its rule; the next record is processed", () =>
    Effect.gen(function*() {
      const { dlq, input, model, output, searches, transformer } = yield* setup([
        ErrorRule.tagged("AgentMaxTurnsExceeded", { then: "dlq" })
      ])
      const applicationId = unique("agent-turns-app")
      const instance = yield* startInstance(transformer, { applicationId, deadLetterTopic: dlq })
      yield* caughtUp(applicationId, input).pipe(
        Effect.tapError(() => Effect.flatMap(instance.exit, (exit) => Effect.logError("run ended", exit)))
      )
      assert.deepStrictEqual(
        model.calls.map((c) => `${ScriptedModel.userText(c.prompt)} ${c.turn}`),
        ["loop forever 1", "loop forever 2", "hello 1"],
        "maxTurns LLM calls for the looping record, then the next record"
      )
      assert.deepStrictEqual(searches, ["try 1"], "the last turn's tool call never ran")
      assert.strictEqual(instance.stats.deadLettered, 1)
      const dead = yield* readCommitted(dlq)
      assert.strictEqual(dead.length, 1)
      assert.strictEqual(dead[0]?.key, "a")
      assert.strictEqual(dead[0]?.headers["skein.source.offset"], "0")
      assert.include(dead[0]?.headers["skein.error"] ?? "", "AgentMaxTurnsExceeded")
      assert.include(dead[0]?.headers["skein.error"] ?? "", "Agent asker used all 2 turns")
      const answers = yield* readCommitted(output)
      assert.deepStrictEqual(answers.map((r) => [r.key, r.value]), [["b", "answer to hello (1)"]])
    }))

  it.scopedLive("exceeded without a rule: the run ends with AgentMaxTurnsExceeded; nothing past the record commits", () =>
    Effect.gen(function*() {
      const { input, model, output, transformer } = yield* setup([])
      const applicationId = unique("agent-turns-app")
      const instance = yield* startInstance(transformer, { applicationId })
      yield* eventually(Effect.map(instance.exit, Option.isSome), { what: "the run to fail" })
      const exit = yield* Fiber.await(instance.fiber)
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      assert.ok(error instanceof SkeinError.AgentMaxTurnsExceeded, String(error))
      assert.strictEqual(error.agent, "asker")
      assert.strictEqual(error.maxTurns, 2)
      assert.strictEqual(error.offset, 0)
      assert.strictEqual(model.calls.length, 2, "the next record never ran")
      assert.deepStrictEqual(yield* readCommitted(output), [])
      const committed = yield* groupOffsets(applicationId, input)
      assert.ok((committed.get(0) ?? -1) <= 0, `nothing past the record: ${JSON.stringify([...committed])}`)
    }))
})
