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

/**
 * A batch lock per task, under one name: processing a task's batch holds
 * that task's lock (`withKey`), so tasks process side by side; tearing one
 * down needs its lock, tearing all down needs every one (`withAll`). A
 * permit says which keys it holds: `verify(held, key)` rejects a permit of
 * another task, a stale one and one this lock did not issue.
 */
export interface KeyedBatchLock<L extends string> {
  readonly name: L
  /** Runs `f` holding `key`'s lock. */
  readonly withKey: <A, E, R>(key: number, f: (held: BatchLockHeld<L>) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Runs `f` holding every key's lock (taken in key order; no key is added meanwhile). */
  readonly withAll: <A, E, R>(f: (held: BatchLockHeld<L>) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Dies unless `held` is a permit of this lock holding `key`, held right now. */
  readonly verify: (held: BatchLockHeld<L>, key: number) => Effect.Effect<void>
}

/** A keyed batch lock named `name`. */
export const makeKeyed = <L extends string>(name: L): Effect.Effect<KeyedBatchLock<L>> =>
  Effect.map(Effect.makeSemaphore(1), (registry) => {
    const locks = new Map<number, Effect.Semaphore>()
    /** Live permits and the keys each holds (`"all"`: every key). */
    const active = new WeakMap<BatchLockHeld<L>, number | "all">()
    /** A key's lock, made on first use; never while `withAll` holds the registry. */
    const lockOf = (key: number): Effect.Effect<Effect.Semaphore> =>
      Effect.suspend(() => {
        const existing = locks.get(key)
        if (existing !== undefined) return Effect.succeed(existing)
        return registry.withPermits(1)(Effect.sync(() => {
          const made = locks.get(key) ?? Effect.unsafeMakeSemaphore(1)
          locks.set(key, made)
          return made
        }))
      })
    const issue = <A, E, R>(keys: number | "all", f: (held: BatchLockHeld<L>) => Effect.Effect<A, E, R>) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          const held: BatchLockHeld<L> = { [heldBy]: name, lock: name }
          active.set(held, keys)
          return held
        }),
        f,
        (held) => Effect.sync(() => active.delete(held))
      )
    const holdingAll = <A, E, R>(keys: ReadonlyArray<number>, f: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
      const [first, ...rest] = keys
      return first === undefined ? f : locks.get(first)!.withPermits(1)(holdingAll(rest, f))
    }
    return {
      name,
      withKey: (key, f) => Effect.flatMap(lockOf(key), (lock) => lock.withPermits(1)(issue(key, f))),
      withAll: (f) =>
        registry.withPermits(1)(Effect.suspend(() => holdingAll([...locks.keys()].sort((a, b) => a - b), issue("all", f)))),
      verify: (held, key) => {
        const keys = active.get(held)
        return keys === "all" || keys === key
          ? Effect.void
          : Effect.dieMessage(`Skein invariant broken: task ${key} was torn down without holding its ${name} batch lock`)
      }
    }
  })
