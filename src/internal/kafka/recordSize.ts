/**
 * How many bytes a record takes in a Kafka record batch: a fast upper bound
 * (no text encoded) and a tighter count. Both the size checks of outputs and
 * dead letters and the producer's splitting of sends use them.
 *
 * @internal
 */
import type { EncodedRecord, HeaderValue } from "../../Topic.ts"

/** Bytes of text or bytes: a UTF-16 length times 3 bounds its UTF-8 bytes (`exact`: counted). */
const bytesOf = (data: string | Buffer | null, exact: boolean): number =>
  data === null ? 0 : typeof data === "string" ? (exact ? Buffer.byteLength(data) : 3 * data.length) : data.length

const headerBytes = (headers: Readonly<Record<string, HeaderValue>>, exact: boolean): number => {
  let bytes = 0
  for (const name in headers) {
    const value = headers[name]!
    const nameBytes = exact ? Buffer.byteLength(name) : 3 * name.length
    if (typeof value === "string" || Buffer.isBuffer(value)) {
      bytes += 10 + nameBytes + bytesOf(value, exact)
    } else {
      for (const item of value) bytes += 10 + nameBytes + bytesOf(item, exact)
    }
  }
  return bytes
}

/**
 * An upper bound of the bytes a record takes in a record batch, without
 * encoding its text (a UTF-16 length times 3 bounds its UTF-8 bytes).
 */
export const recordSizeBound = (record: EncodedRecord): number =>
  90 + bytesOf(record.key, false) + bytesOf(record.value, false) +
  (record.headers === undefined ? 0 : headerBytes(record.headers, false))

/**
 * The bytes a record takes in a record batch of its own, with the batch's
 * overhead (an upper bound, tighter than `recordSizeBound`: text is counted).
 */
export const recordBytes = (record: EncodedRecord): number =>
  90 + bytesOf(record.key, true) + bytesOf(record.value, true) +
  (record.headers === undefined ? 0 : headerBytes(record.headers, true))
