/**
 * Session stores: a key-value store whose entries are a key and a session
 * (its start and end times; Kafka Streams' `SessionStore`), for a
 * transformer that merges its own sessions. `findSessions(key, earliestEnd,
 * latestStart)` reads one key's sessions that end at or after `earliestEnd`
 * and start at or before `latestStart`: the ones a record at time `t` with
 * inactivity gap `g` merges with are `findSessions(key, t - g, t + g)`.
 *
 * Stored as a `KeyValueStore` is (same guarantees: committed in the task's
 * transaction, changelogged, restored, kept, standbys), each entry under its
 * encoded key followed by the session's end and start as fixed-width text:
 * one key's sessions sit together in end order, then start order.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { SessionStore } from "skein"
 *
 * const Visits = SessionStore.make({ name: "visits", key: Schema.String, value: Schema.Number })
 *
 * // in a transform: merge the record into the sessions within 30 minutes of it
 * const gap = 30 * 60_000
 * const near = yield* Visits.findSessions(user, record.timestamp - gap, record.timestamp + gap)
 * let session = { start: record.timestamp, end: record.timestamp }
 * let count = 1
 * for (const found of near) {
 *   yield* Visits.remove(user, found)
 *   session = { start: Math.min(session.start, found.start), end: Math.max(session.end, found.end) }
 *   count += found.value
 * }
 * yield* Visits.put(user, session, count)
 * ```
 *
 * @since 0.5.0
 */
import { Effect } from "effect"
import type { Schema } from "effect"
import type { EncodeError } from "./SkeinError.ts"
import type { ReadError, WriteError } from "./KeyValueStore.ts"
import * as Keys from "./internal/stores/keys.ts"
import * as Typed from "./internal/stores/typed.ts"

/**
 * A session: its first and last times, in epoch milliseconds (`start` at or
 * before `end`).
 *
 * @since 0.5.0
 * @category models
 */
export interface Session {
  readonly start: number
  readonly end: number
}

/**
 * A session of a key and its value.
 *
 * @since 0.5.0
 * @category models
 */
export interface Entry<K, V> extends Session {
  readonly key: K
  readonly value: V
}

/**
 * A declared session store: list it in `Transformer.make`'s `stores`.
 * Session times are integer epoch milliseconds, 0 or more, with `start` at
 * or before `end` (another session is a defect naming it).
 *
 * @since 0.5.0
 * @category models
 */
export interface SessionStore<K, V> extends Typed.Typed<K, V> {
  readonly kind: "SessionStore"
  /** Sets the value of the key's session. */
  readonly put: (key: K, session: Session, value: V) => Effect.Effect<void, WriteError>
  /** Deletes the key's session (merged into another, or expired). */
  readonly remove: (key: K, session: Session) => Effect.Effect<void, EncodeError>
  /**
   * The key's sessions that end at or after `earliestEnd` and start at or
   * before `latestStart`, by end then start.
   */
  readonly findSessions: (key: K, earliestEnd: number, latestStart: number) => Effect.Effect<ReadonlyArray<Entry<K, V>>, ReadError>
}

/**
 * Declares a session store (`name` stable, as a `KeyValueStore`'s).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { SessionStore } from "skein"
 *
 * const Visits = SessionStore.make({ name: "visits", key: Schema.String, value: Schema.Number })
 * ```
 *
 * @since 0.5.0
 * @category constructors
 */
export const make = <K, V, VI>(options: {
  readonly name: string
  readonly key: Schema.Schema<K, string>
  readonly value: Schema.Schema<V, VI>
}): SessionStore<K, V> => {
  const base = Keys.namespace(options.name)
  const sessionText = (session: Session): Effect.Effect<string> => {
    const invalid = Keys.invalidTime("a session's start", session.start) ?? Keys.invalidTime("a session's end", session.end) ??
      (session.start > session.end ? `a session starts at ${session.start}, after its end ${session.end}` : undefined)
    return invalid === undefined
      ? Effect.succeed(Keys.encodeTime(session.end) + Keys.encodeTime(session.start))
      : Effect.dieMessage(`SessionStore "${options.name}": ${invalid}`)
  }
  const entryKey = (keyText: string, times: string) => `${base}${keyText}\u0000${times}`
  const store: SessionStore<K, V> = {
    ...Typed.make("SessionStore", options.name, options.key, options.value),
    kind: "SessionStore",
    put: (key, session, value) =>
      Effect.gen(function*() {
        const running = yield* Typed.access(store)
        const keyText = yield* Typed.encodeKey(store, key)
        const storeKey = entryKey(keyText, yield* sessionText(session))
        yield* running.put(storeKey, yield* Typed.encodeValue(store, running, keyText, value))
      }),
    remove: (key, session) =>
      Effect.gen(function*() {
        const running = yield* Typed.access(store)
        yield* running.put(entryKey(yield* Typed.encodeKey(store, key), yield* sessionText(session)), null)
      }),
    findSessions: (key, earliestEnd, latestStart) =>
      Effect.gen(function*() {
        const running = yield* Typed.access(store)
        if (Number.isNaN(earliestEnd) || Number.isNaN(latestStart)) return []
        const keyText = yield* Typed.encodeKey(store, key)
        const from = Keys.encodeTime(Math.max(0, Math.min(Number.MAX_SAFE_INTEGER, Math.ceil(earliestEnd))))
        const gte = entryKey(keyText, from + Keys.encodeTime(0))
        const lte = entryKey(keyText, Keys.maxTime + Keys.maxTime)
        const found = yield* running.range({ gte, lte })
        // A longer key that starts with this one and a NUL sorts in the range too: only this key's entries are its sessions.
        const at = entryKey(keyText, "").length
        const entries: Array<Entry<K, V>> = []
        for (const [storeKey, text] of found) {
          if (storeKey.length !== at + 2 * Keys.timeWidth) continue
          const start = Keys.decodeTime(storeKey, at + Keys.timeWidth)
          if (start > latestStart) continue
          const end = Keys.decodeTime(storeKey, at)
          entries.push({ key, start, end, value: yield* Typed.decodeValue(store, running, storeKey, text) })
        }
        return entries
      })
  }
  return store
}
