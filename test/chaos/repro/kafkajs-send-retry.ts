/**
 * Repro: kafkajs 2.2.4 `sendMessages` retries a multi-broker send after one
 * broker's request failed while another broker's request is still in flight
 * (Promise.all fails fast). The in-flight request is sent again with new
 * sequence numbers, so its records are written twice in the same
 * (committed) transaction.
 *
 *   tsx test/chaos/repro/kafkajs-send-retry.ts <bootstrap of a 3-node cluster> [transactions]
 *
 * KAFKAJS=<path to a kafkajs package> runs it against another copy, e.g. one
 * with kafkajs-sendMessages.patch applied (then: no duplicates).
 *
 * Each transaction sends one record to each of 6 partitions (led by 3
 * brokers) right after the previous commit, when AddPartitionsToTxn often
 * answers CONCURRENT_TRANSACTIONS (retriable). Then the topic is read raw
 * (transactions resolved from the log's markers) and duplicates are counted.
 */
import { Effect } from "effect"
import { createRequire } from "node:module"
import type KafkajsModule from "kafkajs"
import type { Kafka } from "kafkajs"
const kafkajs = createRequire(import.meta.url)(process.env["KAFKAJS"] ?? "kafkajs") as typeof KafkajsModule
import * as Wire from "../wire.ts"

const brokers = (process.argv[2] ?? "").split(",")
const transactions = Number(process.argv[3] ?? "300")
const topic = `repro-send-retry-${Date.now().toString(36)}`

const program = Effect.gen(function*() {
  const kafka = new kafkajs.Kafka({ brokers, logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  yield* Effect.promise(async () => {
    await admin.connect()
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 6, replicationFactor: 3 }] })
    const meta = await admin.fetchTopicMetadata({ topics: [topic] })
    console.log("leaders", meta.topics[0]?.partitions.map((p) => `${p.partitionId}->${p.leader}`).join(" "))
    await admin.disconnect()
  })
  const producer = kafka.producer({
    transactionalId: `${topic}-tx`,
    idempotent: true,
    maxInFlightRequests: 1,
    // as Skein's task producers
    retry: { initialRetryTime: 50, maxRetryTime: 1000, retries: 20 }
  })
  yield* Effect.promise(() => producer.connect())
  let id = 0
  for (let t = 0; t < transactions; t++) {
    yield* Effect.promise(async () => {
      const tx = await producer.transaction()
      await tx.send({
        topic,
        messages: Array.from({ length: 6 }, (_, partition) => ({ partition, key: "k", value: String(id++) }))
      })
      await tx.commit()
    })
  }
  yield* Effect.promise(() => producer.disconnect())
  const wire = yield* Wire.make(brokers)
  // The last commit's markers are written after commit() returns: wait until no transaction is open.
  for (;;) {
    const ends = yield* wire.ends(topic)
    if (ends.every((e) => e.lastStableOffset === e.highWatermark)) break
    yield* Effect.sleep("100 millis")
  }
  const logs = yield* wire.read(topic)
  const seen = new Map<string, number>()
  for (const log of logs) for (const r of log.records) seen.set(r.value ?? "", (seen.get(r.value ?? "") ?? 0) + 1)
  const duplicates = [...seen.values()].reduce((n, c) => n + Math.max(0, c - 1), 0)
  const lost = id - seen.size
  console.log(`raw log: sent ${id} records in ${transactions} committed transactions: duplicates=${duplicates} lost=${lost}`)
  // Second opinion: kafkajs's own read_committed consumer.
  const counted = yield* Effect.promise(() => readCommittedWithKafkajs(kafka, topic, logs.map((l) => l.highWatermark)))
  const kDuplicates = [...counted.values()].reduce((n, c) => n + Math.max(0, c - 1), 0)
  console.log(`kafkajs read_committed: distinct=${counted.size} duplicates=${kDuplicates} lost=${id - counted.size}`)
  return duplicates + lost
})

const readCommittedWithKafkajs = async (kafka: Kafka, topic: string, ends: ReadonlyArray<number>) => {
  const seen = new Map<string, number>()
  const positions = ends.map(() => 0)
  const consumer = kafka.consumer({ groupId: `${topic}-reader`, readUncommitted: false, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 30_000)
    consumer.on(consumer.events.END_BATCH_PROCESS, (event) => {
      positions[event.payload.partition] = Number(event.payload.lastOffset) + 1
      // The last offset of each partition is a commit marker, never delivered.
      if (positions.every((p, i) => p >= (ends[i] ?? 0) - 1)) {
        clearTimeout(timer)
        resolve()
      }
    })
    void consumer.run({
      eachMessage: async ({ message }) => {
        const value = message.value?.toString("utf8") ?? ""
        seen.set(value, (seen.get(value) ?? 0) + 1)
      }
    })
  })
  await consumer.disconnect()
  return seen
}

Effect.runPromise(Effect.scoped(program)).then((bad) => process.exit(bad > 0 ? 1 : 0))
