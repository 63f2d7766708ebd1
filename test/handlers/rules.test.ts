import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Option, Schedule, Schema } from "effect"
import { ErrorRule, SkeinError, Topic, Transformer } from "../../src/index.ts"
import type { Runner } from "../../src/index.ts"
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

class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", { value: Schema.String }) {}
class Invalid extends Schema.TaggedError<Invalid>()("Invalid", { value: Schema.String }) {}

const Tally = Schema.Struct({ seen: Schema.Array(Schema.String) })

/**
 * A transformer whose transform fails on "bad-*" values (`Invalid`) and on
 * "flaky-N" values the first N attempts (`Unavailable`). Before failing it
 * mutates its state copy, which a retry must not see.
 */
const setup = (rules: ReadonlyArray<ErrorRule.ErrorRule<Unavailable | Invalid>>, values: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const input = unique("rules-in")
    const output = unique("rules-out")
    const dlq = unique("rules-dlq")
    yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }, { name: dlq, partitions: 1 }])
    const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
    const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Tally) })
    const attempts = new Map<string, number>()
    const transformer = Transformer.make({
      name: "tally",
      inputs: [In],
      state: Tally,
      rules,
      transform: (record, state) =>
        Effect.gen(function*() {
          const n = (attempts.get(record.value) ?? 0) + 1
          attempts.set(record.value, n)
          const before = Option.getOrElse(state, () => ({ seen: [] as ReadonlyArray<string> })).seen.slice()
          const tally = Option.getOrElse(state, () => ({ seen: [] as Array<string> }))
          ;(tally.seen as Array<string>).push(`corrupted-by-${record.value}-${n}`)
          if (record.value.startsWith("bad")) return yield* Effect.fail(new Invalid({ value: record.value }))
          const flaky = /^flaky-(\d+)$/.exec(record.value)
          if (flaky !== null && n <= Number(flaky[1])) return yield* Effect.fail(new Unavailable({ value: record.value }))
          const next = { seen: [...before, record.value] }
          return { emit: [Topic.record(Out, record.key, next)], state: Transformer.set(next) }
        })
    })
    yield* produce(input, values.map((value) => ({ key: "k", value })))
    return { input, output, dlq, transformer, attempts }
  })

const retryTwice = Schedule.intersect(Schedule.spaced("10 millis"), Schedule.recurs(2))
const lastTally = (records: ReadonlyArray<{ readonly offset: number; readonly value: string | null }>) =>
  JSON.parse([...records].sort((a, b) => a.offset - b.offset).at(-1)?.value ?? "null") as { seen: Array<string> }

