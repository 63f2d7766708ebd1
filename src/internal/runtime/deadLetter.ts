/**
 * A poison record's copy for the dead letter topic.
 *
 * The copy is lossless: the original key and value bytes and every original
 * header (repeated names and binary values included) byte for byte, plus
 * Skein's headers: the error (bounded text) and the record's coordinates.
 * It always fits its topic's size limit, so a dead letter can never fail its
 * transaction on every restart: a copy too large has its value cut (the
 * `skein.dead_letter.truncated` header gives the original value's size), and
 * if even its key and headers do not fit, the value, then the key and the
 * original headers are dropped (`skein.dead_letter.dropped` says which).
 * A limit too small even for Skein's own headers (about 1.2 KiB with a full
 * error text) gets a shorter error text.
 *
 * @internal
 */
import type * as Topic from "../../Topic.ts"
import { maxLength, truncate } from "../util/errorText.ts"
import type { FetchedRecord } from "../kafka/consumer.ts"
import { recordBytes } from "../kafka/recordSize.ts"

/** The header with the error's text (at most `maxLength` characters). */
export const errorHeader = "skein.error"
/** The header with the part that failed: `key`, `value` or `transform`. */
export const partHeader = "skein.error.part"
/** The header with the original value's size in bytes, on a dead letter whose value was cut or dropped. */
export const truncatedHeader = "skein.dead_letter.truncated"
/** The header naming what was dropped besides the value (`key,headers`), on a dead letter that did not fit otherwise. */
export const droppedHeader = "skein.dead_letter.dropped"

type Headers = Record<string, Topic.HeaderValue>

/** The original headers as wire values (a header without a value is written empty: kafkajs cannot send null). */
const originalHeaders = (record: FetchedRecord): Headers => {
  const headers: Headers = {}
  for (const name in record.rawHeaders) {
    const value = record.rawHeaders[name]!
    headers[name] = Buffer.isBuffer(value) || value === null
      ? (value ?? Buffer.alloc(0))
      : value.map((v) => v ?? Buffer.alloc(0))
  }
  return headers
}

/** Adds a Skein header after any original values of the same name (the original ones stay first). */
const add = (headers: Headers, name: string, value: string): void => {
  const existing = headers[name]
  headers[name] = existing === undefined
    ? value
    : typeof existing === "string" || Buffer.isBuffer(existing)
    ? [existing, value]
    : [...existing, value]
}

/**
 * A record's copy for `deadLetterTopic`, at most `maxBytes` (the topic's
 * limit: the smaller of `SkeinConfig.maxMessageBytes` and its
 * `max.message.bytes`) as `recordBytes` counts it.
 */
export const deadLetter = (
  deadLetterTopic: string,
  record: FetchedRecord,
  error: { readonly message: string; readonly part?: string },
  maxBytes: number
): Topic.EncodedRecord => {
  const skein = (headers: Headers, length: number): Headers => {
    add(headers, errorHeader, truncate(error.message, length))
    add(headers, partHeader, error.part ?? "transform")
    add(headers, "skein.source.topic", record.topic)
    add(headers, "skein.source.partition", String(record.partition))
    add(headers, "skein.source.offset", String(record.offset))
    add(headers, "skein.source.timestamp", String(record.timestamp))
    return headers
  }
  const headers = skein(originalHeaders(record), maxLength)
  const whole: Topic.EncodedRecord = { topic: deadLetterTopic, key: record.key, value: record.value, headers }
  if (recordBytes(whole) <= maxBytes) return whole

  // Too large: cut the value to what is left once the key and headers are counted.
  const size = String(record.value?.length ?? 0)
  add(headers, truncatedHeader, size)
  const rest = maxBytes - recordBytes({ ...whole, value: null })
  if (rest >= 0) {
    const value = record.value === null || rest === 0 ? null : record.value.subarray(0, rest)
    return { ...whole, value }
  }
  // Not even the key and headers fit: only Skein's headers are left, with a shorter error
  // text if the limit is that small.
  let bare: Topic.EncodedRecord = { topic: deadLetterTopic, key: null, value: null }
  for (const length of [maxLength, 256, 64, 0]) {
    const headers = skein({}, length)
    add(headers, truncatedHeader, size)
    add(headers, droppedHeader, "key,headers")
    bare = { topic: deadLetterTopic, key: null, value: null, headers }
    if (recordBytes(bare) <= maxBytes) break
  }
  return bare
}
