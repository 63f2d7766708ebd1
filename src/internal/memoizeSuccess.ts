/**
 * A lazily acquired resource shared by every caller, cached only once it
 * succeeds: a failed acquisition (a broker unreachable at the first task
 * start) is retried by the next caller instead of being replayed forever, as
 * `Effect.cached` would.
 *
 * @internal
 */
import { Effect, Option, SynchronizedRef } from "effect"

/**
 * An effect that runs `acquire` until it succeeds once, then returns that
 * value; a cached value that `discardWhen` finds unusable (a crashed reader)
 * is acquired again by the next caller.
 */
export const memoizeSuccess = <A, E, R>(
  acquire: Effect.Effect<A, E, R>,
  options: { readonly discardWhen?: (value: A) => Effect.Effect<boolean> } = {}
): Effect.Effect<Effect.Effect<A, E, R>> =>
  Effect.map(SynchronizedRef.make(Option.none<A>()), (ref) => {
    const fresh = Effect.map(acquire, (value) => [value, Option.some(value)] as const)
    const discard = options.discardWhen ?? (() => Effect.succeed(false))
    return SynchronizedRef.modifyEffect(ref, (cached) =>
      Option.match(cached, {
        onSome: (value) =>
          Effect.flatMap(discard(value), (unusable) => unusable ? fresh : Effect.succeed([value, cached] as const)),
        onNone: () => fresh
      }))
  })
