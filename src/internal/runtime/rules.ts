/**
 * Error rules applied to one record: retries on the matching rule's
 * schedule, then its disposition.
 *
 * A rule sees only the transform's own errors, and `OutputTooLarge`,
 * `PartitionOutOfRange`, `TimestampOutOfRange` or `StateNotStorable` when it is made with
 * `ErrorRule.tagged` for its tag. Runtime errors never reach a rule: they
 * fail the record as they are (`KafkaError`: the broker failed while the
 * outputs were prepared or a run was stored; `EncodeError`: the transform
 * returned a value its topic cannot encode; a durable workflow's
 * `StateStoreError`, `TaskMigrated` and `StoredStateInvalid`).
 *
 * @internal
 */
import { Clock, Duration, Effect, Either, Option, Schedule } from "effect"
import { defaultMaxRetryDuration } from "../../ErrorRule.ts"
import { describe as describeError } from "../util/errorText.ts"
import {
  DatabaseError,
  EncodeError,
  KafkaError,
  OutputTooLarge,
  PartitionOutOfRange,
  StateNotStorable,
  StateStoreError,
  StoredStateInvalid,
  TaskMigrated,
  TimestampOutOfRange
} from "../../SkeinError.ts"
import type { Rule } from "../../Transformer.ts"

/** How a record ended under the rules: its attempt's value, or a disposition for its error. */
export type Ruled<A> =
  | { readonly _tag: "Succeeded"; readonly value: A }
  | { readonly _tag: "Skipped"; readonly error: unknown }
  | { readonly _tag: "DeadLettered"; readonly error: unknown }

/** Errors of the runtime itself (`Transformer.RuntimeError` but `StateNotStorable`): no rule ever sees them. */
const isRuntimeError = (error: unknown): boolean =>
  error instanceof KafkaError || error instanceof DatabaseError || error instanceof EncodeError || error instanceof StateStoreError ||
  error instanceof TaskMigrated || error instanceof StoredStateInvalid

/**
 * Whether a rule handles an error: a tagged rule by `_tag`, any other by its
 * `when`, which never sees Skein's own errors.
 */
export const matches = <E>(rule: Rule<E>, error: unknown): boolean => {
  if (isRuntimeError(error)) return false
  if (rule.tag !== undefined) {
    return typeof error === "object" && error !== null && "_tag" in error && error._tag === rule.tag
  }
  if (
    error instanceof OutputTooLarge || error instanceof PartitionOutOfRange || error instanceof TimestampOutOfRange ||
    error instanceof StateNotStorable
  ) return false
  return (rule.when as (e: unknown) => boolean)(error)
}

/**
 * Runs `attempt` (a fresh attempt each call) under `rules`: the first matching
 * rule retries on its schedule while its errors match, then applies its
 * disposition. `onRetry` counts each retry. Unmatched errors, `"fail"`, and
 * `"dlq"` without a dead letter topic fail with the error.
 */
export const apply = <A, E, R>(
  rules: ReadonlyArray<Rule<E>>,
  attempt: () => Effect.Effect<A, unknown, R>,
  options: { readonly hasDeadLetterTopic: boolean; readonly onRetry: () => void }
): Effect.Effect<Ruled<A>, unknown, R> =>
  Effect.catchAll(
    Effect.map(attempt(), (value): Ruled<A> => ({ _tag: "Succeeded", value })),
    (failed) => recover(rules, failed, attempt, options)
  )

/**
 * The rules applied to an attempt that failed with `failed`: `apply` after its
 * first attempt. A record that succeeds at once never gets here, so its only
 * cost of the rules is one `catchAll` (no generator per record).
 */
export const recover = <A, E, R>(
  rules: ReadonlyArray<Rule<E>>,
  failed: unknown,
  attempt: () => Effect.Effect<A, unknown, R>,
  options: { readonly hasDeadLetterTopic: boolean; readonly onRetry: () => void }
): Effect.Effect<Ruled<A>, unknown, R> =>
  Effect.gen(function*() {
    const rule = rules.find((r) => matches(r, failed))
    if (rule === undefined) return yield* Effect.fail(failed)
    let outcome: Either.Either<A, unknown> = Either.left(failed)
    if (rule.retry !== undefined) {
      const driver = yield* Schedule.driver(rule.retry as Schedule.Schedule<unknown, unknown>)
      // The retries end at the rule's deadline, whatever its schedule: the partition's later records wait.
      const budget = Duration.decode(rule.maxRetryDuration ?? defaultMaxRetryDuration)
      const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(budget)
      while (Either.isLeft(outcome) && matches(rule, outcome.left)) {
        const remaining = deadline - (yield* Clock.currentTimeMillis)
        const step = remaining <= 0
          ? Option.none()
          : yield* Effect.timeoutOption(Effect.either(driver.next(outcome.left)), Duration.millis(remaining))
        if (Option.isNone(step)) {
          yield* Effect.logWarning(
            `a record's retries reached its rule's maxRetryDuration (${Duration.format(budget)}); ` +
              `the rule's then ("${rule.then}") takes it. Its last error: ${describeError(outcome.left)}`
          )
          break
        }
        if (Either.isLeft(step.value)) break
        options.onRetry()
        outcome = yield* Effect.either(attempt())
      }
    }
    if (Either.isRight(outcome)) return { _tag: "Succeeded", value: outcome.right } as const
    const error = outcome.left
    if (rule.then === "fail" || !matches(rule, error)) return yield* Effect.fail(error)
    if (rule.then === "skip") return { _tag: "Skipped", error } as const
    if (!options.hasDeadLetterTopic) return yield* Effect.fail(error)
    return { _tag: "DeadLettered", error } as const
  })
