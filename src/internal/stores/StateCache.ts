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

/** A cached state, and whether it was written again since eviction last passed it. */
interface Entry {
  state: Option.Option<unknown>
  written: boolean
}

/**
 * A state cache of at most `capacity` keys. Once full, a tenth of it is evicted, oldest first
 * (never the key just added), where an entry written again since eviction last passed it gets a second chance (it moves to
 * the end; "clock" eviction, an approximation of least recently written): a write of a cached
 * key, what every commit does for each key it changed, updates the entry in place instead of
 * moving it in the map.
 */
export const makeStateCache = (capacity: number): StateCache => {
  const entries = new Map<string, Entry>()
  /** Evicts a tenth of the cache, never `added` (the key whose insertion made it too large). */
  const evict = (added: string) => {
    let evict = Math.ceil(capacity / 10)
    // An entry moved to the end is visited again (its mark cleared): the loop ends within two passes.
    for (const [key, entry] of entries) {
      if (evict <= 0) break
      if (key === added) continue
      entries.delete(key)
      if (entry.written) {
        entry.written = false
        entries.set(key, entry)
      } else {
        evict--
      }
    }
  }
  return {
    get: (key) => entries.get(key)?.state,
    set: (key, state) => {
      const entry = entries.get(key)
      if (entry !== undefined) {
        entry.state = state
        entry.written = true
        return
      }
      entries.set(key, { state, written: false })
      if (entries.size > capacity) evict(key)
    }
  }
}
