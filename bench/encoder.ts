/**
 * Micro-benchmark: kafkajs's produce request encoding against the lean encoder of Skein's kafkajs
 * patch, side by side in one process (two private copies of kafkajs, one as published, one as
 * patched: test/helpers/kafkajsCopies.ts).
 *
 * Each scenario encodes one transactional Produce v7 request (by default 5,000 records of 8-byte
 * keys and 100-byte values over 12 partitions) and frames it as a connection does
 * (protocol/request.js): what kafkajs does on the main thread per send. The two encoders
 * alternate for several rounds; the medians (and the best rounds) are reported in ns per record.
 * The two requests are checked to be byte-identical first.
 *
 *   npx tsx bench/encoder.ts [--records 5000] [--partitions 12] [--key-bytes 8] [--value-bytes 100]
 *                            [--rounds 9] [--min-ms 300]
 */
import * as os from "node:os"
import { parseArgs } from "node:util"
import { copyKafkajs, type KafkajsCopy } from "../test/helpers/kafkajsCopies.ts"

const { values: flags } = parseArgs({
  options: {
    records: { type: "string", default: "5000" },
    partitions: { type: "string", default: "12" },
    "key-bytes": { type: "string", default: "8" },
    "value-bytes": { type: "string", default: "100" },
    rounds: { type: "string", default: "9" },
    "min-ms": { type: "string", default: "300" }
  }
})
const records = Number(flags.records)
const partitionCount = Number(flags.partitions)
const keyBytes = Number(flags["key-bytes"])
const valueBytes = Number(flags["value-bytes"])
const rounds = Number(flags.rounds)
const minMs = Number(flags["min-ms"])

interface Encoded {
  readonly buffer: Buffer
}
interface Request {
  readonly apiKey: number
  readonly apiVersion: number
  readonly encode: () => Promise<Encoded>
}
interface Encoder {
  readonly name: string
  readonly encode: (topicData: ReadonlyArray<unknown>) => Promise<Buffer>
}

const encoderOf = (copy: KafkajsCopy, name: string): Encoder => {
  const produce = copy.load("src/protocol/requests/produce/v7/request.js") as (args: Record<string, unknown>) => Request
  const frame = copy.load("src/protocol/request.js") as (
    args: { correlationId: number; clientId: string; request: Request }
  ) => Promise<Encoded>
  const Long = copy.load("src/utils/long.js") as { fromValue: (value: number) => unknown }
  const producerId = Long.fromValue(4_711)
  return {
    name,
    encode: async (topicData) => {
      const request = produce({ acks: -1, timeout: 30_000, transactionalId: "bench-task-0", producerId, producerEpoch: 3, topicData })
      return (await frame({ correlationId: 1, clientId: "skein-bench", request })).buffer
    }
  }
}

/** A seeded byte source (mulberry32), so every run encodes the same bytes. */
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
  readonly message: (i: number, bytes: (n: number) => Buffer) => Record<string, unknown>
}

const now = Date.now()
const scenarios: ReadonlyArray<Scenario> = [
  { name: "no timestamps", message: (_, bytes) => ({ key: bytes(keyBytes), value: bytes(valueBytes) }) },
  {
    name: "timestamps as strings (Skein's outputs)",
    message: (i, bytes) => ({ key: bytes(keyBytes), value: bytes(valueBytes), timestamp: String(now - 5_000 + (i % 5_000)) })
  },
  {
    name: "timestamps and a traceparent header",
    message: (i, bytes) => ({
      key: bytes(keyBytes),
      value: bytes(valueBytes),
      timestamp: String(now - 5_000 + (i % 5_000)),
      headers: { traceparent: `00-${bytes(16).toString("hex")}-${bytes(8).toString("hex")}-01` }
    })
  }
]

/**
 * The topic data kafkajs's sendMessages hands to the broker: messages grouped per partition (keys
 * are strings). Each message is an object literal given its partition by assignment, as Skein's
 * producer makes them (an object made by spreading another, `{ ...message, partition }`, is a
 * different case for V8: reading a property it lacks, such as `headers`, is several times slower,
 * in kafkajs's encoder and the lean one alike).
 */
const topicDataOf = (scenario: Scenario): ReadonlyArray<unknown> => {
  const bytes = randomBytes(42)
  const perPartition = new Map<number, Array<Record<string, unknown>>>()
  for (let i = 0; i < records; i++) {
    const partition = i % partitionCount
    const list = perPartition.get(partition) ?? []
    const message = scenario.message(i, bytes)
    message["partition"] = partition
    list.push(message)
    perPartition.set(partition, list)
  }
  return [{
    topic: "bench-output",
    partitions: [...perPartition].map(([partition, messages]) => ({ partition: String(partition), messages, firstSequence: 0 }))
  }]
}

/** ns per record of one round: as many encodings as fit in minMs (at least 3). */
const round = async (encoder: Encoder, topicData: ReadonlyArray<unknown>): Promise<number> => {
  let iterations = 0
  const start = process.hrtime.bigint()
  let elapsed = 0
  while (iterations < 3 || elapsed < minMs * 1e6) {
    await encoder.encode(topicData)
    iterations++
    elapsed = Number(process.hrtime.bigint() - start)
  }
  return elapsed / (iterations * records)
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[middle] ?? 0 : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2
}

const pad = (text: string, width: number): string => text.padStart(width)

const main = async () => {
  const originalCopy = copyKafkajs("original")
  const patchedCopy = copyKafkajs("patched")
  try {
    const kafkajs = encoderOf(originalCopy, "kafkajs")
    const lean = encoderOf(patchedCopy, "lean")
    console.log(
      `Produce v7 request, transactional, framed: ${records} records (${keyBytes}-byte keys, ${valueBytes}-byte values) ` +
        `over ${partitionCount} partitions; ${rounds} alternating rounds of >= ${minMs} ms each`
    )
    console.log(
      `Node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? "?"}), load average ${
        os.loadavg().map((l) => l.toFixed(2)).join(" ")
      }`
    )
    console.log("")
    console.log(
      `${"scenario".padEnd(42)}${pad("bytes", 9)}${pad("kafkajs ns/rec", 16)}${pad("(best)", 9)}${pad("lean ns/rec", 13)}${
        pad("(best)", 9)
      }${pad("ratio", 8)}`
    )
    for (const scenario of scenarios) {
      const topicData = topicDataOf(scenario)
      // records without a timestamp get Date.now(): the same one for both, for the comparison
      const realNow = Date.now
      Date.now = () => now
      const expected = await kafkajs.encode(topicData)
      const actual = await lean.encode(topicData)
      Date.now = realNow
      if (!expected.equals(actual)) throw new Error(`${scenario.name}: the lean encoder's request differs from kafkajs's`)
      for (let i = 0; i < 2; i++) {
        await round(kafkajs, topicData)
        await round(lean, topicData)
      }
      const times = { kafkajs: [] as Array<number>, lean: [] as Array<number> }
      for (let r = 0; r < rounds; r++) {
        times.kafkajs.push(await round(kafkajs, topicData))
        times.lean.push(await round(lean, topicData))
      }
      const k = median(times.kafkajs)
      const l = median(times.lean)
      console.log(
        `${scenario.name.padEnd(42)}${pad(String(expected.length), 9)}${pad(k.toFixed(0), 16)}${
          pad(Math.min(...times.kafkajs).toFixed(0), 9)
        }${pad(l.toFixed(0), 13)}${pad(Math.min(...times.lean).toFixed(0), 9)}${pad(`${(k / l).toFixed(1)}x`, 8)}`
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
