/**
 * A topic as a table reads it: a record without a value (a tombstone)
 * decodes to a `null` value, which deletes its key, where a stream's source
 * fails it as undecodable. Its key is decoded as the topic's codec decodes
 * it; a record with a value decodes exactly as the topic's does, so a value
 * that fails to decode is a `DecodeError`, handled by the rules (dead letter
 * topic) as any input record's.
 *
 * @internal
 */
import { Either, Schema } from "effect"
import * as Topic from "../../Topic.ts"
import { notText, strictText } from "../codec/utf8.ts"

const keyDecoder = <K>(codec: Topic.AnyCodec<K>) => {
  if (Topic.isBinary(codec)) {
    const decode = Schema.decodeEither(codec.schema)
    return (input: string | Uint8Array) => decode(typeof input === "string" ? Buffer.from(input, "utf8") : input)
  }
  const decode = Schema.decodeEither(codec)
  return (input: string | Uint8Array) => {
    if (typeof input === "string") return decode(input)
    const text = strictText(input)
    return typeof text === "string" ? decode(text) : Either.left(notText("key", input))
  }
}

/** `topic`'s table view: tombstones decode to `null` values. */
export const tableView = <K, V>(topic: Topic.Topic<K, V>): Topic.Any => {
  const decodeKey = keyDecoder(topic.key)
  const decode: Topic.Any["decode"] = (rawKey, rawValue) => {
    if (rawValue !== null) return topic.decode(rawKey, rawValue)
    if (rawKey === null) return Either.right({ key: null, value: null })
    return Either.match(decodeKey(rawKey), {
      onLeft: (cause) => Either.left({ part: "key" as const, cause }),
      onRight: (key) => Either.right({ key, value: null })
    })
  }
  return { ...topic, decode }
}

/**
 * How a table keeps a value of `codec` in its state: the codec's text (a
 * binary codec's bytes as base64), inside the state's JSON.
 */
export const storedValue = <V>(codec: Topic.AnyCodec<V>): Schema.Schema<V, string> =>
  Topic.isBinary(codec) ? Schema.compose(Schema.Uint8ArrayFromBase64, codec.schema) : codec
