/**
 * A state that JSON cannot hold (`NaN`, `Infinity`: `JSON.stringify` writes `null`) fails the
 * record that produced it with `StateNotStorable`, where an error rule can take it, before it is
 * committed: the key keeps its last good state, before and after a restart. A stored state that
 * no longer decodes (the state Schema changed) fails with `StoredStateInvalid`, naming the key,
 * the partition and the fix.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ErrorRule, Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, eventually, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "skein-unstorable-"))

const setup = Effect.gen(function*() {
  const input = unique("unstorable-in")
  const output = unique("unstorable-out")
  const dlq = unique("unstorable-dlq")
  const applicationId = unique("unstorable-app")
  yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }, { name: dlq, partitions: 1 }])
  const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
  const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
  return { input, output, dlq, applicationId, In, Out }
})

describe("a state JSON cannot hold", () => {
  it.scopedLive("fails the record that produced it under its rule; the key keeps its state across a restart", () =>
    Effect.gen(function*() {
      const t = yield* setup
      // "inf" sets the count to Infinity (JSON: null); any other value adds one.
      const counter = Transformer.make({
        name: "count",
        inputs: [t.In],
        state: Schema.Number,
        transform: (record, count) => {
          const next = record.value === "inf" ? Infinity : Option.getOrElse(count, () => 0) + 1
          return Effect.succeed({ emit: [Topic.record(t.Out, record.key, String(next))], state: Transformer.set(next) })
        },
        rules: [ErrorRule.tagged("StateNotStorable", { then: "dlq" })]
      })
      const stateDir = tempDir()
      const first = yield* startInstance(counter, { applicationId: t.applicationId, stateDir, deadLetterTopic: t.dlq })
      yield* produce(t.input, [{ key: "k", value: "x" }, { key: "k", value: "inf" }, { key: "k", value: "x" }, { key: "m", value: "x" }])
      yield* caughtUp(t.applicationId, t.input)
      yield* first.stop
      // After a restart (the store reopened), k still counts from its last good state.
      const second = yield* startInstance(counter, { applicationId: t.applicationId, stateDir, deadLetterTopic: t.dlq })
      yield* produce(t.input, [{ key: "k", value: "x" }])
      yield* Effect.raceFirst(
        caughtUp(t.applicationId, t.input),
        eventually(Effect.map(second.exit, Option.isSome), { what: "the second instance to end" })
      )
      const ended = yield* second.exit
      yield* second.stop
      const letters = yield* readCommitted(t.dlq)
      const outputs = (yield* readCommitted(t.output)).map((r) => `${r.key}=${r.value}`)
      assert.deepStrictEqual(
        letters.map((r) => `${r.key}=${r.value} ${/StateNotStorable|does not decode back/.test(Object.values(r.headers).join(" "))}`),
        ["k=inf true"],
        `the Infinity record is dead-lettered with StateNotStorable; outputs: ${outputs.join(", ")}`
      )
      assert.ok(Option.isNone(ended), `the second instance still runs: ${Option.isSome(ended) ? String(ended.value) : ""}`)
      assert.deepStrictEqual(outputs, ["k=1", "k=2", "m=1", "k=3"])
    }), { timeout: 120_000 })

  it.scopedLive("a stored state that no longer decodes (a Schema change) fails with StoredStateInvalid naming the key, partition and fix", () =>
    Effect.gen(function*() {
      const t = yield* setup
      const counting = <S, SI>(state: Schema.Schema<S, SI>, next: (count: Option.Option<S>) => S) =>
        Transformer.make({
          name: "count",
          inputs: [t.In],
          state,
          transform: (_, count) => Effect.succeed({ state: Transformer.set(next(count)) })
        })
      const stateDir = tempDir()
      const numbers = counting(Schema.Number, (count) => Option.getOrElse(count, () => 0) + 1)
      const first = yield* startInstance(numbers, { applicationId: t.applicationId, stateDir })
      yield* produce(t.input, [{ key: "k", value: "x" }])
      yield* caughtUp(t.applicationId, t.input)
      yield* first.stop
      // The state Schema changes to text: the stored 1 does not decode.
      const texts = counting(Schema.String, (text) => `${Option.getOrElse(text, () => "")}x`)
      const second = yield* startInstance(texts, { applicationId: t.applicationId, stateDir })
      yield* produce(t.input, [{ key: "k", value: "x" }])
      yield* eventually(Effect.map(second.exit, Option.isSome), { what: "the second instance to fail" })
      const exit = yield* Fiber.await(second.fiber)
      assert.ok(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      const tag = typeof error === "object" && error !== null && "_tag" in error ? error._tag : undefined
      assert.strictEqual(tag, "StoredStateInvalid", `got ${String(error)}`)
      const message = error instanceof Error ? error.message : ""
      assert.match(message, /key k\b/)
      assert.match(message, /partition 0\b/)
      assert.match(message, /Schema/)
    }), { timeout: 120_000 })
})
