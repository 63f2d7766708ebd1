/**
 * The agent loop in memory (TestDriver, scripted model): turns and tool calls,
 * the prompt each turn gets, tool parameters through a transforming schema,
 * maxTurns, model and tool errors through the rules. The durable cases use
 * the driver's in-memory run store, so that a resumed or redelivered run is
 * checked without a broker; test/agent/kill.test.ts does the same across SIGKILLs.
 */
import { Tool, Toolkit } from "@effect/ai"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Schedule, Schema } from "effect"
import { ErrorRule, KafkaAgent, SkeinError, Topic } from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"
import * as ScriptedModel from "../helpers/scriptedModel.ts"

const Question = Schema.Struct({ order: Schema.String, quantity: Schema.NumberFromString })
const Questions = KafkaAgent.topic("questions", Question)
const Replies = Topic.make({ name: "replies", key: Schema.String, value: Topic.json(KafkaAgent.Answer) })

class OutOfStock extends Schema.TaggedError<OutOfStock>()("OutOfStock", { sku: Schema.String }) {}

/** Parameters through a transforming schema: the model sends `"3"`, the handler gets `3`. */
const Reserve = Tool.make("Reserve", {
  parameters: { sku: Schema.String, quantity: Schema.NumberFromString },
  success: Schema.Struct({ reserved: Schema.Number, by: Schema.String }),
  failure: OutOfStock
})
/** A tool whose failures go back to the model. */
const Lookup = Tool.make("Lookup", {
  parameters: { sku: Schema.String },
  success: Schema.Number,
  failure: OutOfStock,
  failureMode: "return"
})
const Tools = Toolkit.make(Reserve, Lookup)

/** The tools' calls, in order; "gone" is out of stock for both. */
const makeHandlers = () => {
  const calls: Array<string> = []
  const layer = Tools.toLayer({
    Reserve: ({ quantity, sku }) =>
      Effect.suspend(() => {
        calls.push(`Reserve ${sku} ${quantity} (${typeof quantity})`)
        return sku === "gone" ? Effect.fail(new OutOfStock({ sku })) : Effect.succeed({ reserved: quantity, by: "handler" })
      }),
    Lookup: ({ sku }) =>
      Effect.suspend(() => {
        calls.push(`Lookup ${sku}`)
        return sku === "gone" ? Effect.fail(new OutOfStock({ sku })) : Effect.succeed(7)
      })
  })
  return { calls, layer }
}

/** Turn 1 reserves `quantity` of the order's sku (as text, the way a model sends numbers in a string field); turn 2 answers from the result. */
const reserveThenAnswer = (call: ScriptedModel.Call): ScriptedModel.Reply => {
  const [order = "", quantity = ""] = ScriptedModel.userText(call.prompt).split(" ")
  if (call.turn === 1) return [ScriptedModel.text("Reserving."), ScriptedModel.toolCall("call-1", "Reserve", { sku: order, quantity })]
  const results = ScriptedModel.toolResults(call.prompt)
  return [ScriptedModel.text(`${order}: ${JSON.stringify(results.map((r) => r.result))}`)]
}

const agent = (options: {
  readonly maxTurns?: number
  readonly durable?: boolean
  readonly rules?: ReadonlyArray<ErrorRule.ErrorRule<KafkaAgent.HandlerError>>
  readonly idempotencyKey?: (record: { readonly key: string | null }) => string
}) =>
  KafkaAgent.make({
    name: "orders",
    input: Questions,
    payload: Question,
    system: "You reserve stock.",
    prompt: (q) => `${q.order} ${q.quantity}`,
    toolkit: Tools,
    maxTurns: options.maxTurns ?? 4,
    emit: (answer, record) => [Topic.record(Replies, record.key, answer)],
    ...(options.durable === undefined ? {} : { durable: options.durable }),
    ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }),
    rules: options.rules ?? []
  })

/** The run store entries a driver's task holds now: the keys of its run store topic, last write not a delete. */
const liveRunEntries = (driver: { readonly records: (topic: string) => Effect.Effect<ReadonlyArray<TestDriver.RawRecord>> }) =>
  Effect.map(driver.records("test-orders-runs"), (records) => {
    const live = new Map<string, boolean>()
    for (const r of records) live.set(r.key?.toString() ?? "", r.value !== null)
    return [...live].filter(([, present]) => present).map(([key]) => key)
  })

