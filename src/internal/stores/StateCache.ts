/**
 * A task's decoded committed states, in memory on top of its store: read
 * through on a miss, updated after each commit, bounded.
 *
 * @internal
 */
import type { Option } from "effect"

/** Decoded committed states of a task's keys; `None`: no state. Bounded. */
export interface StateCache {
  readonly get: (key: string) => Option.Option<unknown> | undefined
  readonly set: (key: string, state: Option.Option<unknown>) => void
}

/** A state cache of at most `capacity` keys; the oldest entries go first. */
export const makeStateCache = (capacity: number): StateCache => {
  const entries = new Map<string, Option.Option<unknown>>()
  return {
    get: (key) => entries.get(key),
    set: (key, state) => {
      entries.delete(key)
      entries.set(key, state)
      if (entries.size > capacity) {
        let evict = Math.ceil(capacity / 10)
        for (const oldest of entries.keys()) {
          if (evict-- <= 0) break
          entries.delete(oldest)
        }
      }
    }
  }
}
