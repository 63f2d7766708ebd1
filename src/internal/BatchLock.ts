/**
 * The batch lock: processing a batch and tearing tasks down exclude each
 * other, so no task is torn down with its transaction in flight.
 *
 * Holding the lock yields a `BatchLockHeld` permit; tearing a task down
 * requires one, so teardown outside the lock does not compile. A permit is
 * valid only while its `withLock` runs: `verify` rejects a stale one and any
 * value not issued by a lock (a forged cast), as a defect.
 *
 * @internal
 */
import { Effect } from "effect"

/** Proof that the batch lock is held. Only `withLock` creates one. */
export class BatchLockHeld {
  /** Private: no object literal (or other class) has the shape of a permit. */
  readonly #issued: true = true
  /** Whether this permit's lock is still held. */
  isHeld(): boolean {
    return this.#issued && active.has(this)
  }
}

/** The permits whose `withLock` is running. */
const active = new WeakSet<BatchLockHeld>()

export interface BatchLock {
  readonly withLock: <A, E, R>(f: (held: BatchLockHeld) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** Dies unless `held` is a permit of a lock held right now. */
export const verify = (held: BatchLockHeld): Effect.Effect<void> =>
  held instanceof BatchLockHeld && held.isHeld()
    ? Effect.void
    : Effect.dieMessage("Skein invariant broken: a task was torn down without holding the batch lock")

export const make: Effect.Effect<BatchLock> = Effect.map(Effect.makeSemaphore(1), (semaphore) => ({
  withLock: (f) =>
    semaphore.withPermits(1)(
      Effect.acquireUseRelease(
        Effect.sync(() => {
          const held = new BatchLockHeld()
          active.add(held)
          return held
        }),
        f,
        (held) => Effect.sync(() => active.delete(held))
      )
    )
}))
