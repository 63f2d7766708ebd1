/**
 * Ceiling contender (kafkajs-eos-floor): the benchmark's count as a bare exactly-once loop on the
 * kafkajs Skein runs on (its patch written in), one thread, no Skein: eachBatch -> in-memory Map
 * counts -> one transaction per fetched batch on a transactional producer per input partition
 * (outputs, `sendOffsets`, commit). No changelog and no store, so no restore: the rate no
 * exactly-once app built on this kafkajs can pass on one Node thread with this job's outputs
 * (issue 36 item 3a: how much of Skein's distance to ProducerPerformance is the client's).
 *
 * node --import tsx bench/apps/kafkajs-eos-count.ts --brokers B --input T --output T --group G
 *
 * Connects with the SKEIN_* security settings of its environment (bench/lib/security.ts).
 */
import type { Producer } from "kafkajs"
import { countArgs, loadKafkajs, makeCounter } from "../lib/kafkajsApp.ts"
import { kafkajsSecurity, securityFromEnv } from "../lib/security.ts"

const { Kafka, logLevel } = loadKafkajs("patched")

const { brokers, input, output, group } = countArgs("kafkajs-eos-count --brokers B --input T --output T --group G")

const kafka = new Kafka({
  clientId: "bench-kafkajs-eos-count",
  brokers: brokers.split(","),
  logLevel: logLevel.WARN,
  ...kafkajsSecurity(securityFromEnv()),
})
const consumer = kafka.consumer({ groupId: group, maxBytes: 10 * 1024 * 1024, readUncommitted: false })
/** A transactional producer per input partition, as Skein has one per task (made on its first batch). */
const producers = new Map<number, Promise<Producer>>()
const producerOf = (partition: number): Promise<Producer> => {
  let producer = producers.get(partition)
  if (producer === undefined) {
    const made = kafka.producer({
      transactionalId: `${group}-${partition}`,
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
    })
    producer = made.connect().then(() => made)
    producers.set(partition, producer)
  }
  return producer
}
const count = makeCounter()

const main = async (): Promise<void> => {
  await consumer.connect()
  await consumer.subscribe({ topic: input, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    partitionsConsumedConcurrently: 6,
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      if (batch.messages.length === 0) return
      const out = count(batch.messages)
      const lastOffset = batch.lastOffset()
      const transaction = await (await producerOf(batch.partition)).transaction()
      try {
        await transaction.send({ topic: output, messages: out, acks: -1 })
        await transaction.sendOffsets({
          consumerGroupId: group,
          topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: String(Number(lastOffset) + 1) }] }],
        })
        await transaction.commit()
      } catch (error) {
        // A bare loop: no retry, no recovery; the run fails (and the harness says so).
        await transaction.abort().catch((abortError: unknown) => console.error("abort failed:", abortError))
        throw error
      }
      resolveOffset(lastOffset)
      await heartbeat()
    },
  })
}

const shutdown = (): void => {
  void consumer
    .disconnect()
    .then(() => Promise.all([...producers.values()].map((p) => p.then((producer) => producer.disconnect()))))
    .finally(() => process.exit(0))
}
process.on("SIGTERM", shutdown)
process.on("SIGINT", shutdown)
main().catch((e: unknown) => {
  console.error(e)
  process.exit(1)
})
