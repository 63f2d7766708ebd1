/**
 * The batch lock: processing a batch and tearing tasks down exclude each
 * other, so no task is torn down with its transaction in flight.
 *
 * Holding the lock yields a `BatchLockHeld` value; tearing a task down
 * requires one, so teardown outside the lock does not compile.
 *
 * @internal
 */
import { Effect } from "effect"

declare const HeldBrand: unique symbol

/** Proof that the batch lock is held. Only `withLock` creates one. */
export interface BatchLockHeld {
  readonly [HeldBrand]: true
}

export interface BatchLock {
  readonly withLock: <A, E, R>(f: (held: BatchLockHeld) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

const held = {} as BatchLockHeld

export const make: Effect.Effect<BatchLock> = Effect.map(Effect.makeSemaphore(1), (semaphore) => ({
  withLock: (f) => semaphore.withPermits(1)(Effect.suspend(() => f(held)))
}))
