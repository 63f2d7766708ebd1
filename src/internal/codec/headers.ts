/**
 * Headers between their forms: the list of name and value pairs a transform
 * reads (`InputRecord.rawHeaders`) and may write back, and the by-name form
 * kafkajs sends (an array for a repeated name, in order).
 *
 * @internal
 */
import type { FetchedHeaders } from "../kafka/consumer.ts"

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
 * An output's headers: by name (an array for a repeated name), or as a list
 * of name and value pairs, as an input record's `rawHeaders` are (a name may
 * repeat; its values keep their order). Values are text (written as UTF-8)
 * or bytes (written as they are).
 *
 * @example
 * ```ts
 * import type { Topic } from "skein"
 *
 * const byName: Topic.Headers = { source: "word-count", trace: [Buffer.from([0x01]), Buffer.from([0x02])] }
 * const pairs: Topic.Headers = [["trace", Buffer.from([0x01])], ["trace", Buffer.from([0x02])]]
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export type Headers = Readonly<Record<string, HeaderValue>> | ReadonlyArray<readonly [string, string | Buffer]>

const noPairs: ReadonlyArray<readonly [string, Buffer]> = []
const empty = Buffer.alloc(0)

/**
 * Fetched headers as pairs, each value's bytes as fetched (a header without a
 * value as empty bytes: kafkajs cannot send a null one), a repeated name's
 * values in record order.
 */
export const headerPairs = (headers: FetchedHeaders): ReadonlyArray<readonly [string, Buffer]> => {
  let pairs: Array<readonly [string, Buffer]> | undefined
  for (const name in headers) {
    const value = headers[name]!
    pairs ??= []
    if (Buffer.isBuffer(value) || value === null) pairs.push([name, value ?? empty])
    else for (const item of value) pairs.push([name, item ?? empty])
  }
  return pairs ?? noPairs
}

/** An output's headers by name: pairs grouped (a repeated name's values in order), a by-name object as it is. */
export const headerRecord = (headers: Headers): Readonly<Record<string, HeaderValue>> => {
  if (!isPairs(headers)) return headers
  // No pairs (the usual input's `rawHeaders`, passed on by the stream DSL): no Map and copies per output.
  if (headers.length === 0) return noHeaders
  // A Map, then own properties: a header may be named `__proto__`.
  const byName = new Map<string, Array<string | Buffer>>()
  for (const [name, value] of headers) {
    const values = byName.get(name)
    if (values === undefined) byName.set(name, [value])
    else values.push(value)
  }
  return Object.fromEntries(Array.from(byName, ([name, values]) => [name, values.length === 1 ? values[0]! : values]))
}

const noHeaders: Readonly<Record<string, HeaderValue>> = Object.freeze({})

const isPairs = (headers: Headers): headers is ReadonlyArray<readonly [string, string | Buffer]> => Array.isArray(headers)
