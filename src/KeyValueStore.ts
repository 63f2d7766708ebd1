/**
 * Key-value stores: named, ordered state a transformer declares and uses
 * from its transform (and `onTimer`), beside its per-key state: `get`,
 * `put`, `delete`, and scans in key order (`range`, `prefix`, `all`).
 *
 * **Order.** A key is stored as the text its key Schema encodes it to, and
 * entries are ordered by that text's UTF-8 bytes (code point order; LevelDB's
 * order on disk). Choose the key Schema for the order you scan in: text
 * compares character by character, so numbers need a fixed width (`"007"`
 * before `"010"`), and a compound key a separator that sorts below its
 * parts (`"customer\u0001order"`).
 *
 * **Guarantees.** Every write is staged in the batch and commits in the
 * task's transaction, with the outputs and the input offsets; each key's last
 * write of the transaction is one changelog record. Reads see the writes of
 * the transform's own record and of the batch's earlier records, never an
 * aborted transaction's. A store lives in the task's state: restored from
 * the changelog after fencing or on a new owner, kept on disk across
 * restarts, kept warm by standbys. A transformer with stores runs its records
 * one after the other per partition.
 *
 * **Startup.** A store's kind and Schemas are kept with it: a store declared
 * with other Schemas than it was written with, two stores of a transformer
 * with one name, or an empty name fail the task's first batch with the fix.
 *
 * @example
 * ```ts
 * import { Effect, Option, Schema } from "effect"
 * import { KeyValueStore, Topic, Transformer } from "skein"
 *
 * const Orders = KeyValueStore.make({ name: "orders", key: Schema.String, value: Schema.Number })
 *
 * const Totals = Transformer.make({
 *   name: "customer-totals",
 *   inputs: [OrderPlaced],
 *   state: Schema.Null,
 *   stores: [Orders],
 *   transform: (record) =>
 *     Effect.gen(function*() {
 *       // keys "{customer}/{order}": a prefix scan reads one customer's orders in order
 *       yield* Orders.put(`${record.value.customer}/${record.value.order}`, record.value.amount)
 *       const orders = yield* Orders.prefix(`${record.value.customer}/`)
 *       const total = orders.reduce((sum, entry) => sum + entry.value, 0)
 *       return { emit: [Topic.record(CustomerTotals, record.value.customer, total)] }
 *     })
 * })
 * ```
 *
 * @since 0.5.0
 */
import { Effect, Either, Option } from "effect"
import type { Schema } from "effect"
import type { EncodeError, StateNotStorable, StateStoreError, StoredStateInvalid } from "./SkeinError.ts"
import type { Access } from "./internal/stores/access.ts"
import * as Keys from "./internal/stores/keys.ts"
import * as Typed from "./internal/stores/typed.ts"

/**
 * An entry of a key-value store.
 *
 * @since 0.5.0
 * @category models
 */
export interface Entry<K, V> {
  readonly key: K
  readonly value: V
}

/**
 * The errors of a store read: the task's store failed, a stored entry does
 * not decode with the store's Schemas, or a key does not encode.
 *
 * @since 0.5.0
 * @category models
 */
export type ReadError = StateStoreError | StoredStateInvalid | EncodeError

/**
 * The errors of a store write: a key or value does not encode, or a value
 * does not read back from its JSON (`NaN`).
 *
 * @since 0.5.0
 * @category models
 */
export type WriteError = EncodeError | StateNotStorable

/**
 * A declared key-value store: list it in `Transformer.make`'s `stores`, and
 * call its operations inside the transform.
 *
 * @since 0.5.0
 * @category models
 */
