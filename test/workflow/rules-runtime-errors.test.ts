/**
 * A durable workflow's error rules see only the workflow's own errors: a run-store error (here a
 * newer owner fencing the run-store producer mid-run, `TaskMigrated`) is never handed to a
 * catch-all `skip` rule, which would commit past the record and drop its run's outputs. The task
 * migrates instead, and the record's run completes when the task starts again.
 */
import { Activity, Workflow } from "@effect/workflow"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ErrorRule, KafkaWorkflow, SkeinConfig, Topic } from "../../src/index.ts"
import { makeKafka } from "../../src/internal/kafka/client.ts"
import * as Producer from "../../src/internal/kafka/producer.ts"
import * as RunStore from "../../src/internal/workflow/RunStore.ts"
import { brokers, caughtUp, createTopics, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

const Job = Workflow.make({
  name: "job",
  payload: { id: Schema.String },
  success: Schema.String,
  idempotencyKey: (p) => p.id
})

describe("workflow rules and the runtime's errors", () => {
  it.scopedLive("a run-store producer fenced mid-run is not handed to a catch-all skip rule; the run completes after the task migrates", () =>
    Effect.gen(function*() {
      const input = unique("wfr-in")
      const output = unique("wfr-out")
      const applicationId = unique("wfr-app")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      let charges = 0
      const flow = KafkaWorkflow.make({
        name: "job",
        input: KafkaWorkflow.topic(input, Job),
        workflow: Job,
        execute: (job) =>
          Activity.make({
            name: "charge",
            success: Schema.String,
            // The first charge waits until the test has fenced the run-store producer.
            execute: Effect.suspend(() =>
              ++charges === 1
                ? Effect.zipRight(Deferred.succeed(started, undefined), Effect.as(Deferred.await(release), `charged-${job.id}`))
                : Effect.succeed(`charged-${job.id}`)
            )
          }),
        emit: (result, record) => [Topic.record(Out, record.key, result)],
        rules: [ErrorRule.make({ when: (_: unknown) => true, then: "skip" })]
      })
      const instance = yield* startInstance(flow, {
        applicationId,
        stateDir: fs.mkdtempSync(path.join(os.tmpdir(), "skein-wf-runtime-"))
      })
      yield* produce(input, [{ key: "j1", value: JSON.stringify({ id: "j1" }) }])
      yield* Deferred.await(started)
      // A newer owner of the run-store transactional id: the charge's step write is fenced.
      const kafka = yield* makeKafka(SkeinConfig.make({ brokers: brokers(), applicationId }))
      yield* Effect.flatMap(
        Producer.make(kafka, {
          partition: 0,
          transactionalId: RunStore.transactionalId(applicationId, 0),
          transactionTimeout: Duration.seconds(60),
          maxMessageBytes: 1_000_000
        }),
        (producer) => producer.fence
      )
      yield* Deferred.succeed(release, undefined)
      yield* caughtUp(applicationId, input)
      const stats = instance.stats
      yield* instance.stop
      const outputs = (yield* readCommitted(output)).map((r) => `${r.key}=${r.value}`)
      assert.deepStrictEqual(
        { outputs, skipped: stats.skipped },
        { outputs: ["j1=charged-j1"], skipped: 0 },
        "the fenced step write was not skipped by the catch-all rule"
      )
      assert.isAtLeast(stats.migrations, 1, "the task migrated")
      process.stderr.write(`[workflow] charges: ${charges}, migrations: ${stats.migrations}\n`)
    }), { timeout: 120_000 })
})
