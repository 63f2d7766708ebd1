/**
 * Decoding a fetched record for the transform: strict UTF-8 text, then the
 * topic's Schemas.
 *
 * Bytes that are not valid UTF-8 are never replaced (U+FFFD) and processed as
 * if they were the bytes sent: such a key or value is a poison record, like
 * one that fails its Schema. Whatever the input, decoding returns: a codec
 * that throws (a recursion too deep for the stack included) is a poison
 * record too.
 *
 * @internal
 */
import { Either, ParseResult, Schema } from "effect"
import { DecodeError } from "../../SkeinError.ts"
import * as Topic from "../../Topic.ts"
import { describe } from "../util/errorText.ts"
import type { FetchedRecord } from "../kafka/consumer.ts"
import { notText, strictText } from "../codec/utf8.ts"

export { strictText }

const threw = (error: unknown): ParseResult.ParseError =>
  new ParseResult.ParseError({
    issue: new ParseResult.Type(Schema.Unknown.ast, undefined, `decoding threw ${describe(error, 300)}`)
  })

/**
 * A record's key and value decoded by its topic: strict UTF-8 first for the
 * parts with a text codec (the key, then the value), then the topic's codecs;
 * a binary codec gets the bytes as fetched. Never throws.
 */
export const decodeRecord = (
  topic: Topic.Any,
  record: FetchedRecord
): Either.Either<{ readonly key: unknown; readonly value: unknown }, DecodeError> => {
  const fail = (part: "key" | "value", cause: ParseResult.ParseError) =>
    Either.left(new DecodeError({ topic: record.topic, partition: record.partition, offset: record.offset, part, cause }))
  const key = topic.format.key === "bytes" ? record.key : record.keyText !== undefined ? record.keyText() : strictText(record.key)
  if (key === undefined) return fail("key", notText("key", record.key ?? Buffer.alloc(0)))
  const value = topic.format.value === "bytes"
    ? record.value
    : record.valueText !== undefined
    ? record.valueText()
    : strictText(record.value)
  if (value === undefined) return fail("value", notText("value", record.value ?? Buffer.alloc(0)))
  try {
    const decoded = topic.decode(key, value)
    return Either.isRight(decoded) ? Either.right(decoded.right) : fail(decoded.left.part, decoded.left.cause)
  } catch (error) {
    // A codec that throws (e.g. a recursive Schema past the stack's depth): which part is unknown
    // unless the key alone decodes.
    return fail(keyDecodes(topic, key) ? "value" : "key", threw(error))
  }
}

/** Whether a topic's key codec accepts `key` (`true` when the topic has none to ask). */
const keyDecodes = (topic: Topic.Any, key: string | Buffer | null): boolean => {
  if (key === null || !("key" in topic)) return true
  const codec: unknown = topic.key
  const schema: unknown = typeof codec === "object" && codec !== null && Topic.BinaryTypeId in codec && "schema" in codec
    ? codec.schema
    : codec
  if (!Schema.isSchema(schema)) return true
  try {
    return Either.isRight(Schema.decodeUnknownEither(schema as Schema.Schema<unknown, unknown>)(key))
  } catch {
    return false
  }
}
