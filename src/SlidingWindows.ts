/**
 * Sliding windows of event time (Kafka Streams' `SlidingWindows`): windows
 * `[t - timeDifference, t]`, inclusive at both ends, made as records arrive,
 * one per distinct set of records of a key within `timeDifference` of each
 * other: a record's own window ending at it, and the window starting just
 * after it when later records are within reach. A window accepts records
 * until stream time passes `end + grace`; its final result is due then.
 *
 * @example
 * ```ts
 * import { SlidingWindows } from "skein"
 *
 * // for each order, the orders of the same customer in the 10 minutes before it
 * const lastTenMinutes = SlidingWindows.ofTimeDifferenceAndGrace("10 minutes", "30 seconds")
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
export const TypeId: unique symbol = Symbol.for("skein/SlidingWindows")

/**
 * @since 0.4.0
 * @category symbols
 */
export type TypeId = typeof TypeId

/**
 * Sliding windows spanning `timeDifferenceMs`, accepting records until
 * stream time passes `end + graceMs`.
 *
 * @since 0.4.0
 * @category models
 */
export interface SlidingWindows extends Pipeable.Pipeable {
  readonly [TypeId]: TypeId
  readonly timeDifferenceMs: number
  readonly graceMs: number
}

class SlidingWindowsValue extends Pipeable.Class() implements SlidingWindows {
  readonly [TypeId]: TypeId = TypeId
  constructor(readonly timeDifferenceMs: number, readonly graceMs: number) {
    super()
  }
}

const millis = (input: Duration.DurationInput): number =>
  typeof input === "number" ? input : Duration.toMillis(Duration.decode(input))

/**
 * Sliding windows of `timeDifference`, each accepting late records for
 * `grace` after its end (Kafka Streams' `SlidingWindows.ofTimeDifferenceAndGrace`).
 *
 * @example
 * ```ts
 * import { SlidingWindows } from "skein"
 *
 * const windows = SlidingWindows.ofTimeDifferenceAndGrace("10 minutes", "30 seconds")
 * ```
 *
 * @since 0.4.0
 * @category constructors
 */
export const ofTimeDifferenceAndGrace = (
  timeDifference: Duration.DurationInput,
  grace: Duration.DurationInput
): SlidingWindows => new SlidingWindowsValue(millis(timeDifference), millis(grace))

/**
 * True for sliding windows.
 *
 * @example
 * ```ts
 * import { SlidingWindows, TimeWindows } from "skein"
 *
 * SlidingWindows.isSlidingWindows(TimeWindows.ofSizeAndGrace(1000, 0)) // false
 * ```
 *
 * @since 0.4.0
 * @category guards
 */
export const isSlidingWindows = (u: unknown): u is SlidingWindows => typeof u === "object" && u !== null && TypeId in u

/**
 * The windows' settings checked: a `ConfigurationError` with the fix for a
 * time difference of 0 or less or a negative grace.
 *
 * @example
 * ```ts
 * import { SlidingWindows } from "skein"
 *
 * SlidingWindows.validate(SlidingWindows.ofTimeDifferenceAndGrace(0, 0)) // Left(ConfigurationError)
 * ```
 *
 * @since 0.4.0
 * @category validation
 */
export const validate = (
  self: SlidingWindows,
  operator = "a windowed aggregation"
): Either.Either<SlidingWindows, ConfigurationError> => {
  if (!Number.isSafeInteger(self.timeDifferenceMs) || self.timeDifferenceMs <= 0) {
    return Either.left(
      new ConfigurationError({
        problem: `The sliding windows of ${operator} have a time difference of ${self.timeDifferenceMs} ms`,
        fix: "Give SlidingWindows.ofTimeDifferenceAndGrace a time difference of at least 1 ms (a whole number of milliseconds, or a Duration)"
      })
    )
  }
  if (!Number.isSafeInteger(self.graceMs) || self.graceMs < 0) {
    return Either.left(
      new ConfigurationError({
        problem: `The sliding windows of ${operator} have a grace period of ${self.graceMs} ms`,
        fix: "Give SlidingWindows.ofTimeDifferenceAndGrace a grace of 0 or more (a whole number of milliseconds)"
      })
    )
  }
  return Either.right(self)
}
