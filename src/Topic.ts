/**
 * Schema-typed Kafka topics.
 *
 * A topic pairs a name with a key and a value codec: a `Schema` whose encoded
 * side is the record's UTF-8 text (`Schema.String` for plain text,
 * `Topic.json` for JSON payloads described by any Schema), or a binary codec
 * whose encoded side is the record's bytes (`Topic.bytes` for raw bytes,
 * `Topic.binary` for Avro, Protobuf or any other byte encoding).
 *
 * @since 0.1.0
 */
import { Either, ParseResult, Schema } from "effect"
import { headerRecord } from "./internal/codec/headers.ts"
import * as JsonCodec from "./internal/codec/jsonCodec.ts"
import type { HeaderValue, Headers } from "./internal/codec/headers.ts"
import * as PrimitiveText from "./internal/codec/primitiveText.ts"
import { notText, strictText } from "./internal/codec/utf8.ts"
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
 * The symbol that marks a binary codec.
 *
 * @example
 * ```ts
 * import { Topic } from "skein"
 *
 * const isBinary = (codec: Topic.AnyCodec<unknown>): boolean => Topic.BinaryTypeId in codec
 * ```
 *
 * @since 0.2.0
 * @category type ids
 */
export const BinaryTypeId: unique symbol = Symbol.for("skein/Topic/BinaryCodec")

/**
 * The type of `BinaryTypeId`.
 *
 * @example
 * ```ts
 * import { Topic } from "skein"
 *
 * interface Marked { readonly [Topic.BinaryTypeId]: Topic.BinaryTypeId }
 * ```
 *
 * @since 0.2.0
 * @category type ids
 */
export type BinaryTypeId = typeof BinaryTypeId

/**
 * A codec whose encoded form is bytes, made with `Topic.binary` (or
 * `Topic.bytes` for the bytes themselves): the record's key or value bytes go
 * to `schema` as they were fetched, never through text.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Topic } from "skein"
 *
 * // any Schema from bytes: an Avro or Protobuf encoder behind Schema.transformOrFail
 * const raw: Topic.BinaryCodec<Uint8Array> = Topic.binary(Schema.Uint8ArrayFromSelf)
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface BinaryCodec<A> {
  readonly [BinaryTypeId]: BinaryTypeId
  /** The Schema between the record's bytes and `A`. */
  readonly schema: Schema.Schema<A, Uint8Array>
}

/**
 * A key or value codec: text (`Codec`) or bytes (`BinaryCodec`).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Topic } from "skein"
 *
 * const codecs: ReadonlyArray<Topic.AnyCodec<unknown>> = [Schema.String, Topic.bytes]
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export type AnyCodec<A> = Codec<A> | BinaryCodec<A>

/**
 * A binary codec from a Schema whose encoded side is bytes: plug an Avro or
 * Protobuf encoder in with `Schema.transformOrFail` from
 * `Schema.Uint8ArrayFromSelf`.
 *
 * @example
 * ```ts
 * import { ParseResult, Schema } from "effect"
 * import { Topic } from "skein"
 *
 * // a big-endian 32-bit unsigned integer
 * const UInt32 = Topic.binary(Schema.transformOrFail(Schema.Uint8ArrayFromSelf, Schema.Number, {
 *   decode: (bytes, _, ast) =>
 *     bytes.length === 4
 *       ? ParseResult.succeed(Buffer.from(bytes).readUInt32BE(0))
 *       : ParseResult.fail(new ParseResult.Type(ast, bytes, "expected 4 bytes")),
 *   encode: (n) => {
 *     const bytes = Buffer.alloc(4)
 *     bytes.writeUInt32BE(n, 0)
 *     return ParseResult.succeed(bytes)
 *   }
 * }))
 * const Counts = Topic.make({ name: "counts", key: Schema.String, value: UInt32 })
 * ```
 *
 * @since 0.2.0
 * @category codecs
 */
export const binary = <A>(schema: Schema.Schema<A, Uint8Array>): BinaryCodec<A> => ({ [BinaryTypeId]: BinaryTypeId, schema })

/**
 * The codec of raw bytes: the key or value exactly as fetched (a `Buffer`),
 * written back byte for byte.
 *
 * @example
 * ```ts
 * import { Topic } from "skein"
 *
 * const Blobs = Topic.make({ name: "blobs", key: Topic.bytes, value: Topic.bytes })
 * ```
 *
 * @since 0.2.0
 * @category codecs
 */
export const bytes: BinaryCodec<Uint8Array> = binary(Schema.Uint8ArrayFromSelf)

/**
 * True for a binary codec.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Topic } from "skein"
 *
 * Topic.isBinary(Topic.bytes) // true
 * Topic.isBinary(Schema.String) // false
 * ```
 *
 * @since 0.2.0
 * @category guards
 */
