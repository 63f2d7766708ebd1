/**
 * The default partitioner of Skein's kafkajs patch picks the partitions kafkajs picks.
 *
 * The patch (`patches/kafkajs+2.2.4.patch`: `producer/partitioners/default/murmur2.js`,
 * `producer/partitioners/legacy/partitioner.js`) computes murmur2 in 32-bit arithmetic instead of
 * BigInt-backed Longs, and filters the partition metadata only for records with neither partition
 * nor key. Each test runs kafkajs as published and kafkajs as patched side by side (two private
 * copies, see `test/helpers/kafkajsCopies.ts`) on the same keys, and checks the hash against the
 * Java client's own test vectors.
 */
import { assert, describe, it } from "@effect/vitest"
import type { KafkajsCopy } from "../helpers/kafkajsCopies.ts"
import { sideBySide } from "../helpers/kafkajsSideBySide.ts"
import { seeded } from "../helpers/seeded.ts"

type Murmur2 = (key: unknown) => number

interface PartitionMetadata {
  readonly partitionId: number
  readonly leader: number
}

type Partitioner = (args: {
  readonly topic: string
  readonly partitionMetadata: ReadonlyArray<PartitionMetadata>
  readonly message: { readonly key?: unknown; readonly partition?: number | null }
}) => number

const isFunction = (value: unknown): value is (...args: ReadonlyArray<unknown>) => unknown => typeof value === "function"

const murmur2Of = (copy: KafkajsCopy): Murmur2 => {
  const hash = copy.load("src/producer/partitioners/default/murmur2.js")
  if (!isFunction(hash)) throw new Error("murmur2.js exports no function")
  return (key) => Number(hash(key))
}

/** A fresh default partitioner of the copy (as `producer()` makes one). */
const partitionerOf = (copy: KafkajsCopy): Partitioner => {
  const create = copy.load("src/producer/partitioners/default/index.js")
  if (!isFunction(create)) throw new Error("the default partitioner exports no function")
  const partitioner = create()
  if (!isFunction(partitioner)) throw new Error("the default partitioner makes no function")
  return (args) => Number(partitioner(args))
}

const copies = sideBySide()


describe("kafkajs patch: default partitioner", () => {
  it("murmur2 matches the Java client's test vectors", () => {
    const murmur2 = murmur2Of(copies.patched)
    // org.apache.kafka.common.utils.UtilsTest#testMurmur2
    const vectors: ReadonlyArray<readonly [string, number]> = [
      ["21", -973932308],
      ["foobar", -790332482],
      ["a-little-bit-long-string", -985981536],
      ["a-little-bit-longer-string", -1486304829],
      ["lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971],
      ["abc", 479470107]
    ]
    for (const [key, hash] of vectors) {
      assert.strictEqual(murmur2(key), hash, key)
      assert.strictEqual(murmur2(Buffer.from(key)), hash, `${key} as a Buffer`)
    }
  })

  it("murmur2 hashes every key as kafkajs does: Buffers, strings of any length and characters, numbers", () => {
    const original = murmur2Of(copies.original)
    const patched = murmur2Of(copies.patched)
    const seed = 14
    const next = seeded(seed)
    const chars = ["a", "Z", "0", "-", "é", "€", "𝄞", "\ud800", "\u0000"]
    const keys: Array<unknown> = [0, 1, -1, 12_345, 2 ** 40, "", "x".repeat(5_000), "€".repeat(341), "€".repeat(342)]
    for (let length = 0; length < 48; length++) {
      for (let i = 0; i < 40; i++) {
        const bytes = Buffer.from(Array.from({ length }, () => Math.floor(next() * 256)))
        keys.push(bytes, bytes.toString("latin1"))
      }
    }
    // ASCII strings around the patch's 32-character loop, and one non-ASCII character at each place.
    for (let length = 0; length < 40; length++) {
      const ascii = Array.from({ length }, () => String.fromCharCode(Math.floor(next() * 128))).join("")
      keys.push(ascii)
      for (let at = 0; at < length; at++) keys.push(ascii.slice(0, at) + "é" + ascii.slice(at + 1))
    }
    for (let i = 0; i < 2_000; i++) {
      const length = Math.floor(next() * 400)
      keys.push(Array.from({ length }, () => chars[Math.floor(next() * chars.length)]).join(""))
    }
    for (const [i, key] of keys.entries()) {
      assert.strictEqual(patched(key), original(key), `key ${i} (seed ${seed})`)
    }
  })

  it("the partitioner picks kafkajs's partition for keyed records, explicit partitions, and keyless records", () => {
    const metadata: ReadonlyArray<PartitionMetadata> = Array.from({ length: 12 }, (_, partitionId) => ({
      partitionId,
      leader: partitionId % 5 === 0 ? -1 : 1
    }))
    const original = partitionerOf(copies.original)
    const patched = partitionerOf(copies.patched)
    for (let i = 0; i < 2_000; i++) {
      const message = { key: `key-${i}` }
      const args = { topic: "t", partitionMetadata: metadata, message }
      assert.strictEqual(patched(args), original(args), message.key)
      const explicit = { topic: "t", partitionMetadata: metadata, message: { key: `key-${i}`, partition: i % 7 } }
      assert.strictEqual(patched(explicit), i % 7)
    }
    // Keyless records go round robin over the partitions with a leader (each partitioner starts
    // at a random counter, so only the set of partitions is comparable).
    const keyless = new Set<number>()
    for (let i = 0; i < 200; i++) keyless.add(patched({ topic: "u", partitionMetadata: metadata, message: {} }))
    assert.deepStrictEqual([...keyless].sort((a, b) => a - b), metadata.filter((p) => p.leader >= 0).map((p) => p.partitionId))
    const noLeader = metadata.map((p) => ({ ...p, leader: -1 }))
    const fallback = patched({ topic: "v", partitionMetadata: noLeader, message: { key: null } })
    assert.isTrue(fallback >= 0 && fallback < 12)
  })
})
