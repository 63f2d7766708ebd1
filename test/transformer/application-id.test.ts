/**
 * One applicationId per transformer. Two transformers under one applicationId
 * share its consumer group and its transactional ids `{applicationId}-{partition}`,
 * so they would fence each other forever: the second one is rejected with a
 * `ConfigurationError` naming both and the fix, and the first keeps committing.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Fiber, Option, Schema } from "effect"
import { SkeinError, Topic, Transformer } from "../../src/index.ts"
import * as Assignor from "../../src/internal/kafka/assignor.ts"
import kafkajs from "kafkajs"
import { fileURLToPath } from "node:url"
import { spawnApp } from "../helpers/appProcess.ts"
import { caughtUp, createTopics, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"
import { brokers } from "../utils/broker.ts"

const { AssignerProtocol } = kafkajs
const echoApp = fileURLToPath(new URL("../apps/echo.ts", import.meta.url))

const copier = (name: string, input: string, output: string) => {
  const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
  const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
  return Transformer.stateless({
    name,
    inputs: [In],
    transform: (record) => Effect.succeed({ emit: [Topic.record(Out, record.key, `${name}:${record.value}`)] })
  })
}

const batch = (round: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({ key: `k${i % 10}`, value: `${round}-${i}`, partition: i % 2 }))

/** The ConfigurationError a failed run ended with: directly, or as the cause of a KafkaError (a rejected join). */
const configurationError = (exit: Exit.Exit<unknown, unknown>): SkeinError.ConfigurationError | undefined => {
  if (!Exit.isFailure(exit)) return undefined
  const error = Option.getOrUndefined(Cause.failureOption(exit.cause))
  if (error instanceof SkeinError.ConfigurationError) return error
  if (error instanceof SkeinError.KafkaError && error.cause instanceof SkeinError.ConfigurationError) return error.cause
  return undefined
}

