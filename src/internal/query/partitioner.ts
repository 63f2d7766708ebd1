/**
 * The partition of a key as the producer's default partitioner picks it
 * (Kafka's and kafkajs's): murmur2 of the key's bytes, made positive, modulo
 * the partition count. A query uses it to name the task that owns a key.
 *
 * Pure.
 *
 * @internal
 */

const seed = 0x9747b28c
const m = 0x5bd1e995
const r = 24

/** Kafka's murmur2 of `data` (a signed 32-bit integer, as Java's `Utils.murmur2`). */
export const murmur2 = (data: Uint8Array): number => {
  const length = data.length
  let h = seed ^ length
  const length4 = length >>> 2
  for (let i = 0; i < length4; i++) {
    const i4 = i * 4
    let k = ((data[i4] ?? 0) & 0xff) | (((data[i4 + 1] ?? 0) & 0xff) << 8) | (((data[i4 + 2] ?? 0) & 0xff) << 16) |
      (((data[i4 + 3] ?? 0) & 0xff) << 24)
    k = Math.imul(k, m)
    k ^= k >>> r
    k = Math.imul(k, m)
    h = Math.imul(h, m)
    h ^= k
  }
  const tail = length & ~3
  const rest = length % 4
  if (rest === 3) h ^= ((data[tail + 2] ?? 0) & 0xff) << 16
  if (rest >= 2) h ^= ((data[tail + 1] ?? 0) & 0xff) << 8
  if (rest >= 1) {
    h ^= (data[tail] ?? 0) & 0xff
    h = Math.imul(h, m)
  }
  h ^= h >>> 13
  h = Math.imul(h, m)
  h ^= h >>> 15
  return h | 0
}

const encoder = new TextEncoder()

/** The partition of the record key whose bytes are `key`'s UTF-8, of `partitions` partitions. */
export const partitionOf = (key: string, partitions: number): number =>
  (murmur2(encoder.encode(key)) & 0x7fffffff) % partitions
