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
import { DecodeError } from "../SkeinError.ts"
import type * as Topic from "../Topic.ts"
import { describe } from "./errorText.ts"
import type { FetchedRecord } from "./kafka/consumer.ts"

/**
 * One strict decoder for the whole process (the hot path): `fatal` rejects
 * invalid bytes instead of replacing them; `ignoreBOM` keeps a leading byte
 * order mark as text instead of dropping it. A standard API on Node, Bun and
 * Deno; a non-streaming `decode` leaves no state behind after a failure. On
 * Node 20 it costs about as much as `Buffer#toString("utf8")` (within 10%).
 */
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/**
 * The UTF-8 text of `bytes`, `null` for none, or `undefined` when the bytes
 * are not valid UTF-8.
 */
export const strictText = (bytes: Buffer | null): string | null | undefined => {
  if (bytes === null) return null
  try {
    return utf8.decode(bytes)
  } catch {
    return undefined
  }
}

const notText = (part: "key" | "value", bytes: Buffer): ParseResult.ParseError =>
  new ParseResult.ParseError({
    issue: new ParseResult.Type(
      Schema.String.ast,
      bytes,
      `the ${part} is not valid UTF-8 text (${bytes.length} bytes); it is kept as sent in the dead letter`
    )
  })

const threw = (error: unknown): ParseResult.ParseError =>
  new ParseResult.ParseError({
    issue: new ParseResult.Type(Schema.Unknown.ast, undefined, `decoding threw ${describe(error, 300)}`)
  })

/**
 * A record's key and value decoded by its topic: strict UTF-8 first (the key,
 * then the value), then the topic's codecs. Never throws.
 */
export const decodeRecord = (
  topic: Topic.Any,
  record: FetchedRecord
): Either.Either<{ readonly key: unknown; readonly value: unknown }, DecodeError> => {
  const fail = (part: "key" | "value", cause: ParseResult.ParseError) =>
    Either.left(new DecodeError({ topic: record.topic, partition: record.partition, offset: record.offset, part, cause }))
  const key = strictText(record.key)
  if (key === undefined) return fail("key", notText("key", record.key ?? Buffer.alloc(0)))
  const value = strictText(record.value)
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
const keyDecodes = (topic: Topic.Any, key: string | null): boolean => {
  if (key === null || !("key" in topic) || !Schema.isSchema(topic.key)) return true
  try {
    return Either.isRight(Schema.decodeUnknownEither(topic.key as Schema.Schema<unknown, unknown>)(key))
  } catch {
    return false
  }
}
