/**
 * Timers: a transform schedules a named timer for its record's state key, on
 * stream time or on wall-clock time, and the transformer's `onTimer` runs
 * when it is due (Kafka Streams' punctuators, per key).
 *
 * A timer is identified by its state key and its name: scheduling a name
 * again replaces the timer (whatever its domain), `cancel` deletes it. Timers
 * are kept in the task's changelogged state, written in the transaction of
 * the record (or the timer) that scheduled them: they survive restarts and
 * follow the task to its new owner. A timer fires once; `onTimer` schedules
 * it again for a recurring one.
 *
 * - **Stream time** is the task's: the largest timestamp of the records its
 *   partition has read (records without one, -1, leave it). A stream-time
 *   timer fires when a record moves stream time to or past it, right after
 *   that record (Kafka Streams punctuates after processing the record), in
 *   the same transaction.
 * - **Wall-clock time** is the `Clock`'s (so `TestClock` in tests). A
 *   wall-clock timer fires at the first batch of its task at or after its
 *   time: the runner starts a batch for a task whose timers are due even when
 *   no record arrives.
 *
 * Due timers fire in time order, then by state key, then by name.
 *
 * @example
 * ```ts
 * import { Clock, Effect } from "effect"
 * import { Timer } from "skein"
 *
 * // in a transform: alert unless the device sends again within 5 minutes
 * const result = Effect.map(Clock.currentTimeMillis, (now) => ({ timers: [Timer.wallClock("silence", now + 300_000)] }))
 * ```
 *
 * @since 0.4.0
 */

/**
 * The clock a timer runs on: the task's stream time, or the wall clock.
 *
 * @since 0.4.0
 * @category models
 */
export type Domain = "stream-time" | "wall-clock"

/**
 * A scheduled timer of a state key: its name, its clock and its time (epoch
 * milliseconds).
 *
 * @since 0.4.0
 * @category models
 */
export interface Timer {
  readonly name: string
  readonly domain: Domain
  readonly at: number
}

/**
 * A timer that fired, as `onTimer` receives it: the timer, its state key, and
 * `time`, its clock's time when it fired (stream time, or the wall clock's):
 * at or past `at`. Outputs of `onTimer` carry `time` as their timestamp unless
 * they set their own.
 *
 * @since 0.4.0
 * @category models
 */
export interface Fired extends Timer {
  readonly key: string
  readonly time: number
}

/**
 * A change to the timers of a state key, returned in a result's `timers`.
 *
 * @since 0.4.0
 * @category models
 */
export type Change =
  | { readonly _tag: "Schedule"; readonly timer: Timer }
  | { readonly _tag: "Cancel"; readonly name: string }

/**
 * Schedules (or moves) timer `name` of the state key to stream time `at`.
 *
 * @example
 * ```ts
 * import { Timer } from "skein"
 *
 * // fires once a record of the task is 5 minutes of event time past this one
 * const change = Timer.streamTime("silence", record.timestamp + 300_000)
 * ```
 *
 * @since 0.4.0
 * @category constructors
 */
export const streamTime = (name: string, at: number): Change => ({ _tag: "Schedule", timer: { name, domain: "stream-time", at } })

/**
 * Schedules (or moves) timer `name` of the state key to wall-clock time `at`
 * (epoch milliseconds, as `Clock.currentTimeMillis`).
 *
 * @example
 * ```ts
 * import { Timer } from "skein"
 *
 * const change = Timer.wallClock("reminder", now + 60_000)
 * ```
 *
 * @since 0.4.0
 * @category constructors
 */
export const wallClock = (name: string, at: number): Change => ({ _tag: "Schedule", timer: { name, domain: "wall-clock", at } })

/**
 * Cancels timer `name` of the state key (nothing when there is none).
 *
 * @example
 * ```ts
 * import { Timer } from "skein"
 *
 * const change = Timer.cancel("silence")
 * ```
 *
 * @since 0.4.0
 * @category constructors
 */
export const cancel = (name: string): Change => ({ _tag: "Cancel", name })
