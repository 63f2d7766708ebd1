/**
 * Baseline contender: a plain kafkajs consume-count-produce loop, no transactions.
 * eachBatch -> in-memory Map counts -> produce outputs (acks=all) -> commit offsets after the
 * acks. At-least-once; state is not durable (lost on a crash, so no restore to measure).
 *
 * node --import tsx bench/apps/kafkajs-count.ts --brokers B --input T --output T --group G
 *
 * Connects with the SKEIN_* security settings of its environment (bench/lib/security.ts).
 *
 * It runs kafkajs 2.2.4 as published: a private copy of the installed package with every file
 * of Skein's patch in its original form (this repository's own install is patched, and the
 * patch's produce encoder would make this loop something no kafkajs user runs).
 */
import { countArgs, loadKafkajs, makeCounter } from "../lib/kafkajsApp.ts"
import { kafkajsSecurity, securityFromEnv } from "../lib/security.ts"

const { Kafka, logLevel } = loadKafkajs("original")

const { brokers, input, output, group } = countArgs("kafkajs-count --brokers B --input T --output T --group G")

const kafka = new Kafka({
  clientId: "bench-kafkajs-count",
  brokers: brokers.split(","),
  logLevel: logLevel.WARN,
  ...kafkajsSecurity(securityFromEnv()),
})
const consumer = kafka.consumer({ groupId: group, maxBytes: 10 * 1024 * 1024 })
const producer = kafka.producer({ allowAutoTopicCreation: false })
const count = makeCounter()

const main = async (): Promise<void> => {
  await producer.connect()
  await consumer.connect()
  await consumer.subscribe({ topic: input, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    partitionsConsumedConcurrently: 6,
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      if (batch.messages.length === 0) return
      const out = count(batch.messages)
      await producer.send({ topic: output, messages: out, acks: -1 })
      const lastOffset = batch.lastOffset()
      await consumer.commitOffsets([
        { topic: batch.topic, partition: batch.partition, offset: (BigInt(lastOffset) + 1n).toString() },
      ])
      resolveOffset(lastOffset)
      await heartbeat()
    },
  })
}

const shutdown = (): void => {
  void consumer
    .disconnect()
    .then(() => producer.disconnect())
    .finally(() => process.exit(0))
}
process.on("SIGTERM", shutdown)
process.on("SIGINT", shutdown)
main().catch((e: unknown) => {
  console.error(e)
  process.exit(1)
})
