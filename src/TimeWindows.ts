/**
 * Fixed-size windows of event time (Kafka Streams' `TimeWindows`): tumbling
 * (`ofSizeAndGrace`) or hopping (`advanceBy`). A window is `[start, end)`
 * with `end = start + size`, aligned to the epoch (starts are multiples of
 * the advance); a record belongs to every window containing its timestamp.
 * A window accepts records while stream time is below `end + grace`; it
 * closes (its final result is due, its state is deleted) once stream time
 * reaches `end + grace`.
 *
 * Sizes are milliseconds or any `Duration` input (`"1 minute"`). A size of 0,
 * a negative grace, or an advance of 0 or above the size fail the topology
 * at startup with a `ConfigurationError` naming the fix.
 *
 * @example
 * ```ts
 * import { TimeWindows } from "skein"
 *
 * const perMinute = TimeWindows.ofSizeAndGrace("1 minute", "10 seconds")
 * const hopping = TimeWindows.ofSizeAndGrace("5 minutes", "10 seconds").pipe(TimeWindows.advanceBy("1 minute"))
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
export const TypeId: unique symbol = Symbol.for("skein/TimeWindows")

/**
 * @since 0.4.0
 * @category symbols
 */
export type TypeId = typeof TypeId

/**
 * Windows of `sizeMs`, starting every `advanceMs` (equal for tumbling
 * windows), accepting records until stream time reaches `end + graceMs`.
 *
 * @since 0.4.0
 * @category models
 */
export interface TimeWindows extends Pipeable.Pipeable {
  readonly [TypeId]: TypeId
  readonly sizeMs: number
  readonly advanceMs: number
  readonly graceMs: number
}

class TimeWindowsValue extends Pipeable.Class() implements TimeWindows {
  readonly [TypeId]: TypeId = TypeId
  constructor(readonly sizeMs: number, readonly advanceMs: number, readonly graceMs: number) {
    super()
  }
}

/** Milliseconds of a duration input; a negative number stays negative (validated at startup). */
const millis = (input: Duration.DurationInput): number =>
  typeof input === "number" ? input : Duration.toMillis(Duration.decode(input))

/**
 * Tumbling windows of `size`, each accepting late records for `grace` after
 * its end (Kafka Streams' `TimeWindows.ofSizeAndGrace`).
 *
 * @example
 * ```ts
 * import { TimeWindows } from "skein"
 *
 * const perMinute = TimeWindows.ofSizeAndGrace("1 minute", "10 seconds")
 * ```
 *
 * @since 0.4.0
 * @category constructors
 */
export const ofSizeAndGrace = (size: Duration.DurationInput, grace: Duration.DurationInput): TimeWindows => {
  const sizeMs = millis(size)
  return new TimeWindowsValue(sizeMs, sizeMs, millis(grace))
}

/**
 * Hopping windows: a window starts every `advance` (at most the size).
 *
 * @example
 * ```ts
 * import { TimeWindows } from "skein"
 *
 * // 5-minute windows starting every minute: a record is in 5 of them
 * const hopping = TimeWindows.ofSizeAndGrace("5 minutes", 0).pipe(TimeWindows.advanceBy("1 minute"))
 * ```
 *
 * @since 0.4.0
 * @category combinators
 */
export const advanceBy: {
  (advance: Duration.DurationInput): (self: TimeWindows) => TimeWindows
  (self: TimeWindows, advance: Duration.DurationInput): TimeWindows
} = dual(2, (self: TimeWindows, advance: Duration.DurationInput): TimeWindows =>
  new TimeWindowsValue(self.sizeMs, millis(advance), self.graceMs))

/**
 * The windows' settings checked: a `ConfigurationError` with the fix for a
 * size of 0 or less, a negative grace, or an advance of 0 or above the size.
 *
 * @example
 * ```ts
 * import { TimeWindows } from "skein"
 *
 * TimeWindows.validate(TimeWindows.ofSizeAndGrace(0, 0)) // Left(ConfigurationError: ... size ...)
 * ```
 *
 * @since 0.4.0
 * @category validation
 */
export const validate = (self: TimeWindows, operator = "a windowed aggregation"): Either.Either<TimeWindows, ConfigurationError> => {
  const whole = (n: number) => Number.isSafeInteger(n)
  if (!whole(self.sizeMs) || self.sizeMs <= 0) {
    return Either.left(
      new ConfigurationError({
        problem: `The windows of ${operator} have a size of ${self.sizeMs} ms`,
        fix: "Give TimeWindows.ofSizeAndGrace a size of at least 1 ms (a whole number of milliseconds, or a Duration such as \"1 minute\")"
      })
    )
  }
  if (!whole(self.graceMs) || self.graceMs < 0) {
    return Either.left(
      new ConfigurationError({
        problem: `The windows of ${operator} have a grace period of ${self.graceMs} ms`,
        fix: "Give TimeWindows.ofSizeAndGrace a grace of 0 or more (a whole number of milliseconds): 0 closes a window at its end"
      })
    )
  }
  if (!whole(self.advanceMs) || self.advanceMs <= 0 || self.advanceMs > self.sizeMs) {
    return Either.left(
      new ConfigurationError({
        problem: `The windows of ${operator} advance by ${self.advanceMs} ms, with a size of ${self.sizeMs} ms`,
        fix: "Give TimeWindows.advanceBy an advance of at least 1 ms and at most the window size (equal to it: tumbling windows)"
      })
    )
  }
  return Either.right(self)
}

/**
 * The starts of the windows containing `timestamp`, ascending (Kafka
 * Streams' `windowsFor`: no window starts before 0).
 *
 * @example
 * ```ts
 * import { TimeWindows } from "skein"
 *
 * TimeWindows.startsFor(TimeWindows.ofSizeAndGrace(1000, 0).pipe(TimeWindows.advanceBy(500)), 1200) // [500, 1000]
 * ```
 *
 * @since 0.4.0
 * @category windows
 */
export const startsFor = (self: TimeWindows, timestamp: number): ReadonlyArray<number> => {
  const starts: Array<number> = []
  let start = Math.floor(Math.max(0, timestamp - self.sizeMs + self.advanceMs) / self.advanceMs) * self.advanceMs
  while (start <= timestamp) {
    starts.push(start)
    start += self.advanceMs
  }
  return starts
}
