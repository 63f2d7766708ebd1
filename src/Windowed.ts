/**
 * A key of a windowed aggregation's result: the record key and the window
 * it was aggregated in, `[start, end)` in milliseconds since the epoch
 * (Kafka Streams' `Windowed<K>`). Write results to a topic keyed by
 * `Windowed.json(keySchema)`: the key as JSON
 * `{"key":...,"window":{"start":...,"end":...}}`.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Topic, Windowed } from "skein"
 *
 * const Counts = Topic.make({ name: "counts-per-minute", key: Windowed.json(Schema.String), value: Topic.json(Schema.Number) })
 * ```
 *
 * @since 0.4.0
 */
import { Schema } from "effect"
import * as Topic from "./Topic.ts"

/**
 * A window of event time: from `start` (inclusive) to `end` (exclusive), in
 * milliseconds since the epoch.
 *
 * @since 0.4.0
 * @category models
 */
export interface Window {
  readonly start: number
  readonly end: number
}

/**
 * A record key with the window of its aggregate.
 *
 * @since 0.4.0
 * @category models
 */
export interface Windowed<K> {
  readonly key: K
  readonly window: Window
}

/**
 * A windowed key.
 *
 * @example
 * ```ts
 * import { Windowed } from "skein"
 *
 * Windowed.make("k1", 60_000, 120_000) // { key: "k1", window: { start: 60000, end: 120000 } }
 * ```
 *
 * @since 0.4.0
 * @category constructors
 */
export const make = <K>(key: K, start: number, end: number): Windowed<K> => ({ key, window: { start, end } })

/**
 * The Schema of a windowed key whose key has the Schema `key`.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Windowed } from "skein"
 *
 * const WindowedString = Windowed.schema(Schema.String)
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export const schema = <K, I, R>(key: Schema.Schema<K, I, R>): Schema.Schema<Windowed<K>, {
  readonly key: I
  readonly window: { readonly start: number; readonly end: number }
}, R> => Schema.Struct({ key, window: Schema.Struct({ start: Schema.Number, end: Schema.Number }) })

/**
 * A topic codec for windowed keys: JSON `{"key":...,"window":{"start":...,"end":...}}`,
 * the key as `key` encodes it.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Topic, Windowed } from "skein"
 *
 * const Counts = Topic.make({ name: "counts", key: Windowed.json(Schema.String), value: Topic.json(Schema.Number) })
 * ```
 *
 * @since 0.4.0
 * @category codecs
 */
export const json = <K, I>(key: Schema.Schema<K, I>): Topic.Codec<Windowed<K>> => Topic.json(schema(key))
