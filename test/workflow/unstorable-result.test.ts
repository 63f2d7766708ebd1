/**
 * A workflow result that JSON cannot hold (`Infinity` for `Schema.Number`) fails its record with
 * `StateNotStorable` before its completion is stored, where an error rule can take it; a stored
 * completion that no longer decodes (the success Schema changed) fails with `StoredStateInvalid`
 * naming the run, the partition and the fix.
 */
import { Workflow } from "@effect/workflow"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ErrorRule, KafkaWorkflow, Topic } from "../../src/index.ts"
import { caughtUp, createTopics, eventually, produce, readCommitted, setGroupOffsets, startInstance, unique } from "../helpers/kafka.ts"

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "skein-wf-unstorable-"))

const payload = { id: Schema.String, mode: Schema.String }
const Measure = Workflow.make({ name: "measure", payload, success: Schema.Number, idempotencyKey: (p) => p.id })

const setup = Effect.gen(function*() {
  const input = unique("wfu-in")
  const output = unique("wfu-out")
  const dlq = unique("wfu-dlq")
  const applicationId = unique("wfu-app")
  yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }, { name: dlq, partitions: 1 }])
  const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
  return { input, output, dlq, applicationId, Out, runs: `${applicationId}-measure-runs` }
})

describe("a workflow result JSON cannot hold", () => {
  it.scopedLive("fails its record under its rule before the completion is stored; the next record runs", () =>
    Effect.gen(function*() {
      const t = yield* setup
      const flow = KafkaWorkflow.make({
        name: "measure",
        input: KafkaWorkflow.topic(t.input, Measure),
        workflow: Measure,
        execute: (job) => Effect.succeed(job.mode === "inf" ? Infinity : 1),
        emit: (result, record) => [Topic.record(t.Out, record.key, String(result))],
        rules: [ErrorRule.tagged("StateNotStorable", { then: "dlq" })]
      })
      const instance = yield* startInstance(flow, { applicationId: t.applicationId, stateDir: tempDir(), deadLetterTopic: t.dlq })
      yield* produce(t.input, [
        { key: "j1", value: JSON.stringify({ id: "j1", mode: "inf" }) },
        { key: "j2", value: JSON.stringify({ id: "j2", mode: "ok" }) }
      ])
      yield* Effect.raceFirst(
        caughtUp(t.applicationId, t.input),
        eventually(Effect.map(instance.exit, Option.isSome), { what: "the instance to end" })
      )
      const ended = yield* instance.exit
      yield* instance.stop
      assert.ok(Option.isNone(ended), `the instance still runs: ${Option.isSome(ended) ? String(ended.value) : ""}`)
      const letters = yield* readCommitted(t.dlq)
      assert.deepStrictEqual(
        letters.map((r) => `${r.key} ${/StateNotStorable|does not decode back/.test(Object.values(r.headers).join(" "))}`),
        ["j1 true"]
      )
      assert.deepStrictEqual((yield* readCommitted(t.output)).map((r) => `${r.key}=${r.value}`), ["j2=1"])
      const j1 = yield* Measure.executionId({ id: "j1", mode: "inf" })
      const stored = (yield* readCommitted(t.runs)).filter((r) => (r.key ?? "").includes(j1))
      assert.deepStrictEqual(stored.map((r) => `${r.key}=${r.value}`), [], "no completion of j1 is stored")
    }), { timeout: 120_000 })

  it.scopedLive("a stored completion that no longer decodes fails with StoredStateInvalid naming the run and partition", () =>
    Effect.gen(function*() {
      const t = yield* setup
      const Texts = Workflow.make({ name: "measure", payload, success: Schema.String, idempotencyKey: (p) => p.id })
      const texts = KafkaWorkflow.make({
        name: "measure",
        input: KafkaWorkflow.topic(t.input, Texts),
        workflow: Texts,
        execute: (job) => Effect.succeed(`text-${job.id}`),
        emit: (result, record) => [Topic.record(t.Out, record.key, result)]
      })
      const stateDir = tempDir()
      const first = yield* startInstance(texts, { applicationId: t.applicationId, stateDir })
      yield* produce(t.input, [{ key: "j1", value: JSON.stringify({ id: "j1", mode: "ok" }) }])
      yield* caughtUp(t.applicationId, t.input)
      yield* first.stop
      // The success Schema changes to a number and the record is delivered again.
      yield* setGroupOffsets(t.applicationId, t.input, [{ partition: 0, offset: 0 }])
      const numbers = KafkaWorkflow.make({
        name: "measure",
        input: KafkaWorkflow.topic(t.input, Measure),
        workflow: Measure,
        execute: () => Effect.succeed(1),
        emit: (result, record) => [Topic.record(t.Out, record.key, String(result))],
        rules: [ErrorRule.make({ when: (_: unknown) => true, then: "skip" })]
      })
      const second = yield* startInstance(numbers, { applicationId: t.applicationId, stateDir })
      yield* eventually(Effect.map(second.exit, Option.isSome), { what: "the second instance to fail" })
      const exit = yield* Fiber.await(second.fiber)
      assert.ok(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      const tag = typeof error === "object" && error !== null && "_tag" in error ? error._tag : undefined
      assert.strictEqual(tag, "StoredStateInvalid", `got ${String(error)}`)
      const message = error instanceof Error ? error.message : ""
      const j1 = yield* Measure.executionId({ id: "j1", mode: "ok" })
      assert.include(message, j1)
      assert.match(message, /partition 0\b/)
    }), { timeout: 120_000 })
})
