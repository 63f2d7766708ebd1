/**
 * A lazily acquired resource shared by every caller, cached only once it
 * succeeds: a failed acquisition (a broker unreachable at the first task
 * start) is retried by the next caller instead of being replayed forever, as
 * `Effect.cached` would.
 *
 * @internal
 */
import { Effect, Option, SynchronizedRef } from "effect"

/** An effect that runs `acquire` until it succeeds once, then returns that value. */
export const memoizeSuccess = <A, E, R>(acquire: Effect.Effect<A, E, R>): Effect.Effect<Effect.Effect<A, E, R>> =>
  Effect.map(SynchronizedRef.make(Option.none<A>()), (ref) =>
    SynchronizedRef.modifyEffect(ref, (cached) =>
      Option.match(cached, {
        onSome: (value) => Effect.succeed([value, cached] as const),
        onNone: () => Effect.map(acquire, (value) => [value, Option.some(value)] as const)
      })))
