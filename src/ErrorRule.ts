/**
 * Error rules: what happens when a transform fails with one of its typed
 * errors. A rule may retry the transform on a `Schedule` (each attempt sees
 * the state as it was before the failed attempt), then applies a disposition:
 *
 * - `"dlq"`: the record and its error go to the dead letter topic, inside the
 *   batch's transaction; the batch proceeds.
 * - `"fail"`: the run ends with the error; nothing past the record commits.
 * - `"skip"`: the record is committed past, counted in `Runner.Stats.skipped`
 *   and logged.
 *
 * Errors no rule matches, and defects, are fatal. An output too large to send
 * fails its transform with `SkeinError.OutputTooLarge`, which only a rule made
 * with `tagged("OutputTooLarge", ...)` handles.
 *
 * @since 0.1.0
 */
import type { Schedule } from "effect"

/**
 * @since 0.1.0
 * @category models
 */
export type Disposition = "dlq" | "fail" | "skip"

/**
 * @since 0.1.0
 * @category models
 */
export interface ErrorRule<in E> {
  readonly when: (error: E) => boolean
  /** The `_tag` the rule is for, when made with `tagged`: only tagged rules see runtime errors such as `OutputTooLarge`. */
  readonly tag?: string | undefined
  readonly retry?: Schedule.Schedule<unknown, E> | undefined
  readonly then: Disposition
}

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
export const make = <E>(rule: ErrorRule<E>): ErrorRule<E> => rule

/**
 * A rule for errors with the given `_tag`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const tagged = <E extends { readonly _tag: string }>(
  tag: E["_tag"],
  rule: Omit<ErrorRule<E>, "when">
): ErrorRule<E> => ({ ...rule, tag, when: (error) => error._tag === tag })