export const isBinary = <A>(codec: AnyCodec<A>): codec is BinaryCodec<A> => BinaryTypeId in codec

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
  readonly key: AnyCodec<K>
  readonly value: AnyCodec<V>
  readonly decode: (key: string | Uint8Array | null, value: string | Uint8Array | null) => Either.Either<
    { readonly key: K | null; readonly value: V },
    DecodeFailure
  >
  /** Encodes a key to its wire form: text for a text codec, bytes for a binary one. */
  readonly encodeKey: (key: K) => Either.Either<string | Buffer, ParseResult.ParseError>
  /** Encodes a value to its wire form: text for a text codec, bytes for a binary one. */
  readonly encodeValue: (value: V) => Either.Either<string | Buffer, ParseResult.ParseError>
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
  /** Whether the key and the value are decoded from text (strict UTF-8) or from the bytes themselves. */
  readonly format: { readonly key: "text" | "bytes"; readonly value: "text" | "bytes" }
  /**
   * Decodes a record's key and value (codecs are synchronous). A text codec
   * given bytes reads them as strict UTF-8; a binary codec given text reads
   * its UTF-8 bytes.
   */
  readonly decode: (key: string | Uint8Array | null, value: string | Uint8Array | null) => Either.Either<
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
 * const Blobs = Topic.make({ name: "blobs", key: Schema.String, value: Topic.bytes }) // binary values
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <K, V>(options: {
  readonly name: string
  readonly key: AnyCodec<K>
  readonly value: AnyCodec<V>
  /** Let different keys of one partition run concurrently (default `false`). */
  readonly keyConcurrency?: boolean
}): Topic<K, V> => {
  const key = partOf("key", options.key)
  const value = partOf("value", options.value)
  return {
    [TypeId]: TypeId,
    name: options.name,
    keyConcurrency: options.keyConcurrency ?? false,
    format: { key: key.format, value: value.format },
    key: options.key,
    value: options.value,
    encodeKey: key.encode,
    encodeValue: value.encode,
    decode: (rawKey, rawValue) => {
      const decodedKey = rawKey === null ? Either.right(null) : key.decode(rawKey)
      if (Either.isLeft(decodedKey)) return Either.left({ part: "key", cause: decodedKey.left })
      if (rawValue === null) return Either.left({ part: "value", cause: tombstone(options.value) })
      const decodedValue = value.decode(rawValue)
      if (Either.isLeft(decodedValue)) return Either.left({ part: "value", cause: decodedValue.left })
      return Either.right({ key: decodedKey.right, value: decodedValue.right })
    }
  }
}

/** A key's or a value's codec, ready for the wire. */
interface Part<A> {
  readonly format: "text" | "bytes"
  readonly decode: (input: string | Uint8Array) => Either.Either<A, ParseResult.ParseError>
  readonly encode: (a: A) => Either.Either<string | Buffer, ParseResult.ParseError>
}

/** A `Buffer` over the same memory (kafkajs writes Buffers). */
const toBuffer = (bytes: Uint8Array): Buffer =>
  Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

const partOf = <A>(part: "key" | "value", codec: AnyCodec<A>): Part<A> => {
  if (isBinary(codec)) {
    const decode = Schema.decodeEither(codec.schema)
    const encode = Schema.encodeEither(codec.schema)
    return {
      format: "bytes",
      decode: (input) => decode(typeof input === "string" ? Buffer.from(input, "utf8") : input),
      encode: (a) => Either.map(encode(a), toBuffer)
    }
  }
  const { decode, encode } = PrimitiveText.steps(codec)
  return {
    format: "text",
    decode: (input) => {
      if (typeof input === "string") return decode(input)
      const text = strictText(input)
      return typeof text === "string" ? decode(text) : Either.left(notText(part, input))
    },
    encode
  }
}

