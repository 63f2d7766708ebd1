/**
 * How far each task's committed store reflects its inputs (KIP-796's
 * `Position`): per partition, the next offset of each input topic the
 * store's state is past. The runner records a task's offsets after each
 * commit's store write; before its first commit, a task's store reflects
 * its inputs up to the offsets it started from (the committed ones its
 * restore matches). A query with a position bound waits until the store is
 * past the bound's offsets (`atLeast`), or its timeout.
 *
 * @internal
 */
import { Deferred, Effect, FiberId } from "effect"

/** An input offset: the record at `offset` of `topic` (the task's partition of it). */
export interface Bound {
  readonly topic: string
  readonly offset: number
}

export interface Positions {
  /** After a commit's store write: the next offsets of the task's inputs (the commit's offsets). */
  readonly committed: (partition: number, offsets: ReadonlyArray<{ readonly topic: string; readonly offset: number }>) => void
  /** The next offsets the task's committed store is past (`started`: where its task started, the least it is past). */
  readonly of: (partition: number, started: ReadonlyArray<Bound>) => ReadonlyMap<string, number>
  /** Completes at the next `committed` (read when called: a change after the call completes it). */
  readonly nextChange: () => Effect.Effect<void>
}

export const make = (): Positions => {
  const positions = new Map<number, Map<string, number>>()
  let change = Deferred.unsafeMake<void>(FiberId.none)
  return {
    committed: (partition, offsets) => {
      const own = positions.get(partition) ?? new Map<string, number>()
      for (const { topic, offset } of offsets) own.set(topic, Math.max(own.get(topic) ?? 0, offset))
      positions.set(partition, own)
      const done = change
      change = Deferred.unsafeMake<void>(FiberId.none)
      Deferred.unsafeDone(done, Effect.void)
    },
    of: (partition, started) => {
      const own = new Map(positions.get(partition))
      for (const { topic, offset } of started) own.set(topic, Math.max(own.get(topic) ?? 0, offset))
      return own
    },
    nextChange: () => Deferred.await(change)
  }
}

/** True when `position` is past every offset of `bound` (its records are reflected). */
export const reached = (position: ReadonlyMap<string, number>, bound: ReadonlyArray<Bound>): boolean =>
  bound.every(({ offset, topic }) => (position.get(topic) ?? 0) > offset)
