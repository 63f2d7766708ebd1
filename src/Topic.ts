/**
 * Schema-typed Kafka topics.
 *
 * A topic pairs a name with a key and a value `Schema` whose encoded side is
 * the record's UTF-8 text. Use `Schema.String` for plain text, or `Topic.json`
 * for JSON payloads described by any Schema.
 *
 * @since 0.1.0
 */
import { Effect, ParseResult, Schema } from "effect"
import { EncodeError } from "./SkeinError.ts"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("skein/Topic")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * A Schema whose encoded form is text, used for keys and values.
 *
 * @since 0.1.0
 * @category models
 */
export type Codec<A> = Schema.Schema<A, string>

/**
 * A topic with typed keys and values.
 *
 * @since 0.1.0
 * @category models
 */
export interface Topic<K, V> extends Any {
  readonly key: Codec<K>
  readonly value: Codec<V>
  readonly decode: (key: string | null, value: string | null) => Effect.Effect<
    { readonly key: K | null; readonly value: V },
    DecodeFailure
  >
}

/**
 * Any topic, whatever its key and value types.
 *
 * @since 0.1.0
 * @category models
 */
export interface Any {
  readonly [TypeId]: TypeId
  readonly name: string
  /** Decodes a record's key and value from their wire text. */
  readonly decode: (key: string | null, value: string | null) => Effect.Effect<
    { readonly key: unknown; readonly value: unknown },
    DecodeFailure
  >
}

/**
 * Why a record could not be decoded.
 *
 * @since 0.1.0
 * @category models
 */
export interface DecodeFailure {
  readonly part: "key" | "value"
  readonly cause: ParseResult.ParseError
}

/**
 * The key type of a topic.
 *
 * @since 0.1.0
 * @category type-level
 */
export type Key<T> = T extends Topic<infer K, infer _V> ? K : never

/**
 * The value type of a topic.
 *
 * @since 0.1.0
 * @category type-level
 */
export type Value<T> = T extends Topic<infer _K, infer V> ? V : never

/**
 * Declares a topic.
 *
 * @example
 * ```ts
 * const Lines = Topic.make({ name: "lines", key: Schema.String, value: Schema.String })
 * const Counts = Topic.make({ name: "counts", key: Schema.String, value: Topic.json(Schema.Number) })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <K, V>(options: {
  readonly name: string
  readonly key: Codec<K>
  readonly value: Codec<V>
}): Topic<K, V> => {
  const decodeKey = Schema.decode(options.key)
  const decodeValue = Schema.decode(options.value)
  return {
    [TypeId]: TypeId,
    name: options.name,
    key: options.key,
    value: options.value,
    decode: (key, value) =>
      Effect.all({
        key: key === null
          ? Effect.succeed(null)
          : Effect.mapError(decodeKey(key), (cause): DecodeFailure => ({ part: "key", cause })),
        value: value === null
          ? Effect.fail<DecodeFailure>({ part: "value", cause: tombstone(options.value) })
          : Effect.mapError(decodeValue(value), (cause): DecodeFailure => ({ part: "value", cause }))
      })
  }
}

const tombstone = <A>(codec: Codec<A>): ParseResult.ParseError =>
  new ParseResult.ParseError({
    issue: new ParseResult.Type(codec.ast, null, "a record without a value (a tombstone) is not a valid value")
  })

/**
 * A codec that stores `schema`'s encoded form as JSON text.
 *
 * @since 0.1.0
 * @category codecs
 */
export const json = <A, I>(schema: Schema.Schema<A, I>): Codec<A> => Schema.parseJson(schema)

/**
 * A record to produce, built with `Topic.record`. Its key and value are
 * encoded by the runtime inside the batch's transaction.
 *
 * @since 0.1.0
 * @category models
 */
export interface OutputRecord {
  readonly topic: string
  readonly encode: Effect.Effect<EncodedRecord, EncodeError>
}

/**
 * A record in its wire form (UTF-8 text key and value, `null` for none).
 *
 * @since 0.1.0
 * @category models
 */
export interface EncodedRecord {
  readonly topic: string
  readonly key: string | null
  readonly value: string | null
  readonly headers?: Readonly<Record<string, string>>
  readonly partition?: number
}

const encodeWith = <A>(codec: Codec<A>, value: A | null): Effect.Effect<string | null, ParseResult.ParseError> =>
  value === null ? Effect.succeed(null) : Schema.encode(codec)(value)

/**
 * A record for `topic`, to return from a transform. A `null` value is a
 * tombstone.
 *
 * @since 0.1.0
 * @category constructors
 */
export const record = <K, V>(
  topic: Topic<K, V>,
  key: K | null,
  value: V | null,
  headers?: Readonly<Record<string, string>>
): OutputRecord => ({
  topic: topic.name,
  encode: Effect.all({ key: encodeWith(topic.key, key), value: encodeWith(topic.value, value) }).pipe(
    Effect.map((encoded): EncodedRecord => ({
      topic: topic.name,
      key: encoded.key,
      value: encoded.value,
      ...(headers === undefined ? {} : { headers })
    })),
    Effect.mapError((cause) => new EncodeError({ topic: topic.name, cause }))
  )
})
