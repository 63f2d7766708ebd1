/**
 * Micro-benchmark: kafkajs's record batch decoding against the record decoder of Skein's kafkajs
 * patch, side by side in one process (two private copies of kafkajs, one as published, one as
 * patched: test/helpers/kafkajsCopies.ts).
 *
 * Each scenario decodes one uncompressed record batch (by default 5,000 records of 10-byte keys
 * and 100-byte values, 25 records per millisecond, as a fetch returns them: what kafkajs does on the main thread for every
 * fetched record, input and changelog restores alike). The two decoders alternate for several
 * rounds; the medians (and the best rounds) are reported in ns per record. The two decodings are
 * checked to be equal first.
 *
 *   npx tsx bench/decoder.ts [--records 5000] [--key-bytes 10] [--value-bytes 100] [--rounds 9] [--min-ms 300]
 */
import * as os from "node:os"
import { parseArgs } from "node:util"
import { isDeepStrictEqual } from "node:util"
import { copyKafkajs, type KafkajsCopy } from "../test/helpers/kafkajsCopies.ts"
import { spread } from "./lib/stats.ts"

const { values: flags } = parseArgs({
  options: {
    records: { type: "string", default: "5000" },
    "key-bytes": { type: "string", default: "10" },
    "value-bytes": { type: "string", default: "100" },
    rounds: { type: "string", default: "9" },
    "min-ms": { type: "string", default: "300" }
  }
})
const records = Number(flags.records)
const keyBytes = Number(flags["key-bytes"])
const valueBytes = Number(flags["value-bytes"])
const rounds = Number(flags.rounds)
const minMs = Number(flags["min-ms"])

interface Decoded {
  readonly records: ReadonlyArray<unknown>
}
interface BatchDecoder {
  readonly name: string
  readonly decode: (batch: Buffer) => Promise<Decoded>
}

const decoderOf = (copy: KafkajsCopy, name: string): BatchDecoder => {
  const Decoder = copy.load("src/protocol/decoder.js") as new(buffer: Buffer) => unknown
  const decodeBatch = copy.load("src/protocol/recordBatch/v0/decoder.js") as (decoder: unknown) => Promise<Decoded>
  return { name, decode: (batch) => decodeBatch(new Decoder(batch)) }
}

/** A seeded byte source (mulberry32), so every run decodes the same bytes. */
const randomBytes = (seed: number) => {
  let state = seed >>> 0
  return (n: number): Buffer => {
    const buffer = Buffer.allocUnsafe(n)
    for (let i = 0; i < n; i++) {
      state = (state + 0x6d2b79f5) >>> 0
      let t = state
      t = Math.imul(t ^ (t >>> 15), t | 1)
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
      buffer[i] = (t ^ (t >>> 14)) >>> 24
    }
    return buffer
  }
}

interface Scenario {
  readonly name: string
  readonly headers: (bytes: (n: number) => Buffer) => Record<string, Buffer>
}

const scenarios: ReadonlyArray<Scenario> = [
  { name: "no headers (changelogs, most inputs)", headers: () => ({}) },
  {
    name: "a traceparent header",
    headers: (bytes) => ({ traceparent: Buffer.from(`00-${bytes(16).toString("hex")}-${bytes(8).toString("hex")}-01`) })
  }
]

/** One transactional record batch as the broker stores it (encoded by kafkajs as published). */
const batchOf = async (copy: KafkajsCopy, scenario: Scenario): Promise<Buffer> => {
  const Record = copy.load("src/protocol/recordBatch/record/v0/index.js") as (record: Record<string, unknown>) => unknown
  const { RecordBatch } = copy.load("src/protocol/recordBatch/v0/index.js") as {
    readonly RecordBatch: (batch: Record<string, unknown>) => Promise<{ readonly buffer: Buffer }>
  }
  const Long = copy.load("src/utils/long.js") as { fromValue: (value: number) => unknown }
  const bytes = randomBytes(42)
  const list = Array.from({ length: records }, (_, i) =>
    Record({ offsetDelta: i, timestampDelta: Math.floor(i / 25), key: bytes(keyBytes), value: bytes(valueBytes), headers: scenario.headers(bytes) }))
  const now = 1_796_208_721_285
  const batch = await RecordBatch({
    firstOffset: Long.fromValue(35_909),
    firstTimestamp: now,
    maxTimestamp: now + Math.floor((records - 1) / 25),
    lastOffsetDelta: records - 1,
    transactional: true,
    producerId: Long.fromValue(4_711),
    producerEpoch: 3,
    records: list
  })
  return batch.buffer
}

/** ns per record of one round: as many decodings as fit in minMs (at least 3). */
const round = async (decoder: BatchDecoder, batch: Buffer): Promise<number> => {
  let iterations = 0
  const start = process.hrtime.bigint()
  let elapsed = 0
  while (iterations < 3 || elapsed < minMs * 1e6) {
    await decoder.decode(batch)
    iterations++
    elapsed = Number(process.hrtime.bigint() - start)
  }
  return elapsed / (iterations * records)
}

const pad = (text: string, width: number): string => text.padStart(width)

const main = async () => {
  const originalCopy = copyKafkajs("original")
  const patchedCopy = copyKafkajs("patched")
  try {
    const kafkajs = decoderOf(originalCopy, "kafkajs")
    const patched = decoderOf(patchedCopy, "patched")
    console.log(
      `Record batch v2, transactional, uncompressed: ${records} records (${keyBytes}-byte keys, ${valueBytes}-byte values); ` +
        `${rounds} alternating rounds of >= ${minMs} ms each`
    )
    console.log(
      `Node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? "?"}), load average ${
        os.loadavg().map((l) => l.toFixed(2)).join(" ")
      }`
    )
    console.log("")
    console.log(
      `${"scenario".padEnd(40)}${pad("bytes", 9)}${pad("kafkajs ns/rec", 16)}${pad("(best)", 9)}${pad("patched ns/rec", 16)}${
        pad("(best)", 9)
      }${pad("ratio", 8)}`
    )
    for (const scenario of scenarios) {
      const batch = await batchOf(originalCopy, scenario)
      const expected = await kafkajs.decode(batch)
      const actual = await patched.decode(batch)
      if (expected.records.length !== records || !isDeepStrictEqual(actual, expected)) {
        throw new Error(`${scenario.name}: the patched decoder's records differ from kafkajs's`)
      }
      for (let i = 0; i < 2; i++) {
        await round(kafkajs, batch)
        await round(patched, batch)
      }
      const times = { kafkajs: [] as Array<number>, patched: [] as Array<number> }
      for (let r = 0; r < rounds; r++) {
        times.kafkajs.push(await round(kafkajs, batch))
        times.patched.push(await round(patched, batch))
      }
      const k = spread(times.kafkajs)?.median ?? Number.NaN
      const p = spread(times.patched)?.median ?? Number.NaN
      console.log(
        `${scenario.name.padEnd(40)}${pad(String(batch.length), 9)}${pad(k.toFixed(0), 16)}${
          pad(Math.min(...times.kafkajs).toFixed(0), 9)
        }${pad(p.toFixed(0), 16)}${pad(Math.min(...times.patched).toFixed(0), 9)}${pad(`${(k / p).toFixed(1)}x`, 8)}`
      )
    }
  } finally {
    originalCopy.remove()
    patchedCopy.remove()
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