describe("KafkaAgent loop", () => {
  it.scoped("a tool call, then the answer: the tool's result is in the next prompt, after the stored turn", () =>
    Effect.gen(function*() {
      const model = ScriptedModel.make(reserveThenAnswer)
      const handlers = makeHandlers()
      const driver = yield* TestDriver.make(agent({}))
      yield* driver.pipe(Questions, "k1", { order: "o1", quantity: 3 }).pipe(Effect.provide([model.layer, handlers.layer]))
      const replies = yield* driver.outputs(Replies)
      assert.deepStrictEqual(replies.map((r) => r.value), [{ text: `o1: [{"reserved":3,"by":"handler"}]`, turns: 2, toolCalls: 1 }])
      assert.deepStrictEqual(handlers.calls, ["Reserve o1 3 (number)"], "the handler got the decoded parameters")
      assert.deepStrictEqual(model.calls.map((c) => c.turn), [1, 2])
      const second = model.calls[1]?.prompt.content.map((m) => m.role)
      assert.deepStrictEqual(second, ["system", "user", "assistant", "tool"])
      const assistant = model.calls[1]?.prompt.content[2]
      assert.deepStrictEqual(
        assistant?.role === "assistant" ? assistant.content.map((p) => p.type === "tool-call" ? [p.id, p.name, p.params] : [p.type]) : [],
        [["text"], ["call-1", "Reserve", { sku: "o1", quantity: "3" }]],
        "the stored call keeps the parameters as the model sent them"
      )
    }))

  it.scoped("a failure of a failureMode \"return\" tool goes back to the model as the call's result", () =>
    Effect.gen(function*() {
      const model = ScriptedModel.make((call) =>
        call.turn === 1
          ? [ScriptedModel.toolCall("a", "Lookup", { sku: "gone" }), ScriptedModel.toolCall("b", "Lookup", { sku: "x" })]
          : [ScriptedModel.text(JSON.stringify(ScriptedModel.toolResults(call.prompt)))]
      )
      const handlers = makeHandlers()
      const driver = yield* TestDriver.make(agent({}))
      yield* driver.pipe(Questions, "k1", { order: "o1", quantity: 1 }).pipe(Effect.provide([model.layer, handlers.layer]))
      const [reply] = yield* driver.outputs(Replies)
      assert.deepStrictEqual(JSON.parse(reply?.value?.text ?? "null"), [
        { name: "Lookup", result: { _tag: "OutOfStock", sku: "gone" }, isFailure: true },
        { name: "Lookup", result: 7, isFailure: false }
      ])
      assert.deepStrictEqual(handlers.calls, ["Lookup gone", "Lookup x"])
      assert.strictEqual(reply?.value?.toolCalls, 2)
    }))

  it.scoped("maxTurns: a last turn that still calls tools fails the record with AgentMaxTurnsExceeded; its calls do not run", () =>
    Effect.gen(function*() {
      const model = ScriptedModel.make((call) => [ScriptedModel.toolCall(`c${call.turn}`, "Lookup", { sku: `s${call.turn}` })])
      const handlers = makeHandlers()
      const driver = yield* TestDriver.make(agent({ maxTurns: 2 }))
      const error = yield* Effect.flip(
        driver.pipe(Questions, "k1", { order: "o1", quantity: 1 }).pipe(Effect.provide([model.layer, handlers.layer]))
      )
      assert.ok(error instanceof SkeinError.AgentMaxTurnsExceeded, String(error))
      assert.strictEqual(error.maxTurns, 2)
      assert.strictEqual(error.agent, "orders")
      assert.include(error.message, "Agent orders used all 2 turns on questions/0@0")
      assert.include(error.message, "Raise maxTurns")
      assert.include(error.message, `ErrorRule for "AgentMaxTurnsExceeded"`)
      assert.strictEqual(model.calls.length, 2, "two LLM calls, no third")
      assert.deepStrictEqual(handlers.calls, ["Lookup s1"], "the tool call of the last turn never ran")
    }))

  it.scoped("a maxTurns that is not a whole number of at least 1 is a defect that says so", () =>
    Effect.gen(function*() {
      const model = ScriptedModel.make(reserveThenAnswer)
      const handlers = makeHandlers()
      const driver = yield* TestDriver.make(agent({ maxTurns: 0 }))
      const exit = yield* Effect.exit(
        driver.pipe(Questions, "k1", { order: "o1", quantity: 1 }).pipe(Effect.provide([model.layer, handlers.layer]))
      )
      assert.ok(Exit.isFailure(exit) && Cause.isDie(exit.cause), String(exit))
      assert.include(Cause.pretty(exit.cause), "KafkaAgent orders: maxTurns must be a whole number of at least 1, got 0")
      assert.strictEqual(model.calls.length, 0)
    }))

  it.scoped("a model error is a handler error: retried by its rule, then the record succeeds", () =>
    Effect.gen(function*() {
      let failures = 1
      const model = ScriptedModel.make((call) => {
        if (failures > 0) {
          failures--
          return ScriptedModel.unavailable("overloaded")
        }
        return reserveThenAnswer(call)
      })
      const handlers = makeHandlers()
      const retry = Schedule.recurs(2)
      const driver = yield* TestDriver.make(agent({ rules: [ErrorRule.tagged("UnknownError", { retry, then: "fail" })] }))
      yield* driver.pipe(Questions, "k1", { order: "o1", quantity: 2 }).pipe(Effect.provide([model.layer, handlers.layer]))
      assert.deepStrictEqual(model.calls.map((c) => c.turn), [1, 1, 2], "the failed call, its retry, the next turn")
      assert.strictEqual((yield* driver.outputs(Replies)).length, 1)
    }))

  it.scoped("a failureMode \"error\" tool's failure is AgentToolFailed (its cause the tool's error), dead-lettered by its rule", () =>
    Effect.gen(function*() {
      const model = ScriptedModel.make(reserveThenAnswer)
      const handlers = makeHandlers()
      const driver = yield* TestDriver.make(agent({ rules: [ErrorRule.tagged("AgentToolFailed", { then: "dlq" })] }), {
        deadLetterTopic: "dlq"
      })
      yield* driver.pipe(Questions, "k1", { order: "gone", quantity: 1 }).pipe(Effect.provide([model.layer, handlers.layer]))
      yield* driver.pipe(Questions, "k2", { order: "o2", quantity: 1 }).pipe(Effect.provide([model.layer, handlers.layer]))
      const dead = yield* driver.deadLetters
      assert.strictEqual(dead.length, 1)
      const header = dead[0]?.headers.find(([name]) => name === "skein.error")?.[1].toString("utf8") ?? ""
      assert.include(header, "AgentToolFailed")
      assert.include(header, "Tool Reserve of agent orders failed (turn 1, call call-1")
      assert.deepStrictEqual((yield* driver.outputs(Replies)).map((r) => r.key), ["k2"], "the next record is processed")

      const direct = yield* TestDriver.make(agent({}))
      const error = yield* Effect.flip(
        direct.pipe(Questions, "k1", { order: "gone", quantity: 1 }).pipe(Effect.provide([model.layer, handlers.layer]))
      )
      assert.ok(error instanceof SkeinError.AgentToolFailed, String(error))
      assert.ok(error.cause instanceof OutOfStock, "the tool's own error")
    }))

  it.scoped("durable: a partial run resumes from its stored turn and tool call with the same prompt; a completed one is read back", () =>
    Effect.gen(function*() {
      let down = false
      const model = ScriptedModel.make((call) => (down && call.turn === 2 ? ScriptedModel.unavailable("down") : reserveThenAnswer(call)))
      const handlers = makeHandlers()
      const driver = yield* TestDriver.make(agent({ idempotencyKey: (record) => record.key ?? "" }))
      // The driver keeps a durable agent's run store in memory, as a broker run keeps it in its topic.
      const pipe = driver.pipe(Questions, "k1", { order: "o1", quantity: 3 }).pipe(Effect.provide([model.layer, handlers.layer]))
      down = true
      const error = yield* Effect.flip(pipe)
      assert.strictEqual(error._tag, "UnknownError")
      assert.deepStrictEqual(model.calls.map((c) => c.turn), [1, 2])
      assert.deepStrictEqual((yield* liveRunEntries(driver)).map((k) => k.split("/").at(-1)).sort(), ["tool-1-0", "turn-1"])

      down = false
      yield* pipe
      assert.deepStrictEqual(model.calls.map((c) => c.turn), [1, 2, 2], "only turn 2 is called again")
      assert.deepStrictEqual(handlers.calls, ["Reserve o1 3 (number)"], "the tool ran once")
      const turn2 = model.calls.filter((c) => c.turn === 2).map((c) => ScriptedModel.promptText(c.prompt))
      assert.strictEqual(turn2.length, 2)
      assert.strictEqual(turn2[1], turn2[0], "the resumed turn's prompt is the one the first run sent")
      assert.deepStrictEqual((yield* liveRunEntries(driver)).map((k) => k.split("/")[0]), ["done"], "completing deletes the steps")

      yield* pipe // a redelivery (same idempotency key): read back, nothing called
      assert.strictEqual(model.calls.length, 3)
      assert.strictEqual(handlers.calls.length, 1)
      const replies = yield* driver.outputs(Replies)
      assert.deepStrictEqual(replies.map((r) => r.value), [
        { text: `o1: [{"reserved":3,"by":"handler"}]`, turns: 2, toolCalls: 1 },
        { text: `o1: [{"reserved":3,"by":"handler"}]`, turns: 2, toolCalls: 1 }
      ])
    }))

  it.scoped("durable: false stores nothing: a retried run calls every turn and tool again", () =>
    Effect.gen(function*() {
      let failures = 1
      const model = ScriptedModel.make((call) => {
        if (call.turn === 2 && failures > 0) {
          failures--
          return ScriptedModel.unavailable("down")
        }
        return reserveThenAnswer(call)
      })
      const handlers = makeHandlers()
      const driver = yield* TestDriver.make(
        agent({ durable: false, rules: [ErrorRule.tagged("UnknownError", { retry: Schedule.recurs(1), then: "fail" })] })
      )
      yield* driver.pipe(Questions, "k1", { order: "o1", quantity: 3 }).pipe(Effect.provide(Layer.merge(model.layer, handlers.layer)))
      assert.deepStrictEqual(model.calls.map((c) => c.turn), [1, 2, 1, 2])
      assert.strictEqual(handlers.calls.length, 2)
      assert.deepStrictEqual(yield* driver.records("test-orders-runs"), [], "no run store")
    }))
})
