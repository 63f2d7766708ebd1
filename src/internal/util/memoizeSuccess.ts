/**
 * A lazily acquired resource shared by every caller, cached only once it
 * succeeds: a failed acquisition (a broker unreachable at the first task
 * start) is retried by the next caller instead of being replayed forever, as
 * `Effect.cached` would.
 *
 * @internal
 */
import { Effect, ExecutionStrategy, Exit, Option, Scope, SynchronizedRef } from "effect"

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

/**
 * `memoizeSuccess` of a scoped resource (the changelog readers, the standby
 * reader): each acquisition gets a scope of its own, a child of the current
 * one. A value `discardWhen` finds unusable (a crashed reader) is released,
 * its scope closed, before the next caller acquires a new one, and a failed
 * acquisition releases what it acquired: neither stays pinned to the current
 * scope until it closes. The value cached then is released with it.
 */
export const memoizeScoped = <A, E, R>(
  acquire: Effect.Effect<A, E, R | Scope.Scope>,
  options: { readonly discardWhen?: (value: A) => Effect.Effect<boolean> } = {}
): Effect.Effect<Effect.Effect<A, E, Exclude<R, Scope.Scope>>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const outer = yield* Effect.scope
    /** The scope of the value cached now. */
    let current: Scope.CloseableScope | undefined = undefined
    const fresh = Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        // Only ever called with nothing cached or the cached value discarded.
        if (current !== undefined) {
          const discarded = current
          current = undefined
          yield* Scope.close(discarded, Exit.void)
        }
        const scope = yield* Scope.fork(outer, ExecutionStrategy.sequential)
        const acquired = yield* Effect.exit(restore(Scope.extend(acquire, scope)))
        if (Exit.isFailure(acquired)) {
          yield* Scope.close(scope, acquired)
          return yield* acquired
        }
        current = scope
        return acquired.value
      })
    )
    return yield* memoizeSuccess(fresh, options)
  })
