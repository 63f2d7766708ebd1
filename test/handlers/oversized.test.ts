import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Option, Schema } from "effect"
import { ErrorRule, SkeinError, Topic, Transformer } from "../../src/index.ts"
import type { SkeinConfig } from "../../src/index.ts"
import { caughtUp, createTopics, groupOffsets, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

const big = "x".repeat(5000)

/**
 * A copier whose output for the value "big" is 5000 bytes, into an output
 * topic with `max.message.bytes` `outputLimit` (unset: the broker default).
 */
const setup = (
  rules: ReadonlyArray<ErrorRule.ErrorRule<SkeinError.OutputTooLarge>>,
  outputLimit?: number
) =>
  Effect.gen(function*() {
    const input = unique("big-in")
    const output = unique("big-out")
    const dlq = unique("big-dlq")
    yield* createTopics([
      { name: input, partitions: 1 },
      {
        name: output,
        partitions: 1,
        ...(outputLimit === undefined ? {} : { config: { "max.message.bytes": String(outputLimit) } })
      },
      { name: dlq, partitions: 1 }
    ])
    const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
    const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
    const calls: Array<string> = []
    const transformer = Transformer.stateless({
      name: "big-copy",
      inputs: [In],
      rules,
      transform: (record) =>
        Effect.sync(() => {
          calls.push(record.value)
          return { emit: [Topic.record(Out, record.key, record.value === "big" ? big : record.value)] }
        })
    })
    // One send: one record batch, so the oversized output is mid-batch.
    yield* produce(input, ["a", "b", "big", "c"].map((value) => ({ key: `k-${value}`, value })))
    return { input, output, dlq, transformer, calls }
  })

/** Runs until the run ends; returns its typed failure and the stats. */
const runToFailure = <Inputs extends ReadonlyArray<Topic.Any>, S, E>(
  transformer: Transformer.Transformer<Inputs, S, E, never>,
  options: Omit<SkeinConfig.Options, "brokers">
) =>
  Effect.gen(function*() {
    const instance = yield* startInstance(transformer, options)
    const exit = yield* Fiber.await(instance.fiber).pipe(Effect.timeout("60 seconds"))
    const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
    return { error, stats: instance.stats }
  })

describe("outputs too large to send", () => {
  it.scopedLive("with a dlq rule for OutputTooLarge, the record is dead-lettered with its error; the rest commits", () =>
    Effect.gen(function*() {
      const { dlq, input, output, transformer } = yield* setup(
        [ErrorRule.tagged("OutputTooLarge", { then: "dlq" })],
        2000
      )
      const applicationId = unique("big-app")
      const instance = yield* startInstance(transformer, { applicationId, deadLetterTopic: dlq })
      yield* caughtUp(applicationId, input).pipe(
        Effect.tapError(() => Effect.flatMap(instance.exit, (exit) => Effect.logError("run ended", exit)))
      )
      assert.deepStrictEqual((yield* readCommitted(output)).map((r) => r.value), ["a", "b", "c"])
      const dead = yield* readCommitted(dlq)
      assert.strictEqual(dead.length, 1)
      assert.strictEqual(dead[0]?.key, "k-big")
      assert.strictEqual(dead[0]?.value, "big", "the input record, not the oversized output")
      assert.match(dead[0]?.headers["skein.error"] ?? "", /^OutputTooLarge: An output for \S+ of \d+ bytes exceeds the limit of 2000 bytes/)
      assert.strictEqual(dead[0]?.headers["skein.source.offset"], "2")
      assert.strictEqual(instance.stats.deadLettered, 1)
      assert.strictEqual(instance.stats.aborts, 0, "no transaction was poisoned")
      assert.isTrue(Option.isNone(yield* instance.exit))
    }))

  it.scopedLive("without a rule, the run fails with OutputTooLarge before any transaction is poisoned", () =>
    Effect.gen(function*() {
      const { calls, input, output, transformer } = yield* setup([], 2000)
      const applicationId = unique("big-app")
      const { error, stats } = yield* runToFailure(transformer, { applicationId })
      assert.ok(error instanceof SkeinError.OutputTooLarge, String(error))
      assert.strictEqual(error.topic, output)
      assert.strictEqual(error.limit, 2000, "the topic's max.message.bytes")
      assert.isAbove(error.bytes, 5000)
      assert.deepStrictEqual(error.source, { topic: input, partition: 0, offset: 2 })
      assert.strictEqual(stats.aborts, 0, "no transaction was aborted")
      assert.deepStrictEqual(calls, ["a", "b", "big"], "nothing after the record ran")
      // The records before it in the batch commit (the runtime commits finished work before a failure).
      assert.deepStrictEqual((yield* readCommitted(output)).map((r) => r.value), ["a", "b"])
      assert.strictEqual((yield* groupOffsets(applicationId, input)).get(0), 2, "nothing past the record")
    }))

  it.scopedLive("SkeinConfig.maxMessageBytes smaller than an output fails it with OutputTooLarge", () =>
    Effect.gen(function*() {
      const { input, output, transformer } = yield* setup([])
      const applicationId = unique("big-app")
      const { error, stats } = yield* runToFailure(transformer, { applicationId, maxMessageBytes: 3000 })
      assert.ok(error instanceof SkeinError.OutputTooLarge, String(error))
      assert.strictEqual(error.limit, 3000, "SkeinConfig.maxMessageBytes, below the topic's default")
      assert.strictEqual(error.source.offset, 2)
      assert.strictEqual(stats.aborts, 0)
      assert.deepStrictEqual((yield* readCommitted(output)).map((r) => r.value), ["a", "b"])
      assert.strictEqual((yield* groupOffsets(applicationId, input)).get(0), 2)
    }))
})