const tombstone = <A>(codec: AnyCodec<A>): ParseResult.ParseError =>
  new ParseResult.ParseError({
    issue: new ParseResult.Type(isBinary(codec) ? codec.schema.ast : codec.ast, null, "a record without a value (a tombstone) is not a valid value")
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
export const json = <A, I>(schema: Schema.Schema<A, I>): Codec<A> => {
  const codec = Schema.parseJson(schema)
  JsonCodec.register(codec, schema)
  return codec
}

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
  /**
   * The record in its wire form. `defaultTimestamp` (the input record's, given by the runtime) is
   * the timestamp of a record that sets none; a record may leave it out, and the runtime stamps it.
   */
  readonly encode: (defaultTimestamp?: number) => Either.Either<EncodedRecord, EncodeError>
}

export type { HeaderValue, Headers }

/**
 * Where and when an output record goes, besides its topic: `partition` (the
 * default: the producer's partitioner, by key) and `timestamp` in
 * milliseconds since the epoch (the default: the input record's timestamp,
 * as in Kafka Streams).
 *
 * A partition must exist in the topic: one out of range fails the transform
 * with `SkeinError.PartitionOutOfRange` (an error rule can dead-letter it). A
 * timestamp that is not a non-negative integer fails it with `EncodeError`.
 *
 * @example
 * ```ts
 * import { Topic } from "skein"
 *
 * const options: Topic.OutputOptions = { partition: 0, timestamp: Date.parse("2024-01-01T00:00:00Z") }
 * Topic.record(Counts, "hello", 2, undefined, options)
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface OutputOptions {
  readonly partition?: number | undefined
  readonly timestamp?: number | undefined
}

/**
 * A record in its wire form: a key and value as UTF-8 text or as raw bytes
 * (a dead letter keeps the bytes it was sent with), `null` for none. Without
 * a `timestamp`, a transform's output gets its input record's; without a
 * `partition`, the producer's partitioner picks one by key.
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
  /** Milliseconds since the epoch. */
  readonly timestamp?: number
}

/**
 * A record for `topic`, to return from a transform. A `null` value is a
 * tombstone. `headers` may repeat a name and carry bytes (see `Headers`);
 * `options` sets the partition and the timestamp (default: the input
 * record's).
 *
 * @example
 * ```ts
 * import { Topic } from "skein"
 *
 * Topic.record(Counts, "hello", 2) // key "hello", value 2
 * Topic.record(Counts, "hello", null) // a tombstone: deletes "hello" from a compacted topic
 * Topic.record(Counts, "hello", 2, { source: "word-count" }) // with headers
 * Topic.record(Counts, "hello", 2, record.rawHeaders, { partition: 0 }) // the input's headers, byte for byte
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const record = <K, V>(
  topic: Topic<K, V>,
  key: K | null,
  value: V | null,
  headers?: Headers,
  options?: OutputOptions
): OutputRecord => new TypedRecord(topic, key, value, headers, options?.partition, options?.timestamp)

const badTimestamp = (timestamp: number): ParseResult.ParseError =>
  new ParseResult.ParseError({
    issue: new ParseResult.Type(
      Schema.NonNegativeInt.ast,
      timestamp,
      `an output's timestamp must be a non-negative integer (milliseconds since the epoch), got ${timestamp}`
    )
  })

/** An output record with its topic's codecs; one class, so creating one per output allocates no closure. */
class TypedRecord<K, V> implements OutputRecord {
  readonly topic: string
  constructor(
    readonly target: Topic<K, V>,
    readonly key: K | null,
    readonly value: V | null,
    readonly headers: Headers | undefined,
    readonly partition: number | undefined,
    readonly timestamp: number | undefined
  ) {
    this.topic = target.name
  }
  encode(defaultTimestamp?: number): Either.Either<EncodedRecord, EncodeError> {
    const { headers, key, partition, target, value } = this
    const encodedKey = key === null ? Either.right(null) : target.encodeKey(key)
    if (Either.isLeft(encodedKey)) return Either.left(new EncodeError({ topic: target.name, cause: encodedKey.left }))
    const encodedValue = value === null ? Either.right(null) : target.encodeValue(value)
    if (Either.isLeft(encodedValue)) {
      return Either.left(new EncodeError({ topic: target.name, cause: encodedValue.left }))
    }
    if (this.timestamp !== undefined && !(Number.isSafeInteger(this.timestamp) && this.timestamp >= 0)) {
      return Either.left(new EncodeError({ topic: target.name, cause: badTimestamp(this.timestamp) }))
    }
    // Stamped here, in the one object made: not copied to add it.
    const timestamp = this.timestamp ?? defaultTimestamp
    // The usual shapes as one literal each (a stream DSL's output has headers and a timestamp): no spread copies.
    const encoded: EncodedRecord = headers === undefined && partition === undefined
      ? timestamp === undefined
        ? { topic: target.name, key: encodedKey.right, value: encodedValue.right }
        : { topic: target.name, key: encodedKey.right, value: encodedValue.right, timestamp }
      : headers !== undefined && partition === undefined && timestamp !== undefined
      ? { topic: target.name, key: encodedKey.right, value: encodedValue.right, headers: headerRecord(headers), timestamp }
      : {
      topic: target.name,
      key: encodedKey.right,
      value: encodedValue.right,
      ...(headers === undefined ? {} : { headers: headerRecord(headers) }),
      ...(partition === undefined ? {} : { partition }),
      ...(timestamp === undefined ? {} : { timestamp })
    }
    return Either.right(encoded)
  }
}
