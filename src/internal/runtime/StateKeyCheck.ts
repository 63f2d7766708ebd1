/**
 * Detects a state key that spans input partitions. State lives per task
 * (input partition number N), so a `stateKey` that differs from the record key
 * splits a key's state when its records land on more than one partition: each
 * partition keeps its own copy and neither sees the other's updates.
 *
 * The tracker remembers the first partition each state key was seen on and
 * reports the first time a key shows up on another one (once per key). It is a
 * `Map` lookup per record, bounded to `capacity` keys (the oldest are
 * forgotten first, so a split is reported on a best-effort basis), and it sees
 * only the partitions of this instance.
 *
 * @internal
 */
import { Effect } from "effect"

/** A state key seen on two input partitions. */
export interface SplitKey {
  readonly stateKey: string
  readonly firstPartition: number
  readonly partition: number
}

/** Remembers where state keys were seen; queues a `SplitKey` the first time one spans partitions. */
export interface StateKeyCheck {
  /** Records that `stateKey` was seen on `partition`; returns the split it reveals, once per key. */
  readonly observe: (stateKey: string, partition: number) => SplitKey | undefined
  /** The splits observed since the last call, in order. */
  readonly drain: () => ReadonlyArray<SplitKey>
}

/** The most state keys a tracker remembers by default. */
export const defaultCapacity = 100_000

/** Marks a key already reported. */
const reported = -1

/** A tracker of at most `capacity` state keys. */
export const make = (capacity: number = defaultCapacity): StateKeyCheck => {
  const firstSeen = new Map<string, number>()
  let pending: Array<SplitKey> = []
  return {
    observe: (stateKey, partition) => {
      const first = firstSeen.get(stateKey)
      if (first === undefined) {
        if (firstSeen.size >= capacity) {
          // Forget the oldest tenth at once: eviction stays off the per-record path.
          let evict = Math.max(1, Math.ceil(capacity / 10))
          for (const oldest of firstSeen.keys()) {
            if (evict-- <= 0) break
            firstSeen.delete(oldest)
          }
        }
        firstSeen.set(stateKey, partition)
        return undefined
      }
      if (first === partition || first === reported) return undefined
      firstSeen.set(stateKey, reported)
      const split = { stateKey, firstPartition: first, partition }
      pending.push(split)
      return split
    },
    drain: () => {
      const splits = pending
      pending = []
      return splits
    }
  }
}

/** Passes `stateKey` through, observing it when a tracker is given: a call site in place of the key. */
export const observe = (check: StateKeyCheck | undefined, stateKey: string, partition: number): string => {
  if (check !== undefined) check.observe(stateKey, partition)
  return stateKey
}

const shown = (stateKey: string): string =>
  JSON.stringify(stateKey.length > 200 ? `${stateKey.slice(0, 200)}...` : stateKey)

/** The warning for a split key: the key, both partitions and the fix. */
export const message = (transformer: string, split: SplitKey): string =>
  `state key ${shown(split.stateKey)} of transformer ${transformer} is used on input partitions ` +
  `${split.firstPartition} and ${split.partition}: state is kept per partition, so this key's state is split ` +
  `(each partition has its own copy and neither sees the other's updates). Fix: re-key the input topic by the ` +
  `state key upstream (produce each record with its state key as the Kafka key), or use the record key as the state key`

/** Logs a warning for each split observed since the last call (nothing without a tracker). */
export const logSplits = (check: StateKeyCheck | undefined, transformer: string): Effect.Effect<void> =>
  check === undefined
    ? Effect.void
    : Effect.suspend(() => Effect.forEach(check.drain(), (split) => Effect.logWarning(message(transformer, split)), { discard: true }))

/**
 * Whether a runner checks state keys: `setting` when given, otherwise only for
 * a transformer with a custom `stateKey` (the default, the record key, follows
 * the producer's partitioning).
 */
export const enabled = (setting: boolean | undefined, transformer: { readonly stateKey: unknown }): boolean =>
  setting ?? transformer.stateKey !== defaultStateKey

/** The default state key: the record key (`""` for a null key; JSON for a non-string key). */
export const defaultStateKey = (record: { readonly key: unknown }): string =>
  record.key === null ? "" : typeof record.key === "string" ? record.key : JSON.stringify(record.key)
