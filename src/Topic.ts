/**
 * Schema-typed Kafka topics.
 *
 * A topic pairs a name with a key and a value `Schema` whose encoded side is
 * the record's UTF-8 text. Use `Schema.String` for plain text, or `Topic.json`
 * for JSON payloads described by any Schema.
 *
 * @since 0.1.0
 */
import { Either, ParseResult, Schema } from "effect"
import { EncodeError } from "./SkeinError.ts"

/**
 * The symbol that marks a value as a topic.
 *
 * @example
 * ```ts
 * import { Topic } from "skein"
 *
 * const isTopic = (u: unknown): u is Topic.Any => typeof u === "object" && u !== null && Topic.TypeId in u
 * ```
 *
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("skein/Topic")

/**
 * The type of `TypeId`.
 *
 * @example
 * ```ts
 * import { Topic } from "skein"
 *
 * // the marker every topic carries, as in `Topic.Any`
 * interface Marked { readonly [Topic.TypeId]: Topic.TypeId }
 * ```
 *
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * A Schema whose encoded form is text, used for keys and values.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Topic } from "skein"
 *
 * const text: Topic.Codec<string> = Schema.String
 * const count: Topic.Codec<number> = Topic.json(Schema.Number) // or Schema.NumberFromString
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Codec<A> = Schema.Schema<A, string>

/**
 * A topic with typed keys and values.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Topic } from "skein"
 *
 * const Counts: Topic.Topic<string, number> = Topic.make({
 *   name: "word-counts", key: Schema.String, value: Topic.json(Schema.Number)
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Topic<K, V> extends Any {
  readonly key: Codec<K>
  readonly value: Codec<V>
  readonly decode: (key: string | null, value: string | null) => Either.Either<
    { readonly key: K | null; readonly value: V },
    DecodeFailure
  >
  /** Encodes a key to its wire text. */
  readonly encodeKey: (key: K) => Either.Either<string, ParseResult.ParseError>
  /** Encodes a value to its wire text. */
  readonly encodeValue: (value: V) => Either.Either<string, ParseResult.ParseError>
}

/**
 * Any topic, whatever its key and value types.
 *
 * @example
 * ```ts
 * import { Topic } from "skein"
 *
 * const names = (topics: ReadonlyArray<Topic.Any>): Array<string> => topics.map((topic) => topic.name)
 * names([Words, Counts]) // ["words", "word-counts"]
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Any {
  readonly [TypeId]: TypeId
  readonly name: string
  /**
   * Records of one partition with different keys may run concurrently (same
   * keys stay in offset order). Default `false`: one record at a time per
   * partition, in offset order.
   */
  readonly keyConcurrency: boolean
  /** Decodes a record's key and value from their wire text (codecs are synchronous). */
  readonly decode: (key: string | null, value: string | null) => Either.Either<
    { readonly key: unknown; readonly value: unknown },
    DecodeFailure
  >
}

/**
 * Why a record could not be decoded.
 *
 * @example
 * ```ts
 * import { Either } from "effect"
 * import { Topic } from "skein"
 *
 * const explain = (failure: Topic.DecodeFailure): string => `bad ${failure.part}: ${failure.cause.message}`
 * Either.mapLeft(Counts.decode("hello", "not a number"), explain) // Left("bad value: ...")
 * ```
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
 * @example
 * ```ts
 * import type { Topic } from "skein"
 *
 * type WordKey = Topic.Key<typeof Counts> // string
 * ```
 *
 * @since 0.1.0
 * @category type-level
 */
export type Key<T> = T extends Topic<infer K, infer _V> ? K : never

/**
 * The value type of a topic.
 *
 * @example
 * ```ts
 * import type { Topic } from "skein"
 *
 * type Count = Topic.Value<typeof Counts> // number
 * ```
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
  /** Let different keys of one partition run concurrently (default `false`). */
  readonly keyConcurrency?: boolean
}): Topic<K, V> => {
  const decodeKey = Schema.decodeEither(options.key)
  const decodeValue = Schema.decodeEither(options.value)
  return {
    [TypeId]: TypeId,
    name: options.name,
    keyConcurrency: options.keyConcurrency ?? false,
    key: options.key,
    value: options.value,
    encodeKey: Schema.encodeEither(options.key),
    encodeValue: Schema.encodeEither(options.value),
    decode: (key, value) => {
      const decodedKey = key === null ? Either.right(null) : decodeKey(key)
      if (Either.isLeft(decodedKey)) return Either.left({ part: "key", cause: decodedKey.left })
      if (value === null) return Either.left({ part: "value", cause: tombstone(options.value) })
      const decodedValue = decodeValue(value)
      if (Either.isLeft(decodedValue)) return Either.left({ part: "value", cause: decodedValue.left })
      return Either.right({ key: decodedKey.right, value: decodedValue.right })
    }
  }
}

