/**
 * The batch lock: processing a batch and tearing tasks down exclude each
 * other, so no task is torn down with its transaction in flight.
 *
 * Holding the lock yields a `BatchLockHeld<L>` permit of that lock (`L`, the
 * lock's name, is in its type); tearing a task down requires one, so teardown
 * outside the lock, or under another lock, does not compile. Only `withLock`
 * makes a permit: its brand is a symbol this module does not export, so no
 * value made elsewhere has the type without a cast. A permit is valid only
 * while its `withLock` runs: `verify` rejects a stale one, another lock's and
 * any value this lock did not issue (a cast), as a defect.
 *
 * @internal
 */
import { Effect } from "effect"

/** The brand only this module can write. */
const heldBy: unique symbol = Symbol("skein/BatchLockHeld")

/** Proof that the batch lock named `L` is held. Only that lock's `withLock` creates one. */
export interface BatchLockHeld<L extends string> {
  readonly [heldBy]: L
  /** The name of the lock held. */
  readonly lock: L
}

export interface BatchLock<L extends string> {
  readonly name: L
  readonly withLock: <A, E, R>(f: (held: BatchLockHeld<L>) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Dies unless `held` is a permit of this lock, held right now. */
  readonly verify: (held: BatchLockHeld<L>) => Effect.Effect<void>
}

/** A batch lock named `name` (the name is its permits' type, and is in its messages). */
export const make = <L extends string>(name: L): Effect.Effect<BatchLock<L>> =>
  Effect.map(Effect.makeSemaphore(1), (semaphore) => {
    /** This lock's permits whose `withLock` is running. */
    const active = new WeakSet<BatchLockHeld<L>>()
    return {
      name,
      withLock: (f) =>
        semaphore.withPermits(1)(
          Effect.acquireUseRelease(
            Effect.sync(() => {
              const held: BatchLockHeld<L> = { [heldBy]: name, lock: name }
              active.add(held)
              return held
            }),
            f,
            (held) => Effect.sync(() => active.delete(held))
          )
        ),
      verify: (held) =>
        active.has(held)
          ? Effect.void
          : Effect.dieMessage(`Skein invariant broken: a task was torn down without holding the ${name} batch lock`)
    }
  })
