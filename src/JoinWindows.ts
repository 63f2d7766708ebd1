/**
 * The window of a stream-stream join (Kafka Streams' `JoinWindows`): a
 * record of the left stream at `t` joins the right stream's records of its
 * key with timestamps in `[t - before, t + after]` (a right record at `t`:
 * the left records in `[t - after, t + before]`). `grace` admits
 * out-of-order records: a record's window closes once stream time passes
 * its end plus grace, and only then does a left or outer join emit its
 * result without a partner (`l + null`, `null + r`).
 *
 * Durations are milliseconds or any `Duration` input. `before + after`
 * below 0 or a negative grace fail the topology at startup with a
 * `ConfigurationError` naming the fix.
 *
 * @example
 * ```ts
 * import { JoinWindows } from "skein"
 *
 * // orders and payments of one order id at most 5 minutes apart, late records admitted for 1 minute
 * const windows = JoinWindows.ofTimeDifferenceAndGrace("5 minutes", "1 minute")
 * // payments at most 10 minutes after their order, none before
 * const after = windows.pipe(JoinWindows.before(0), JoinWindows.after("10 minutes"))
 * ```
 *
 * @since 0.4.0
 */
import { Duration, Either } from "effect"
import { dual } from "effect/Function"
import * as Pipeable from "effect/Pipeable"
import { ConfigurationError } from "./SkeinError.ts"

/**
 * @since 0.4.0
 * @category symbols
 */
export const TypeId: unique symbol = Symbol.for("skein/JoinWindows")

/**
 * @since 0.4.0
 * @category symbols
 */
export type TypeId = typeof TypeId

/**
 * How far apart (in milliseconds) a left and a right record's timestamps may
 * be to join: the right one at most `beforeMs` before the left one and at
 * most `afterMs` after it; out-of-order records are admitted for `graceMs`
 * after a window's end.
 *
 * @since 0.4.0
 * @category models
 */
export interface JoinWindows extends Pipeable.Pipeable {
  readonly [TypeId]: TypeId
  readonly beforeMs: number
  readonly afterMs: number
  readonly graceMs: number
}

class JoinWindowsValue extends Pipeable.Class() implements JoinWindows {
  readonly [TypeId]: TypeId = TypeId
  constructor(readonly beforeMs: number, readonly afterMs: number, readonly graceMs: number) {
    super()
  }
}

/** Milliseconds of a duration input; a negative number stays negative (validated at startup). */
const millis = (input: Duration.DurationInput): number =>
  typeof input === "number" ? input : Duration.toMillis(Duration.decode(input))

/**
 * Records whose timestamps differ by at most `difference` join; out-of-order
 * records are admitted for `grace` (Kafka Streams'
 * `JoinWindows.ofTimeDifferenceAndGrace`).
 *
 * @example
 * ```ts
 * import { JoinWindows } from "skein"
 *
 * const windows = JoinWindows.ofTimeDifferenceAndGrace("5 minutes", "1 minute")
 * ```
 *
 * @since 0.4.0
 * @category constructors
 */
export const ofTimeDifferenceAndGrace = (difference: Duration.DurationInput, grace: Duration.DurationInput): JoinWindows => {
  const ms = millis(difference)
  return new JoinWindowsValue(ms, ms, millis(grace))
}

/**
 * Records whose timestamps differ by at most `difference` join; no grace: a
 * record's window closes at its end (Kafka Streams'
 * `JoinWindows.ofTimeDifferenceWithNoGrace`).
 *
 * @example
 * ```ts
 * import { JoinWindows } from "skein"
 *
 * const windows = JoinWindows.ofTimeDifferenceWithNoGrace(1000)
 * ```
 *
 * @since 0.4.0
 * @category constructors
 */
export const ofTimeDifferenceWithNoGrace = (difference: Duration.DurationInput): JoinWindows =>
  ofTimeDifferenceAndGrace(difference, 0)

/**
 * The window with right records joining at most `before` earlier than the
 * left record (Kafka Streams' `JoinWindows.before`).
 *
 * @example
 * ```ts
 * import { JoinWindows } from "skein"
 *
 * const onlyAfter = JoinWindows.ofTimeDifferenceAndGrace(1000, 0).pipe(JoinWindows.before(0))
 * ```
 *
 * @since 0.4.0
 * @category combinators
 */
export const before: {
  (before: Duration.DurationInput): (self: JoinWindows) => JoinWindows
  (self: JoinWindows, before: Duration.DurationInput): JoinWindows
} = dual(2, (self: JoinWindows, before: Duration.DurationInput): JoinWindows =>
  new JoinWindowsValue(millis(before), self.afterMs, self.graceMs))

/**
 * The window with right records joining at most `after` later than the
 * left record (Kafka Streams' `JoinWindows.after`).
 *
 * @example
 * ```ts
 * import { JoinWindows } from "skein"
 *
 * const onlyBefore = JoinWindows.ofTimeDifferenceAndGrace(1000, 0).pipe(JoinWindows.after(0))
 * ```
 *
 * @since 0.4.0
 * @category combinators
 */
export const after: {
  (after: Duration.DurationInput): (self: JoinWindows) => JoinWindows
  (self: JoinWindows, after: Duration.DurationInput): JoinWindows
} = dual(2, (self: JoinWindows, after: Duration.DurationInput): JoinWindows =>
  new JoinWindowsValue(self.beforeMs, millis(after), self.graceMs))

/**
 * How long the join keeps a record for partners to come (Kafka Streams'
 * window store retention): `before + after + grace`.
 *
 * @since 0.4.0
 * @category windows
 */
export const retentionMs = (self: JoinWindows): number => self.beforeMs + self.afterMs + self.graceMs

/**
 * The window's settings checked: a `ConfigurationError` with the fix for
 * `before + after` below 0, a negative grace, or a duration that is not a
 * whole number of milliseconds.
 *
 * @example
 * ```ts
 * import { JoinWindows } from "skein"
 *
 * JoinWindows.validate(JoinWindows.ofTimeDifferenceAndGrace(-1, 0)) // Left(ConfigurationError: ...)
 * ```
 *
 * @since 0.4.0
 * @category validation
 */
export const validate = (self: JoinWindows, operator = "a stream-stream join"): Either.Either<JoinWindows, ConfigurationError> => {
  const whole = (n: number) => Number.isSafeInteger(n)
  if (!whole(self.beforeMs) || !whole(self.afterMs) || self.beforeMs + self.afterMs < 0) {
    return Either.left(
      new ConfigurationError({
        problem: `The join window of ${operator} is ${self.beforeMs} ms before and ${self.afterMs} ms after a record: ` +
          "an empty window (before + after below 0, or not whole milliseconds) joins nothing",
        fix: "Give JoinWindows.ofTimeDifferenceAndGrace a difference of 0 or more, and JoinWindows.before/after " +
          "whole milliseconds adding up to 0 or more"
      })
    )
  }
  if (!whole(self.graceMs) || self.graceMs < 0) {
    return Either.left(
      new ConfigurationError({
        problem: `The join window of ${operator} has a grace period of ${self.graceMs} ms`,
        fix: "Give JoinWindows.ofTimeDifferenceAndGrace a grace of 0 or more (a whole number of milliseconds): 0 closes a window at its end"
      })
    )
  }
  return Either.right(self)
}

/**
 * True for a `JoinWindows`.
 *
 * @since 0.4.0
 * @category guards
 */
export const isJoinWindows = (u: unknown): u is JoinWindows => typeof u === "object" && u !== null && TypeId in u