describe("one applicationId per transformer", () => {
  it.scopedLive("a second transformer under the same applicationId fails at startup with ConfigurationError; the first keeps committing", () =>
    Effect.gen(function*() {
      const input = unique("appid-in")
      const output = unique("appid-out")
      const applicationId = unique("appid-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      yield* produce(input, batch("first", 40))
      const a = yield* startInstance(copier("copy-a", input, output), { applicationId })
      yield* caughtUp(applicationId, input)

      const started = Date.now()
      const b = yield* startInstance(copier("copy-b", input, output), { applicationId })
      // A guard against a hang, not a measure: the time is printed.
      const exit = yield* Fiber.await(b.fiber).pipe(Effect.timeout(Duration.seconds(60)), Effect.option)
      assert.isTrue(Option.isSome(exit), "the second transformer did not fail (waited 60 s)")
      process.stderr.write(`application-id: the second transformer failed ${Date.now() - started} ms after its start\n`)
      const error = configurationError(Option.getOrThrow(exit))
      assert.isDefined(error, `the second transformer failed with a ConfigurationError: ${String(exit)}`)
      // At startup: before it started a task or processed a batch.
      assert.deepStrictEqual(
        { tasksStarted: b.stats.tasksStarted, batches: b.stats.batches, commits: b.stats.commits },
        { tasksStarted: 0, batches: 0, commits: 0 },
        "failed at startup, before any task"
      )
      assert.include(error!.message, `"copy-a"`)
      assert.include(error!.message, `"copy-b"`)
      assert.include(error!.message, "Give each transformer its own applicationId")

      // The first one keeps committing; it never saw the second one.
      yield* produce(input, batch("second", 40))
      yield* caughtUp(applicationId, input)
      assert.isTrue(Option.isNone(yield* a.exit), "the first transformer is still running")
      const values = (yield* readCommitted(output)).map((r) => r.value ?? "")
      assert.strictEqual(values.length, 80)
      assert.isTrue(values.every((v) => v.startsWith("copy-a:")))
      assert.strictEqual(a.stats.migrations, 0, "never fenced")
    }), 120_000)

  it.scopedLive("a second transformer in another process under the same applicationId is rejected by the group's owner check; the first keeps committing", () =>
    Effect.gen(function*() {
      // In one process the transactional-id registry rejects the second transformer before it joins;
      // across processes only the group's owner check (the assignor) can, which this case exercises.
      const input = unique("appid-proc-in")
      const output = unique("appid-proc-out")
      const applicationId = unique("appid-proc-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      yield* produce(input, batch("first", 40))
      const a = yield* startInstance(copier("copy-a", input, output), { applicationId })
      yield* caughtUp(applicationId, input)

      const child = yield* spawnApp(echoApp, {
        KAFKA_BROKERS: brokers().join(","),
        SKEIN_APPLICATION_ID: applicationId,
        CHAOS_INPUT_TOPIC: input,
        CHAOS_OUTPUT_TOPIC: output
      })
      // A guard against a hang, not a measure.
      const code = yield* child.exited.pipe(Effect.timeout(Duration.seconds(90)), Effect.option)
      assert.isTrue(Option.isSome(code), `the second transformer's process did not end (waited 90 s): ${child.output()}`)
      assert.strictEqual(Option.getOrThrow(code), 1, child.output())
      const failed = child.output().split("\n").find((l) => l.includes(`"event":"failed"`)) ?? ""
      assert.include(failed, "ConfigurationError", child.output())
      assert.include(failed, "is in use by transformer", failed)
      assert.include(failed, "copy-a", failed)
      assert.include(failed, "Give each transformer its own applicationId", failed)

      yield* produce(input, batch("second", 40))
      yield* caughtUp(applicationId, input)
      assert.isTrue(Option.isNone(yield* a.exit), "the first transformer is still running")
      const values = (yield* readCommitted(output)).map((r) => r.value ?? "")
      assert.strictEqual(values.length, 80)
      assert.isTrue(values.every((v) => v.startsWith("copy-a:")), "every output is the first transformer's")
      assert.strictEqual(a.stats.migrations, 0, "never fenced")
    }), 150_000)

  it.scopedLive("started at the same time, one of two transformers is rejected and the other processes everything", () =>
    Effect.gen(function*() {
      const input = unique("appid-race-in")
      const output = unique("appid-race-out")
      const applicationId = unique("appid-race-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      yield* produce(input, batch("race", 40))
      const [a, b] = yield* Effect.all([
        startInstance(copier("race-a", input, output), { applicationId }),
        startInstance(copier("race-b", input, output), { applicationId })
      ], { concurrency: 2 })
      const first = yield* Effect.raceFirst(Fiber.await(a.fiber), Fiber.await(b.fiber)).pipe(
        // A guard against a hang, not a measure.
        Effect.timeout(Duration.seconds(90)),
        Effect.option
      )
      assert.isTrue(Option.isSome(first), "neither of them failed (waited 90 s)")
      yield* caughtUp(applicationId, input)
      const aExit = yield* a.exit
      const bExit = yield* b.exit
      const failed = Option.isSome(aExit) ? aExit.value : Option.isSome(bExit) ? bExit.value : undefined
      assert.isDefined(failed)
      assert.isTrue(Option.isNone(aExit) !== Option.isNone(bExit), "exactly one failed")
      const error = configurationError(failed!)
      assert.isDefined(error, `rejected with a ConfigurationError: ${String(failed)}`)
      assert.include(error!.message, "Give each transformer its own applicationId")

      const winner = Option.isNone(aExit) ? "race-a" : "race-b"
      const values = (yield* readCommitted(output)).map((r) => r.value ?? "")
      assert.strictEqual(values.length, 40)
      assert.isTrue(values.every((v) => v.startsWith(`${winner}:`)), "every output is the winner's")
    }), 120_000)
})

describe("the co-partitioning assignor keeps one transformer per group", () => {
  const counts = new Map([["in", 4]])
  const member = (memberId: string, owner: string | undefined, since = 0): Assignor.Member => ({
    memberId,
    membership: owner === undefined ? undefined : { owner, since }
  })

  it("announces the transformer in its subscription and reads it back", () => {
    const metadata = Assignor.subscription(AssignerProtocol, ["in"], { owner: "word-count", since: 42 })
    // No stores announced: decoded as none (an empty map).
    assert.deepStrictEqual(Assignor.decodeMembership(AssignerProtocol, metadata), { owner: "word-count", since: 42, stores: new Map() })
    assert.isUndefined(Assignor.decodeMembership(AssignerProtocol, Assignor.subscription(AssignerProtocol, ["in"], undefined)))
    assert.isUndefined(Assignor.decodeMembership(AssignerProtocol, Buffer.alloc(0)))
  })

  it("gives the partitions to the transformer that joined first; the other one's members get a rejection", () => {
    const plan = Assignor.plan([member("m1", "b", 200), member("m2", "a", 100), member("m3", "a", 300)], counts)
    assert.deepStrictEqual([...plan.assignments.keys()].sort(), ["m2", "m3"])
    assert.deepStrictEqual(plan.assignments.get("m2"), { in: [0, 2] })
    assert.deepStrictEqual(plan.assignments.get("m3"), { in: [1, 3] })
    assert.deepStrictEqual([...plan.rejected], [["m1", { owner: "b", incumbent: "a" }]])
    assert.strictEqual(Assignor.rejectionOf(["in", Assignor.rejectionTopic("a")]), "a")
    assert.isUndefined(Assignor.rejectionOf(["in"]))
  })

  it("accepts members of an older Skein (no userData) next to any transformer", () => {
    const plan = Assignor.plan([member("old", undefined), member("m1", "a", 100)], counts)
    assert.deepStrictEqual([...plan.assignments.keys()].sort(), ["m1", "old"])
    assert.strictEqual(plan.rejected.size, 0)
    const none = Assignor.plan([member("old-1", undefined), member("old-2", undefined)], counts)
    assert.strictEqual(none.assignments.size, 2)
  })
})