const tombstone = <A>(codec: Codec<A>): ParseResult.ParseError =>
  new ParseResult.ParseError({
    issue: new ParseResult.Type(codec.ast, null, "a record without a value (a tombstone) is not a valid value")
  })

/**
 * A codec that stores `schema`'s encoded form as JSON text.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Topic } from "skein"
 *
 * const Order = Schema.Struct({ id: Schema.Number, total: Schema.Number })
 * const Orders = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Order) })
 * ```
 *
 * @since 0.1.0
 * @category codecs
 */
export const json = <A, I>(schema: Schema.Schema<A, I>): Codec<A> => Schema.parseJson(schema)

/**
 * A record to produce, built with `Topic.record`. Its key and value are
 * encoded by the runtime inside the batch's transaction.
 *
 * @example
 * ```ts
 * import { Topic } from "skein"
 *
 * const emit: ReadonlyArray<Topic.OutputRecord> = [
 *   Topic.record(Counts, "hello", 2),
 *   Topic.record(Shouted, "hello", "HELLO")
 * ]
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface OutputRecord {
  readonly topic: string
  readonly encode: () => Either.Either<EncodedRecord, EncodeError>
}

/**
 * A header value in wire form: UTF-8 text, raw bytes, or the values of a
 * header name repeated in the record (in order).
 *
 * @example
 * ```ts
 * import type { Topic } from "skein"
 *
 * const traceIds = (record: Topic.EncodedRecord): Topic.HeaderValue | undefined => record.headers?.["trace-id"]
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type HeaderValue = string | Buffer | ReadonlyArray<string | Buffer>

/**
 * A record in its wire form: a key and value as UTF-8 text or as raw bytes
 * (a dead letter keeps the bytes it was sent with), `null` for none.
 *
 * @example
 * ```ts
 * import { Either } from "effect"
 * import { Topic } from "skein"
 *
 * const encoded = Topic.record(Counts, "hello", 2).encode() // Either<Topic.EncodedRecord, SkeinError.EncodeError>
 * if (Either.isRight(encoded)) console.log(encoded.right.value) // "2"
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface EncodedRecord {
  readonly topic: string
  readonly key: string | Buffer | null
  readonly value: string | Buffer | null
  readonly headers?: Readonly<Record<string, HeaderValue>>
  readonly partition?: number
}

/**
 * A record for `topic`, to return from a transform. A `null` value is a
 * tombstone.
 *
 * @example
 * ```ts
 * import { Topic } from "skein"
 *
 * Topic.record(Counts, "hello", 2) // key "hello", value 2
 * Topic.record(Counts, "hello", null) // a tombstone: deletes "hello" from a compacted topic
 * Topic.record(Counts, "hello", 2, { source: "word-count" }) // with headers
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const record = <K, V>(
  topic: Topic<K, V>,
  key: K | null,
  value: V | null,
  headers?: Readonly<Record<string, string>>
): OutputRecord => new TypedRecord(topic, key, value, headers)

/** An output record with its topic's codecs; one class, so creating one per output allocates no closure. */
class TypedRecord<K, V> implements OutputRecord {
  readonly topic: string
  constructor(
    readonly target: Topic<K, V>,
    readonly key: K | null,
    readonly value: V | null,
    readonly headers: Readonly<Record<string, string>> | undefined
  ) {
    this.topic = target.name
  }
  encode(): Either.Either<EncodedRecord, EncodeError> {
    const { headers, key, target, value } = this
    const encodedKey = key === null ? Either.right(null) : target.encodeKey(key)
    if (Either.isLeft(encodedKey)) return Either.left(new EncodeError({ topic: target.name, cause: encodedKey.left }))
    const encodedValue = value === null ? Either.right(null) : target.encodeValue(value)
    if (Either.isLeft(encodedValue)) {
      return Either.left(new EncodeError({ topic: target.name, cause: encodedValue.left }))
    }
    const encoded: EncodedRecord = headers === undefined
      ? { topic: target.name, key: encodedKey.right, value: encodedValue.right }
      : { topic: target.name, key: encodedKey.right, value: encodedValue.right, headers }
    return Either.right(encoded)
  }
}
