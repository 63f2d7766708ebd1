/**
 * kafkajs 2.2.4 asks each fetch for fixed byte sizes (1 MiB a partition, 10 MiB a fetch), so
 * larger records made smaller batches, and Skein's transactions and changelog writes a record grew
 * with the record size (issue 36: a 4x value cost Skein 37 % of its throughput, Kafka Streams
 * 16 %). Skein's patch (`consumer/runner.js`, `consumer/consumerGroup.js`) lets the eachBatch
 * handler carry `fetchSizes` (`src/internal/kafka/fetchSizes.ts`), which the fetch asks for
 * instead.
 *
 * A backlog of 400-byte records, read by the patched kafkajs with and without the sizes: without,
 * no batch holds more than 1 MiB of records; with them (`maxPollRecords` 20,000, one task), once
 * the first batch has shown the records' size, a batch holds half the share, 10,000 records,
 * about 4 MiB. Counts of records, not times.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as KafkaJS from "kafkajs"
import * as FetchSizes from "../src/internal/kafka/fetchSizes.ts"
import { copyKafkajs, runUntilRead } from "./helpers/kafkajsCopies.ts"
import * as Helpers from "./helpers/kafka.ts"
import { brokers } from "./utils/broker.ts"

const valueBytes = 400
const records = 30_000
/** The records of 1 MiB: no batch of kafkajs's fixed size holds more. */
const recordsInOneMiB = Math.floor(FetchSizes.minPartitionBytes / (valueBytes + 8))

/** The sizes of the batches a consumer of the patched kafkajs reads from `topic`, with `sizes` or without. */
const batchSizes = (topic: string, sizes: FetchSizes.FetchSizes | undefined) =>
  Effect.acquireUseRelease(
    Effect.sync(() => copyKafkajs("patched")),
    (copy) =>
      Effect.promise(async () => {
        const { Kafka, logLevel } = copy.load("index.js") as typeof KafkaJS
        const kafka = new Kafka({ clientId: "fetch-sizes", brokers: [...brokers()], logLevel: logLevel.NOTHING })
        const consumer = kafka.consumer({ groupId: Helpers.unique("fetch-sizes") })
        consumer.on(consumer.events.GROUP_JOIN, () => sizes?.assigned(1))
        const seen: Array<number> = []
        const onBatch = async ({ batch }: KafkaJS.EachBatchPayload) => {
          sizes?.observe(batch.topic, batch.messages)
          seen.push(batch.messages.length)
        }
        await runUntilRead(consumer, topic, records, (allRead) => allRead, sizes === undefined ? onBatch : Object.assign(onBatch, { fetchSizes: sizes }))
        return seen
      }),
    (copy) => Effect.sync(() => copy.remove())
  )

describe("kafkajs fetch sizes", () => {
  it.scopedLive("a fetch asks for the bytes of the records it should bring, not kafkajs's fixed 1 MiB a partition", () =>
    Effect.gen(function*() {
      const topic = Helpers.unique("fetch-sizes")
      yield* Helpers.createTopics([{ name: topic, partitions: 1 }])
      const value = "v".repeat(valueBytes)
      for (let from = 0; from < records; from += 2_000) {
        yield* Helpers.produce(topic, Array.from({ length: 2_000 }, (_, i) => ({ key: `k${(from + i) % 1000}`, value, partition: 0 })))
      }
      const fixed = yield* batchSizes(topic, undefined)
      const sized = yield* batchSizes(topic, FetchSizes.make(20_000))
      process.stderr.write(`fetch-sizes: fixed ${fixed.join(",")}; sized ${sized.join(",")}\n`)
      assert.isAtMost(Math.max(...fixed), recordsInOneMiB, "kafkajs's fixed size: 1 MiB of records a batch at most")
      assert.isAtMost(sized[0]!, recordsInOneMiB, "the first fetch, before any record's size is known, asks for 1 MiB")
      assert.isAtLeast(Math.max(...sized), 9_000, "once sized: half the share (10,000 records) a batch")
      assert.isAtMost(Math.max(...sized), 10_500, "once sized: no more than half the share and a record batch")
    }), { timeout: 120_000 })
})
