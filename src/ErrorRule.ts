/**
 * Error rules: what happens when a transform fails with one of its typed
 * errors. A rule may retry the transform on a `Schedule` (each attempt sees
 * the state as it was before the failed attempt), for at most its
 * `maxRetryDuration` (default `defaultMaxRetryDuration`: a record retrying
 * holds back the later records of its partition, never another partition's),
 * then applies a disposition:
 *
 * - `"dlq"`: the record and its error go to the dead letter topic, inside the
 *   batch's transaction; the batch proceeds.
 * - `"fail"`: the run ends with the error; nothing past the record commits.
 * - `"skip"`: the record is committed past, counted in `Runner.Stats.skipped`
 *   and logged.
 *
 * Errors no rule matches, and defects, are fatal. An output too large to send
 * fails its transform with `SkeinError.OutputTooLarge`, which only a rule made
 * with `tagged("OutputTooLarge", ...)` handles; an output naming a partition
 * its topic does not have, with `SkeinError.PartitionOutOfRange`, and an
 * output whose timestamp its topic refuses (further ahead of the clock than
 * its `message.timestamp.after.max.ms`), with `SkeinError.TimestampOutOfRange`
 * (likewise).
 *
 * @since 0.1.0
 */
import type { Duration, Schedule } from "effect"

/**
 * How long a rule retries one record when it sets no `maxRetryDuration`: one
 * minute from the record's first failure. The schedule's next attempt is not
 * started past it, and the rule's `then` takes the record (an endless
 * `Schedule.spaced` included).
 *
 * @since 0.2.0
 * @category constants
 */
export const defaultMaxRetryDuration: Duration.DurationInput = "1 minute"

/**
 * What a rule does with a failed record once its retries, if any, are
 * spent: dead-letter it (`"dlq"`), end the run (`"fail"`) or skip it (`"skip"`).
 *
 * @example
 * ```ts
 * import { ErrorRule } from "skein"
 *
 * const disposition: ErrorRule.Disposition = "dlq" // or "fail", or "skip"
 * ErrorRule.tagged("Invalid", { then: disposition })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Disposition = "dlq" | "fail" | "skip"

/**
 * A rule for the errors its `when` accepts, made with `make`. It never sees
 * Skein's own errors (`OutputTooLarge`, `PartitionOutOfRange`,
 * `TimestampOutOfRange`, `EncodeError`).
 *
 * @example
 * ```ts
 * import { ErrorRule } from "skein"
 *
 * interface ApiError { readonly status: number }
 * const serverErrors: ErrorRule.PredicateRule<ApiError> = ErrorRule.make({
 *   when: (e: ApiError) => e.status >= 500,
 *   then: "dlq"
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface PredicateRule<in E> {
  readonly when: (error: E) => boolean
  /** Always unset: a rule with a tag is a `TaggedRule`. */
  readonly tag?: undefined
  readonly retry?: Schedule.Schedule<unknown, E> | undefined
  /** How long `retry` may retry one record, from its first failure (`defaultMaxRetryDuration` when unset). */
  readonly maxRetryDuration?: Duration.DurationInput | undefined
  readonly then: Disposition
}

/**
 * A rule for the errors with one `_tag`, made with `tagged`. Its `retry`
 * schedule receives the failed attempts' errors (`E`; `unknown` when it reads
 * none). Tagged rules also see Skein's runtime errors such as `OutputTooLarge`,
 * `PartitionOutOfRange` and `TimestampOutOfRange`.
 *
 * @example
 * ```ts
 * import { Schedule } from "effect"
 * import { ErrorRule } from "skein"
 *
 * const unavailable: ErrorRule.TaggedRule<"Unavailable"> = ErrorRule.tagged("Unavailable", {
 *   retry: Schedule.recurs(3),
 *   then: "dlq"
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface TaggedRule<out Tag extends string, in E = unknown> {
  readonly tag: Tag
  /** Matches by `_tag`. */
  readonly when: (error: { readonly _tag: string }) => boolean
  readonly retry?: Schedule.Schedule<unknown, E> | undefined
  /** How long `retry` may retry one record, from its first failure (`defaultMaxRetryDuration` when unset). */
  readonly maxRetryDuration?: Duration.DurationInput | undefined
  readonly then: Disposition
}

/**
 * The tagged rules for errors `E`: a rule for one of `E`'s tags, whose
 * schedule accepts `E`. `never` when some error of `E` has no `_tag` (use
 * `make` for those).
 *
 * The check type is `NoInfer<E>` on purpose: a distributive conditional over
 * `E` here makes TypeScript fix a transformer's `E` (to `never`) before its
 * transform is inferred, so inline rules would not compile.
 *
 * @example
 * ```ts
 * import { ErrorRule } from "skein"
 *
 * type AppError = Unavailable | Invalid // Data.TaggedError classes
 * // a tagged rule for "Unavailable" or "Invalid"; any other tag is a type error
 * const rule: ErrorRule.TaggedRuleFor<AppError> = ErrorRule.tagged("Invalid", { then: "skip" })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type TaggedRuleFor<E> = NoInfer<E> extends { readonly _tag: infer Tag extends string } ? TaggedRule<Tag, NoInfer<E>>
  : never

/**
 * A rule that handles errors `E`: a predicate over `E`, or a tagged rule for
 * one of `E`'s tags. A tagged rule for a tag that `E` does not have is a type
 * error.
 *
 * @example
 * ```ts
 * import { Schedule } from "effect"
 * import { ErrorRule } from "skein"
 *
 * const rules: ReadonlyArray<ErrorRule.ErrorRule<Unavailable | Invalid>> = [
 *   ErrorRule.tagged("Unavailable", { retry: Schedule.recurs(3), then: "dlq" }),
 *   ErrorRule.make({ when: (e: Unavailable | Invalid) => e._tag === "Invalid", then: "skip" })
 * ]
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type ErrorRule<E> = PredicateRule<E> | TaggedRuleFor<E>

/**
 * A rule for the errors `when` accepts.
 *
 * @example
 * ```ts
 * ErrorRule.make({
 *   when: (e: ApiError) => e.status >= 500,
 *   retry: Schedule.exponential("100 millis").pipe(Schedule.intersect(Schedule.recurs(3))),
 *   then: "dlq"
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <E>(rule: Omit<PredicateRule<E>, "tag">): PredicateRule<E> => rule

/**
 * A rule for errors with the given `_tag`. Inline in a transformer's
 * `rules: [...]` it needs no annotation: the tag is checked against the
 * transform's errors (and `OutputTooLarge`, `PartitionOutOfRange`), and a `retry` schedule receives
 * the transform's errors.
 *
 * @example
 * ```ts
 * rules: [
 *   ErrorRule.tagged("Unavailable", { retry: Schedule.recurs(3), then: "dlq" }),
 *   ErrorRule.tagged("Invalid", { then: "skip" })
 * ]
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const tagged = <const Tag extends string, E = unknown>(
  tag: Tag,
  rule: {
    readonly retry?: Schedule.Schedule<unknown, E> | undefined
    readonly maxRetryDuration?: Duration.DurationInput | undefined
    readonly then: Disposition
  }
): TaggedRule<Tag, NoInfer<E>> => ({ ...rule, tag, when: (error) => error._tag === tag })
