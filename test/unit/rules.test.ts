import { assert, describe, it } from "@effect/vitest"
import { Data, Duration, Effect, Either, Fiber, Schedule, TestClock } from "effect"
import { ErrorRule } from "../../src/index.ts"
import {
  EncodeError,
  KafkaError,
  OutputTooLarge,
  StateNotStorable,
  StateStoreError,
  StoredStateInvalid,
  TaskMigrated
} from "../../src/SkeinError.ts"
import * as Rules from "../../src/internal/runtime/rules.ts"
import { ParseResult, Schema } from "effect"

class Invalid extends Data.TaggedError("Invalid")<{}> {}
class Unavailable extends Data.TaggedError("Unavailable")<{}> {}

const catchAll = ErrorRule.make({ when: (_: unknown) => true, then: "skip" })
const tooLarge = new OutputTooLarge({ topic: "t", bytes: 10, limit: 5, source: { topic: "in", partition: 0, offset: 0 } })
const encodeError = new EncodeError({
  topic: "t",
  cause: new ParseResult.ParseError({ issue: new ParseResult.Type(Schema.Number.ast, "x") })
})

describe("rules", () => {
  it("a catch-all predicate never sees a runtime error (KafkaError) or an EncodeError", () => {
    assert.isTrue(Rules.matches(catchAll, new Invalid()))
    assert.isFalse(Rules.matches(catchAll, new KafkaError({ reason: "Protocol", operation: "describeConfigs", cause: "x" })))
    assert.isFalse(Rules.matches(catchAll, encodeError))
    assert.isFalse(Rules.matches(catchAll, tooLarge), "OutputTooLarge only reaches a tagged rule")
    assert.isTrue(Rules.matches(ErrorRule.tagged("OutputTooLarge", { then: "dlq" }), tooLarge))
  })

  it("a catch-all predicate never sees a durable workflow's runtime errors; StateNotStorable reaches only its tagged rule", () => {
    const parseError = new ParseResult.ParseError({ issue: new ParseResult.Type(Schema.Number.ast, null) })
    const runtime = [
      new StateStoreError({ operation: "write", path: "/tmp/0.runs", cause: "disk full" }),
      new TaskMigrated({ partition: 0, cause: "fenced" }),
      new StoredStateInvalid({ transformer: "t", kind: "workflow result", key: "run", partition: 0, store: "runs", cause: parseError })
    ]
    for (const error of runtime) {
      assert.isFalse(Rules.matches(catchAll, error), `${error._tag} reached a catch-all rule`)
      assert.isFalse(Rules.matches(ErrorRule.tagged(error._tag, { then: "skip" }), error), `${error._tag} reached its tagged rule`)
    }
    const notStorable = new StateNotStorable({
      transformer: "t",
      kind: "state",
      key: "k",
      source: { topic: "in", partition: 0, offset: 3 },
      cause: parseError
    })
    assert.isFalse(Rules.matches(catchAll, notStorable))
    assert.isTrue(Rules.matches(ErrorRule.tagged("StateNotStorable", { then: "dlq" }), notStorable))
  })

  it.effect("a runtime error fails the record as it is, whatever the rules", () =>
    Effect.gen(function*() {
      const error = new KafkaError({ reason: "Connection", operation: "describeConfigs", cause: "down" })
      const outcome = yield* Effect.either(
        Rules.apply([catchAll], () => Effect.fail(error), { hasDeadLetterTopic: true, onRetry: () => undefined })
      )
      assert.deepStrictEqual(outcome, Either.left(error))
    }))

  it.effect("retries while the rule's errors match, then applies its disposition", () =>
    Effect.gen(function*() {
      let attempts = 0
      let retries = 0
      const outcome = yield* Rules.apply(
        [ErrorRule.make({ when: (e: Unavailable) => e._tag === "Unavailable", retry: Schedule.recurs(2), then: "dlq" })],
        () => Effect.suspend(() => (++attempts, Effect.fail(new Unavailable()))),
        { hasDeadLetterTopic: true, onRetry: () => retries++ }
      )
      assert.deepStrictEqual({ tag: outcome._tag, attempts, retries }, { tag: "DeadLettered", attempts: 3, retries: 2 })
    }))

  it.effect("a retry that succeeds is the record's result; dlq without a dead letter topic fails", () =>
    Effect.gen(function*() {
      let attempts = 0
      const ok = yield* Rules.apply(
        [ErrorRule.tagged("Unavailable", { retry: Schedule.recurs(3), then: "fail" })],
        () => Effect.suspend(() => ++attempts < 3 ? Effect.fail(new Unavailable()) : Effect.succeed("done")),
        { hasDeadLetterTopic: false, onRetry: () => undefined }
      )
      assert.deepStrictEqual(ok, { _tag: "Succeeded", value: "done" })
      const noDlq = yield* Effect.either(Rules.apply(
        [ErrorRule.tagged("Invalid", { then: "dlq" })],
        () => Effect.fail(new Invalid()),
        { hasDeadLetterTopic: false, onRetry: () => undefined }
      ))
      assert.isTrue(Either.isLeft(noDlq))
    }))

  it.effect("an endless retry schedule ends at the rule's maxRetryDuration (by default one minute); its then takes the record", () =>
    Effect.gen(function*() {
      const endless = (maxRetryDuration?: Duration.DurationInput) =>
        Effect.gen(function*() {
          let retries = 0
          const fiber = yield* Effect.fork(Rules.apply(
            [ErrorRule.tagged("Unavailable", {
              retry: Schedule.spaced("1 second"),
              ...(maxRetryDuration === undefined ? {} : { maxRetryDuration }),
              then: "skip"
            })],
            () => Effect.fail(new Unavailable()),
            { hasDeadLetterTopic: false, onRetry: () => retries++ }
          ))
          yield* TestClock.adjust("10 minutes")
          const ruled = yield* Fiber.join(fiber)
          return { ruled: ruled._tag, retries }
        })
      // A retry starts only before the deadline: the one a schedule would start at it is not.
      assert.deepStrictEqual(yield* endless(), { ruled: "Skipped", retries: 59 }, "the default: one minute of retries, a second apart")
      assert.deepStrictEqual(yield* endless("5 seconds"), { ruled: "Skipped", retries: 4 })
    }))
})