describe("error rules", () => {
  it.scopedLive("retry then succeed: each attempt sees the state as before the failed attempt", () =>
    Effect.gen(function*() {
      const { attempts, input, output, transformer } = yield* setup(
        [ErrorRule.tagged("Unavailable", { retry: retryTwice, then: "fail" })],
        ["a", "flaky-2", "b"]
      )
      const applicationId = unique("rules-app")
      const instance = yield* startInstance(transformer, { applicationId })
      yield* caughtUp(applicationId, input).pipe(
        Effect.tapError(() => Effect.flatMap(instance.exit, (exit) => Effect.logError("run ended", exit)))
      )
      assert.strictEqual(attempts.get("flaky-2"), 3)
      assert.strictEqual(instance.stats.retries, 2)
      assert.deepStrictEqual(lastTally(yield* readCommitted(output)).seen, ["a", "flaky-2", "b"])
    }))

  it.scopedLive("retry then dlq: the record and its error go to the dead letter topic; the rest commits", () =>
    Effect.gen(function*() {
      const { attempts, dlq, input, output, transformer } = yield* setup(
        [ErrorRule.tagged("Unavailable", { retry: retryTwice, then: "dlq" })],
        ["a", "flaky-9", "b"]
      )
      const applicationId = unique("rules-app")
      const instance = yield* startInstance(transformer, { applicationId, deadLetterTopic: dlq })
      yield* caughtUp(applicationId, input)
      assert.strictEqual(attempts.get("flaky-9"), 3, "one attempt and two retries")
      assert.strictEqual(instance.stats.deadLettered, 1)
      assert.deepStrictEqual(lastTally(yield* readCommitted(output)).seen, ["a", "b"])
      const dead = yield* readCommitted(dlq)
      assert.strictEqual(dead.length, 1)
      assert.strictEqual(dead[0]?.value, "flaky-9")
      assert.include(dead[0]?.headers["skein.error"] ?? "", "Unavailable")
      assert.strictEqual(dead[0]?.headers["skein.source.offset"], "1")
    }))

  it.scopedLive("retry then fail: the run ends with the typed error; the work before the record commits, nothing past it", () =>
    Effect.gen(function*() {
      const { attempts, input, output, transformer } = yield* setup(
        [ErrorRule.tagged("Unavailable", { retry: retryTwice, then: "fail" })],
        ["a", "flaky-9", "b"]
      )
      const applicationId = unique("rules-app")
      const instance = yield* startInstance(transformer, { applicationId })
      yield* eventually(Effect.map(instance.exit, Option.isSome), { what: "the run to fail" })
      const exit = yield* Fiber.await(instance.fiber)
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      assert.ok(error instanceof Unavailable, String(error))
      assert.strictEqual(attempts.get("flaky-9"), 3)
      assert.strictEqual(attempts.get("b") ?? 0, 0, "the record after the failed one never ran")
      assert.deepStrictEqual(lastTally(yield* readCommitted(output)).seen, ["a"], "finished work before the record commits")
      assert.deepStrictEqual([...(yield* groupOffsets(applicationId, input))], [[0, 1]], "nothing past it")
    }))

  it.scopedLive("skip: the record is committed past and counted; unmatched errors stay fatal", () =>
    Effect.gen(function*() {
      const { input, output, transformer } = yield* setup(
        [ErrorRule.tagged("Invalid", { then: "skip" })],
        ["a", "bad-1", "b"]
      )
      const applicationId = unique("rules-app")
      const instance = yield* startInstance(transformer, { applicationId })
      yield* caughtUp(applicationId, input)
      assert.strictEqual(instance.stats.skipped, 1)
      assert.deepStrictEqual(lastTally(yield* readCommitted(output)).seen, ["a", "b"])

      const unmatched = yield* setup([ErrorRule.tagged("Invalid", { then: "skip" })], ["flaky-1"])
      const otherId = unique("rules-app")
      const other = yield* startInstance(unmatched.transformer, { applicationId: otherId })
      yield* eventually(Effect.map(other.exit, Option.isSome), { what: "the unmatched error to end the run" })
      const exit = yield* Fiber.await(other.fiber)
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      assert.ok(
        error instanceof Unavailable && error.value === "flaky-1",
        `the run ends with the transform's typed error as a failure, got ${
          Exit.isFailure(exit) ? `${Cause.isDie(exit.cause) ? "a defect: " : ""}${Cause.pretty(exit.cause)}` : "a success"
        }`
      )
      assert.strictEqual(unmatched.attempts.get("flaky-1"), 1, "no rule, no retry")
      assert.strictEqual(other.stats.skipped, 0, "an unmatched error is never skipped")
      assert.strictEqual((yield* readCommitted(unmatched.output)).length, 0, "nothing committed")
      assert.deepStrictEqual(Object.fromEntries(yield* groupOffsets(otherId, unmatched.input)), { 0: -1 }, "no offset committed")
    }))

  it.live("a dlq rule without a dead letter topic fails at startup with ConfigurationError", () =>
    Effect.gen(function*() {
      const { transformer } = yield* setup([ErrorRule.tagged("Invalid", { then: "dlq" })], [])
      const error = yield* Effect.scoped(Effect.gen(function*() {
        const instance = yield* startInstance(transformer, { applicationId: unique("rules-app") })
        return yield* Effect.flip(Fiber.join(instance.fiber))
      }))
      assert.ok(error instanceof SkeinError.ConfigurationError)
      assert.include(error.message, "deadLetterTopic")
    }))
})

export type Stats = Runner.Stats
