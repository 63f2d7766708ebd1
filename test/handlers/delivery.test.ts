import { assert, describe, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Fiber, Option, Schema } from "effect"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { SkeinConfig, SkeinError, Topic, Transformer } from "../../src/index.ts"
import {
  alterTopicConfig,
  brokers,
  caughtUp,
  createTopics,
  eventually,
  groupOffsets,
  produce,
  readCommitted,
  startInstance,
  unique
} from "../helpers/kafka.ts"

const app = path.join(import.meta.dirname, "apps", "null-key-copy.ts")

/**
 * A copier whose output for "nokey" has a null key, into an output topic
 * created with `cleanup.policy=compact`: the broker rejects that record
 * (INVALID_RECORD, "Compacted topic cannot accept message without key"), a
 * real delivery failure no client-side check catches.
 */
const setup = Effect.gen(function*() {
  const input = unique("delivery-in")
  const output = unique("delivery-out")
  yield* createTopics([
    { name: input, partitions: 1 },
    { name: output, partitions: 1, config: { "cleanup.policy": "compact" } }
  ])
  const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
  const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
  const transformer = Transformer.stateless({
    name: "null-key-copy",
    inputs: [In],
    transform: (record) =>
      Effect.succeed({ emit: [Topic.record(Out, record.value === "nokey" ? null : record.key, record.value)] })
  })
  // One send: one record batch, so the rejected record shares its transaction with the others.
  yield* produce(input, [{ key: "k1", value: "a" }, { key: "k2", value: "nokey" }, { key: "k3", value: "b" }])
  return { input, output, transformer }
})

/** Runs the copier as its own process (Runner.runMain); resolves with its exit code and output. */
const runApp = (env: Record<string, string>) =>
  Effect.async<{ readonly code: number | null; readonly output: string }>((resume) => {
    const child = spawn(process.execPath, ["--import", "tsx", app], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
    child.on("close", (code) => resume(Effect.succeed({ code, output })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("delivery failures", () => {
  it.scopedLive("8 consecutive delivery failures end the run with DeliveryFailed; nothing is committed", () =>
    Effect.gen(function*() {
      const { input, output, transformer } = yield* setup
      const applicationId = unique("delivery-app")
      const instance = yield* startInstance(transformer, { applicationId, deliveryBackoff: Duration.millis(50) })
      const exit = yield* Fiber.await(instance.fiber).pipe(Effect.timeout("60 seconds"))
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      assert.ok(error instanceof SkeinError.DeliveryFailed, String(error))
      assert.strictEqual(error.attempts, SkeinConfig.defaults.maxDeliveryFailures)
      assert.strictEqual(error.attempts, 8)
      assert.strictEqual(error.partition, 0)
      assert.ok(error.cause instanceof SkeinError.KafkaError)
      assert.include(error.cause.message, "failed the validation on broker", "the broker's INVALID_RECORD")
      assert.strictEqual(instance.stats.aborts, 8)
      assert.strictEqual(instance.stats.commits, 0)
      assert.strictEqual(instance.stats.phase, "failed")
      assert.deepStrictEqual(yield* readCommitted(output), [], "nothing committed to the output")
      assert.strictEqual((yield* groupOffsets(applicationId, input)).get(0) ?? -1, -1, "the group offset did not advance")
    }))

  it.live("as a process (Runner.runMain), the run ending with DeliveryFailed exits non-zero", () =>
    Effect.gen(function*() {
      const { input, output } = yield* setup
      const applicationId = unique("delivery-app")
      const { code, output: log } = yield* runApp({
        INPUT: input,
        OUTPUT: output,
        APPLICATION_ID: applicationId,
        BROKERS: brokers().join(","),
        DELIVERY_BACKOFF_MS: "50"
      }).pipe(Effect.timeout("90 seconds"))
      assert.isNotNull(code)
      assert.notStrictEqual(code, 0, "a failed run exits non-zero")
      assert.include(log, "DeliveryFailed", "it failed for the failed deliveries, not for another reason")
      assert.include(log, "failed 8 times in a row")
      assert.deepStrictEqual(yield* readCommitted(output), [])
      assert.strictEqual((yield* groupOffsets(applicationId, input)).get(0) ?? -1, -1)
    }), 120_000)

  it.scopedLive("fewer failures than maxDeliveryFailures: the run recovers, commits exactly once and keeps running", () =>
    Effect.gen(function*() {
      const { input, output, transformer } = yield* setup
      const applicationId = unique("delivery-app")
      // Backoffs of 1 s, 2 s, 4 s...: the topic is fixed after the second failure, whenever the
      // admin call lands (the failures before it are counted, not assumed).
      const instance = yield* startInstance(transformer, { applicationId, deliveryBackoff: Duration.seconds(1) })
      yield* eventually(
        Effect.flatMap(instance.exit, (exit) =>
          Option.isSome(exit)
            ? Effect.fail(new Error(`the run ended after ${instance.stats.aborts} failed deliveries`))
            : Effect.succeed(instance.stats.aborts >= 2)),
        { what: "two failed deliveries" }
      )
      // The topic now accepts records without a key: an attempt after the change succeeds.
      yield* alterTopicConfig(output, { "cleanup.policy": "delete" })
      const abortsAtFix = instance.stats.aborts
      yield* caughtUp(applicationId, input).pipe(
        Effect.tapError(() => Effect.flatMap(instance.exit, (exit) => Effect.logError("run ended", exit)))
      )
      const aborts = instance.stats.aborts
      process.stderr.write(`delivery: ${abortsAtFix} failed deliveries when the topic was fixed, ${aborts} in all\n`)
      // At most one more: an attempt already on its way while the broker applied the change.
      assert.isAtLeast(aborts, 2)
      assert.isAtMost(aborts, abortsAtFix + 1, "no failure after the topic accepted the records")
      assert.isBelow(aborts, SkeinConfig.defaults.maxDeliveryFailures)
      assert.deepStrictEqual((yield* readCommitted(output)).map((r) => [r.key, r.value]), [["k1", "a"], [null, "nokey"], ["k3", "b"]])

      yield* produce(input, [{ key: "k4", value: "c" }])
      yield* caughtUp(applicationId, input)
      assert.deepStrictEqual((yield* readCommitted(output)).map((r) => r.value), ["a", "nokey", "b", "c"], "exactly once")
      assert.strictEqual(instance.stats.aborts, aborts)
      assert.isTrue(Option.isNone(yield* instance.exit), "the run keeps running")
      assert.strictEqual(instance.stats.phase, "running")
    }))
})
