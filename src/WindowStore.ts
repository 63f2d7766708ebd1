/**
 * Window stores: a key-value store whose entries are a key and a window's
 * start time (Kafka Streams' `WindowStore`), for a transformer that keeps
 * its own windows. `fetch(key, from, to)` reads one key's windows that start
 * from `from` to `to`, in start order.
 *
 * Stored as a `KeyValueStore` is (same guarantees: committed in the task's
 * transaction, changelogged, restored, kept, standbys), each entry under its
 * encoded key followed by the window start as fixed-width text, so one key's
 * windows sit together in start order.
 *
 * @example
 * ```ts
 * import { Effect, Option, Schema } from "effect"
 * import { WindowStore } from "skein"
 *
 * const PerMinute = WindowStore.make({ name: "clicks-per-minute", key: Schema.String, value: Schema.Number })
 *
 * // in a transform: count the record into its 1-minute window, then read the last 5 windows
 * const start = record.timestamp - (record.timestamp % 60_000)
 * const count = Option.getOrElse(yield* PerMinute.get(user, start), () => 0) + 1
 * yield* PerMinute.put(user, start, count)
 * const recent = yield* PerMinute.fetch(user, start - 4 * 60_000, start)
 * ```
 *
 * @since 0.5.0
 */
import { Effect, Option } from "effect"
import type { Schema } from "effect"
import type { EncodeError } from "./SkeinError.ts"
import type { ReadError, WriteError } from "./KeyValueStore.ts"
import * as Keys from "./internal/stores/keys.ts"
import * as Typed from "./internal/stores/typed.ts"

/**
 * A window of a key and its value.
 *
 * @since 0.5.0
 * @category models
 */
export interface Entry<K, V> {
  readonly key: K
  /** The window's start, in epoch milliseconds. */
  readonly start: number
  readonly value: V
}

/**
 * A declared window store: list it in `Transformer.make`'s `stores`.
 * Window starts are integer epoch milliseconds, 0 or more (another start is
 * a defect naming it).
 *
 * @since 0.5.0
 * @category models
 */
export interface WindowStore<K, V> extends Typed.Typed<K, V> {
  readonly kind: "WindowStore"
  /** The value of the key's window starting at `start`. */
  readonly get: (key: K, start: number) => Effect.Effect<Option.Option<V>, ReadError>
  /** Sets the value of the key's window starting at `start`. */
  readonly put: (key: K, start: number, value: V) => Effect.Effect<void, WriteError>
  /** Deletes the key's window starting at `start`. */
  readonly remove: (key: K, start: number) => Effect.Effect<void, EncodeError>
  /** The key's windows starting from `from` to `to` (both included), in start order (none when `from` is after `to`). */
  readonly fetch: (key: K, from: number, to: number) => Effect.Effect<ReadonlyArray<Entry<K, V>>, ReadError>
}

/**
 * Declares a window store (`name` stable, as a `KeyValueStore`'s).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { WindowStore } from "skein"
 *
 * const PerMinute = WindowStore.make({ name: "clicks-per-minute", key: Schema.String, value: Schema.Number })
 * ```
 *
 * @since 0.5.0
 * @category constructors
 */
export const make = <K, V, VI>(options: {
  readonly name: string
  readonly key: Schema.Schema<K, string>
  readonly value: Schema.Schema<V, VI>
}): WindowStore<K, V> => {
  const base = Keys.namespace(options.name)
  const time = (what: string, at: number): Effect.Effect<string> => {
    const invalid = Keys.invalidTime(what, at)
    return invalid === undefined ? Effect.succeed(Keys.encodeTime(at)) : Effect.dieMessage(`WindowStore "${options.name}": ${invalid}`)
  }
  const entryKey = (keyText: string, start: string) => `${base}${keyText}\u0000${start}`
  const store: WindowStore<K, V> = {
    ...Typed.make("WindowStore", options.name, options.key, options.value),
    kind: "WindowStore",
    get: (key, start) =>
      Effect.gen(function*() {
        const running = yield* Typed.access(store)
        const storeKey = entryKey(yield* Typed.encodeKey(store, key), yield* time("a window start", start))
        const text = yield* running.get(storeKey)
        if (text === undefined) return Option.none()
        return Option.some(yield* Typed.decodeValue(store, running, storeKey, text))
      }),
    put: (key, start, value) =>
      Effect.gen(function*() {
        const running = yield* Typed.access(store)
        const keyText = yield* Typed.encodeKey(store, key)
        const storeKey = entryKey(keyText, yield* time("a window start", start))
        yield* running.put(storeKey, yield* Typed.encodeValue(store, running, keyText, value))
      }),
    remove: (key, start) =>
      Effect.gen(function*() {
        const running = yield* Typed.access(store)
        yield* running.put(entryKey(yield* Typed.encodeKey(store, key), yield* time("a window start", start)), null)
      }),
    fetch: (key, from, to) =>
      Effect.gen(function*() {
        const running = yield* Typed.access(store)
        // Bounds are a query, not stored times: any numbers, clamped to the times a window can start at.
        const first = Math.max(0, Math.ceil(from))
        const last = Math.min(Number.MAX_SAFE_INTEGER, Math.floor(to))
        if (!(first <= last)) return []
        const keyText = yield* Typed.encodeKey(store, key)
        const gte = entryKey(keyText, Keys.encodeTime(first))
        const lte = entryKey(keyText, Keys.encodeTime(last))
        const found = yield* running.range({ gte, lte })
        // A longer key that starts with this one and a NUL sorts in the range too: only this key's entries are the key's windows.
        const width = entryKey(keyText, "").length + Keys.timeWidth
        const entries: Array<Entry<K, V>> = []
        for (const [storeKey, text] of found) {
          if (storeKey.length !== width) continue
          entries.push({ key, start: Keys.decodeTime(storeKey, width - Keys.timeWidth), value: yield* Typed.decodeValue(store, running, storeKey, text) })
        }
        return entries
      })
  }
  return store
}