export interface KeyValueStore<K, V> extends Typed.Typed<K, V> {
  readonly kind: "KeyValueStore"
  /** The key's value, as the batch left it. */
  readonly get: (key: K) => Effect.Effect<Option.Option<V>, ReadError>
  /** Sets the key's value (in the record's transaction). */
  readonly put: (key: K, value: V) => Effect.Effect<void, WriteError>
  /** Deletes the key (a tombstone in the changelog). */
  readonly delete: (key: K) => Effect.Effect<void, EncodeError>
  /** The entries from `from` to `to`, both included, in key order (none when `from` sorts after `to`). */
  readonly range: (from: K, to: K) => Effect.Effect<ReadonlyArray<Entry<K, V>>, ReadError>
  /** The entries whose encoded key starts with `prefix`, in key order. */
  readonly prefix: (prefix: string) => Effect.Effect<ReadonlyArray<Entry<K, V>>, ReadError>
  /** Every entry, in key order. */
  readonly all: Effect.Effect<ReadonlyArray<Entry<K, V>>, ReadError>
}

/**
 * Declares a key-value store. `name` is stable: it names the store's entries
 * in the task's state and changelog, so renaming it starts an empty store.
 * `key` encodes keys to text, whose UTF-8 bytes order the store.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { KeyValueStore } from "skein"
 *
 * const LastSeen = KeyValueStore.make({ name: "last-seen", key: Schema.String, value: Schema.Number })
 * ```
 *
 * @since 0.5.0
 * @category constructors
 */
export const make = <K, V, VI>(options: {
  readonly name: string
  readonly key: Schema.Schema<K, string>
  readonly value: Schema.Schema<V, VI>
}): KeyValueStore<K, V> => {
  const typed = Typed.make("KeyValueStore", options.name, options.key, options.value)
  const base = Keys.namespace(options.name)
  const end = Keys.namespaceEnd(options.name)
  const store: KeyValueStore<K, V> = {
    ...typed,
    kind: "KeyValueStore",
    get: (key) =>
      Effect.gen(function*() {
        const running = yield* Typed.access(store)
        const storeKey = base + (yield* Typed.encodeKey(store, key))
        const text = yield* running.get(storeKey)
        if (text === undefined) return Option.none()
        return Option.some(yield* Typed.decodeValue(store, running, storeKey, text))
      }),
    put: (key, value) =>
      Effect.gen(function*() {
        const running = yield* Typed.access(store)
        const keyText = yield* Typed.encodeKey(store, key)
        const text = yield* Typed.encodeValue(store, running, keyText, value)
        yield* running.put(base + keyText, text)
      }),
    delete: (key) =>
      Effect.gen(function*() {
        const running = yield* Typed.access(store)
        yield* running.put(base + (yield* Typed.encodeKey(store, key)), null)
      }),
    range: (from, to) =>
      Effect.gen(function*() {
        const running = yield* Typed.access(store)
        const gte = base + (yield* Typed.encodeKey(store, from))
        const lte = base + (yield* Typed.encodeKey(store, to))
        if (Keys.compare(gte, lte) > 0) return []
        return yield* scan(store, running, { gte, lte })
      }),
    prefix: (prefix) =>
      Effect.gen(function*() {
        const running = yield* Typed.access(store)
        const after = Keys.prefixEnd(prefix)
        return yield* scan(store, running, { gte: base + prefix, lt: after === undefined ? end : base + after })
      }),
    all: Effect.suspend(() => Effect.flatMap(Typed.access(store), (running) => scan(store, running, { gte: base, lt: end })))
  }
  return store
}

/** The store's entries in `range`, decoded. */
const scan = <K, V>(
  store: KeyValueStore<K, V>,
  running: Access,
  range: { readonly gte: string; readonly lt?: string; readonly lte?: string }
): Effect.Effect<ReadonlyArray<Entry<K, V>>, StoredStateInvalid | StateStoreError> =>
  Effect.flatMap(running.range(range), (found) => {
    const base = Keys.namespace(store.name).length
    const entries: Array<Entry<K, V>> = []
    for (const [storeKey, text] of found) {
      const key = Typed.decodeKey(store, running, storeKey, storeKey.slice(base))
      if (Either.isLeft(key)) return Effect.fail(key.left)
      const value = Typed.decodeValue(store, running, storeKey, text)
      if (Either.isLeft(value)) return Effect.fail(value.left)
      entries.push({ key: key.right, value: value.right })
    }
    return Effect.succeed(entries)
  })
