/**
 * Session windows of event time (Kafka Streams' `SessionWindows`): a key's
 * records within `inactivityGap` of each other form one session
 * `[first, last]`; a record that bridges two sessions merges them. A session
 * accepts records while its end is above stream time minus the gap and the
 * grace; its final result is due once stream time reaches `end + gap + grace`.
 *
 * @example
 * ```ts
 * import { SessionWindows } from "skein"
 *
 * // a user's activity, split by 5 minutes of silence
 * const visits = SessionWindows.ofInactivityGapAndGrace("5 minutes", "30 seconds")
 * ```
 *
 * @since 0.4.0
 */
import { Duration, Either } from "effect"
import * as Pipeable from "effect/Pipeable"
import { ConfigurationError } from "./SkeinError.ts"

/**
 * @since 0.4.0
 * @category symbols
 */
export const TypeId: unique symbol = Symbol.for("skein/SessionWindows")

/**
 * @since 0.4.0
 * @category symbols
 */
export type TypeId = typeof TypeId

/**
 * Sessions split by `inactivityGapMs` without records, accepting late
 * records for `graceMs`.
 *
 * @since 0.4.0
 * @category models
 */
export interface SessionWindows extends Pipeable.Pipeable {
  readonly [TypeId]: TypeId
  readonly inactivityGapMs: number
  readonly graceMs: number
}

class SessionWindowsValue extends Pipeable.Class() implements SessionWindows {
  readonly [TypeId]: TypeId = TypeId
  constructor(readonly inactivityGapMs: number, readonly graceMs: number) {
    super()
  }
}

const millis = (input: Duration.DurationInput): number =>
  typeof input === "number" ? input : Duration.toMillis(Duration.decode(input))

/**
 * Sessions split by `inactivityGap` (Kafka Streams' `SessionWindows.ofInactivityGapAndGrace`).
 *
 * @example
 * ```ts
 * import { SessionWindows } from "skein"
 *
 * const visits = SessionWindows.ofInactivityGapAndGrace("5 minutes", "30 seconds")
 * ```
 *
 * @since 0.4.0
 * @category constructors
 */
export const ofInactivityGapAndGrace = (
  inactivityGap: Duration.DurationInput,
  grace: Duration.DurationInput
): SessionWindows => new SessionWindowsValue(millis(inactivityGap), millis(grace))

/**
 * True for session windows.
 *
 * @example
 * ```ts
 * import { SessionWindows, TimeWindows } from "skein"
 *
 * SessionWindows.isSessionWindows(TimeWindows.ofSizeAndGrace(1000, 0)) // false
 * ```
 *
 * @since 0.4.0
 * @category guards
 */
export const isSessionWindows = (u: unknown): u is SessionWindows => typeof u === "object" && u !== null && TypeId in u

/**
 * The windows' settings checked: a `ConfigurationError` with the fix for a
 * gap of 0 or less or a negative grace.
 *
 * @example
 * ```ts
 * import { SessionWindows } from "skein"
 *
 * SessionWindows.validate(SessionWindows.ofInactivityGapAndGrace(0, 0)) // Left(ConfigurationError)
 * ```
 *
 * @since 0.4.0
 * @category validation
 */
export const validate = (
  self: SessionWindows,
  operator = "a session-window aggregation"
): Either.Either<SessionWindows, ConfigurationError> => {
  if (!Number.isSafeInteger(self.inactivityGapMs) || self.inactivityGapMs <= 0) {
    return Either.left(
      new ConfigurationError({
        problem: `The session windows of ${operator} have an inactivity gap of ${self.inactivityGapMs} ms`,
        fix: "Give SessionWindows.ofInactivityGapAndGrace a gap of at least 1 ms (a whole number of milliseconds, or a Duration)"
      })
    )
  }
  if (!Number.isSafeInteger(self.graceMs) || self.graceMs < 0) {
    return Either.left(
      new ConfigurationError({
        problem: `The session windows of ${operator} have a grace period of ${self.graceMs} ms`,
        fix: "Give SessionWindows.ofInactivityGapAndGrace a grace of 0 or more (a whole number of milliseconds)"
      })
    )
  }
  return Either.right(self)
}
