/**
 * The run store stays bounded: a run whose record is finally disposed of without completing
 * (skipped, dead-lettered, suspended then dead-lettered) leaves no step behind, in the run-store
 * topic or in the local store; only completions remain (until their retention ends).
 */
import { Activity, DurableClock, Workflow } from "@effect/workflow"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ErrorRule, KafkaWorkflow, Topic } from "../../src/index.ts"
import * as StateStore from "../../src/internal/stores/StateStore.ts"
import { caughtUp, createTopics, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

class Flaky extends Schema.TaggedError<Flaky>()("Flaky", { id: Schema.String }) {}
class Declined extends Schema.TaggedError<Declined>()("Declined", { id: Schema.String }) {}

const Job = Workflow.make({
  name: "job",
  payload: { id: Schema.String, mode: Schema.String },
  success: Schema.String,
  error: Schema.Union(Flaky, Declined),
  idempotencyKey: (p) => p.id
})

describe("run store growth", () => {
  it.scopedLive("runs that are skipped, dead-lettered or suspended leave no step in the topic or the local store", () =>
    Effect.gen(function*() {
      const input = unique("wfg-in")
      const output = unique("wfg-out")
      const dlq = unique("wfg-dlq")
      const applicationId = unique("wfg-app")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }, { name: dlq, partitions: 1 }])
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const flow = KafkaWorkflow.make({
        name: "job",
        input: KafkaWorkflow.topic(input, Job),
        workflow: Job,
        execute: (job) =>
          Effect.gen(function*() {
            const fetched = yield* Activity.make({ name: "fetch", success: Schema.String, execute: Effect.succeed(`f-${job.id}`) })
            if (job.mode === "skip") return yield* Effect.fail(new Flaky({ id: job.id }))
            if (job.mode === "dlq") return yield* Effect.fail(new Declined({ id: job.id }))
            if (job.mode === "sleep") yield* DurableClock.sleep({ name: "cool-off", duration: "10 minutes" })
            return fetched
          }),
        emit: (result, record) => [Topic.record(Out, record.key, result)],
        rules: [
          ErrorRule.tagged("Flaky", { then: "skip" }),
          ErrorRule.tagged("Declined", { then: "dlq" }),
          ErrorRule.tagged("WorkflowSuspended", { then: "dlq" })
        ]
      })
      const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-wf-growth-"))
      const instance = yield* startInstance(flow, { applicationId, stateDir, deadLetterTopic: dlq })
      const modes = ["skip", "dlq", "sleep", "ok"]
      yield* produce(input, modes.map((mode, i) => ({ key: `j${i}`, value: JSON.stringify({ id: `j${i}`, mode }) })))
      yield* caughtUp(applicationId, input)
      yield* instance.stop
      assert.deepStrictEqual((yield* readCommitted(output)).map((r) => `${r.key}=${r.value}`), ["j3=f-j3"])
      assert.deepStrictEqual((yield* readCommitted(dlq)).map((r) => r.key), ["j1", "j2"])
      // The topic's live entries: the last value of each key, tombstones dropped.
      const latest = new Map<string, string | null>()
      for (const record of yield* readCommitted(`${applicationId}-job-runs`)) latest.set(record.key ?? "", record.value)
      const live = [...latest].filter(([, value]) => value !== null).map(([key]) => key.replace(/\/[^/]+(\/|$)/, "/<id>$1"))
      assert.deepStrictEqual(live, ["done/<id>"], "only the completed run is in the run-store topic")
      // The local store of partition 0's run store, opened after the instance stopped.
      const local = yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* StateStore.open(path.join(stateDir, applicationId, "job", "0.runs"))
        return yield* store.keys("")
      }))
      assert.deepStrictEqual(local.map((key) => key.replace(/\/[^/]+(\/|$)/, "/<id>$1")), ["done/<id>"], "only the completed run is in the local store")
    }), { timeout: 120_000 })
})
