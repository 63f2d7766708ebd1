/**
 * The floor of a kafkajs restore: a bare kafkajs consumer reads a changelog read_committed from
 * its start to its end, with the settings of Skein's changelog reader
 * (`src/internal/kafka/changelogReader.ts`: a private group, `maxWaitTimeInMs` 200,
 * `maxBytesPerPartition` 4 MiB, `eachBatch`), and does nothing with the records but count them.
 * No store, no Effect, no Skein: what is left of a restore's time here is kafkajs's (fetching,
 * decoding, its garbage), so no restore built on kafkajs can be faster than this on one thread.
 *
 * node --import tsx bench/apps/kafkajs-changelog-read.ts --brokers B --topic T [--kafkajs patched|original]
 *
 * `--kafkajs patched` (the default) is this repository's install, with Skein's patch (its record
 * decoder among it); `original` a private copy of kafkajs 2.2.4 as published. Prints
 * `{"event":"read-start","ts":<ms>}` when the group is joined and
 * `{"event":"read-end","ts":<ms>,"records":<n>}` when every partition reached the end offset it
 * had at the start, then exits.
 */
import { randomUUID } from "node:crypto"
import { parseArgs } from "node:util"
import type * as KafkaJS from "kafkajs"
import { copyKafkajs } from "../../test/helpers/kafkajsCopies.ts"
import { kafkajsSecurity, securityFromEnv } from "../lib/security.ts"

const { values } = parseArgs({
  options: {
    brokers: { type: "string" },
    topic: { type: "string" },
    kafkajs: { type: "string", default: "patched" },
  },
})
const { brokers, topic } = values
if (brokers === undefined || topic === undefined || (values.kafkajs !== "patched" && values.kafkajs !== "original")) {
  console.error("usage: kafkajs-changelog-read --brokers B --topic T [--kafkajs patched|original]")
  process.exit(2)
}

const load = async (): Promise<typeof KafkaJS> => {
  if (values.kafkajs === "patched") return await import("kafkajs")
  const published = copyKafkajs("original")
  process.on("exit", () => published.remove())
  return published.load("index.js") as typeof KafkaJS
}
const { Kafka, logLevel } = await load()

const emit = (event: string, fields: Record<string, number> = {}): void =>
  console.log(JSON.stringify({ event, ts: Date.now(), ...fields }))

const kafka = new Kafka({
  clientId: "bench-changelog-read",
  brokers: brokers.split(","),
  logLevel: logLevel.WARN,
  ...kafkajsSecurity(securityFromEnv()),
})
const admin = kafka.admin()
await admin.connect()
const ends = new Map((await admin.fetchTopicOffsets(topic)).map((o) => [o.partition, Number(o.high)]))
await admin.disconnect()
const pending = new Set([...ends].filter(([, end]) => end > 0).map(([partition]) => partition))

const consumer = kafka.consumer({
  groupId: `bench-changelog-read-${randomUUID()}`,
  readUncommitted: false,
  maxWaitTimeInMs: 200,
  maxBytesPerPartition: 4 * 1024 * 1024,
})
let records = 0
let resolve = (): void => {}
const finished = new Promise<void>((done) => {
  resolve = done
})
consumer.on(consumer.events.GROUP_JOIN, () => emit("read-start"))
await consumer.connect()
await consumer.subscribe({ topics: [topic], fromBeginning: true })
await consumer.run({
  autoCommit: false,
  eachBatch: async ({ batch }) => {
    records += batch.messages.length
    if (Number(batch.lastOffset()) + 1 >= (ends.get(batch.partition) ?? 0)) pending.delete(batch.partition)
    if (pending.size === 0) resolve()
  },
})
if (pending.size === 0) resolve()
await finished
emit("read-end", { records })
await consumer.disconnect()
process.exit(0)
