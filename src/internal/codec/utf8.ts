/**
 * Strict UTF-8: the text of a text codec's key or value, never a lossy
 * decoding of it.
 *
 * @internal
 */
import { ParseResult, Schema } from "effect"

/**
 * One strict decoder for the whole process (the hot path): `fatal` rejects
 * invalid bytes instead of replacing them; `ignoreBOM` keeps a leading byte
 * order mark as text instead of dropping it. A standard API on Node, Bun and
 * Deno; a non-streaming `decode` leaves no state behind after a failure.
 * `strictTextOf` calls it only for bytes `Buffer` decodes with a U+FFFD.
 */
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/** `bytes` decoded strictly: `undefined` when they are not valid UTF-8. */
const strictlyDecoded = (bytes: Uint8Array): string | undefined => {
  try {
    return utf8.decode(bytes)
  } catch {
    return undefined
  }
}

/**
 * The UTF-8 text of `bytes`, `null` for none, or `undefined` when the bytes
 * are not valid UTF-8.
 */
export const strictText = (bytes: Uint8Array | null): string | null | undefined => {
  if (bytes === null) return null
  return Buffer.isBuffer(bytes) ? strictTextOf(bytes, 0, bytes.length) : strictlyDecoded(bytes)
}

/**
 * The strict UTF-8 text of `buffer`'s bytes `[start, end)`, or `undefined` when
 * they are not valid UTF-8, without a view of them. Decoded as `Buffer` decodes
 * (a leading byte order mark kept, as `utf8` keeps it), which replaces each
 * invalid sequence with U+FFFD: a text without one is the strict decoding
 * (cheaper on Node and Bun than `TextDecoder`, and on Deno by 4x); one with a
 * U+FFFD, sent or made, is decoded again strictly.
 */
export const strictTextOf = (buffer: Buffer, start: number, end: number): string | undefined => {
  const text = buffer.toString("utf8", start, end)
  return text.indexOf("\uFFFD") === -1 ? text : strictlyDecoded(buffer.subarray(start, end))
}

/** The failure of a text codec's part whose bytes are not UTF-8. */
export const notText = (part: "key" | "value", bytes: Uint8Array): ParseResult.ParseError =>
  new ParseResult.ParseError({
    issue: new ParseResult.Type(
      Schema.String.ast,
      bytes,
      `the ${part} is not valid UTF-8 text (${bytes.length} bytes); it is kept as sent in the dead letter`
    )
  })
