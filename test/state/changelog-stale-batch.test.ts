import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber } from "effect"
import type { Consumer, ConsumerRunConfig, EachBatchPayload } from "kafkajs"
import * as ChangelogReader from "../../src/internal/kafka/changelogReader.ts"
import * as Client from "../../src/internal/kafka/client.ts"
import * as Producer from "../../src/internal/kafka/producer.ts"
import * as Helpers from "../helpers/kafka.ts"
import { brokers } from "../utils/broker.ts"

// Issue 29, defect 14: the changelog reader ignored kafkajs's isStale(). A batch fetched before a
// read's seek but handed to the reader after a later read of the same partition began (kafkajs's
// worker busy meanwhile: the reader's batches of other partitions wait for their applies) was
// applied to the later read: it moved the read's position past records it had not read yet,
// which were then skipped (a full restore missing the first records of its partition).
//
// Here the test holds the worker itself: the reader's consumer is the real one, on the broker,
// and its second batch is handed to the reader only once the first read was interrupted and a
// second read of the partition, from offset 0, has seeked (kafkajs's fetcher waits meanwhile, so
// the seek is still pending when the batch arrives: isStale() is true).
describe("changelog reader", () => {
  it.scopedLive("a batch fetched before a read's seek is never applied to that read", () =>
    Effect.gen(function*() {
      const topic = Helpers.unique("stale-batch")
      yield* Helpers.createTopics([{ name: topic, partitions: 1 }])
      const kafka = yield* Client.makeKafka({ clientId: "stale-batch", brokers: brokers() })
      // ~900 kB records: a fetch (4 MiB per partition) takes a few, so the partition is several batches.
      const count = 12
      const value = "x".repeat(900_000)
      for (let i = 0; i < count; i++) yield* Helpers.produce(topic, [{ key: `k${i}`, value, partition: 0 }])
      const permit = yield* Producer.atLeastOnce(kafka, { partition: 0, maxMessageBytes: 1_048_576 })

      const staleHeld = yield* Deferred.make<void>()
      const secondSeek = yield* Deferred.make<void>()
      let handOn: () => void = () => {}
      const handedOn = new Promise<void>((resolve) => {
        handOn = resolve
      })
      let seeks = 0
      const makeConsumer: unknown = Reflect.get(kafka, "consumer")
      if (typeof makeConsumer !== "function") throw new Error("kafkajs's Kafka has no consumer()")
      Reflect.set(kafka, "consumer", (...args: ReadonlyArray<unknown>) => {
        const consumer: Consumer = Reflect.apply(makeConsumer, kafka, args)
        const run = consumer.run.bind(consumer)
        const seek = consumer.seek.bind(consumer)
        let held = false
        consumer.run = (config?: ConsumerRunConfig) =>
          run({
            ...config,
            eachBatch: async (payload: EachBatchPayload) => {
              if (!held && Number(payload.batch.firstOffset()) > 0) {
                // The partition's second batch: the worker is held here until the second read seeked.
                held = true
                Deferred.unsafeDone(staleHeld, Effect.void)
                await handedOn
              }
              await config?.eachBatch?.(payload)
            }
          })
        consumer.seek = (topicPartitionOffset) => {
          seek(topicPartitionOffset)
          if (++seeks === 2) Deferred.unsafeDone(secondSeek, Effect.void)
        }
        return consumer
      })
      const reader = yield* ChangelogReader.make(kafka, { topic, groupId: Helpers.unique("stale-batch-reader") })

      const first: Array<number> = []
      const firstRead = yield* Effect.fork(reader.read(permit, 0, { from: 0, until: count }, (records) =>
        Effect.sync(() => {
          first.push(...records.map((r) => r.offset))
        })))
      yield* Deferred.await(staleHeld)
      yield* Fiber.interrupt(firstRead)
      const second: Array<number> = []
      const secondRead = yield* Effect.fork(reader.read(permit, 0, { from: 0, until: count }, (records) =>
        Effect.sync(() => {
          second.push(...records.map((r) => r.offset))
        })))
      yield* Deferred.await(secondSeek)
      handOn()
      const restored = yield* Fiber.join(secondRead).pipe(
        Effect.timeoutFail({ duration: Duration.seconds(60), onTimeout: () => new Error("the second read did not end") })
      )
      console.log(`first read applied ${JSON.stringify(first)}; second read applied ${JSON.stringify(second)}`)
      assert.deepStrictEqual(
        { restored, offsets: second },
        { restored: count, offsets: Array.from({ length: count }, (_, i) => i) },
        "the second read applies every record of its range once, in order"
      )
    }), { timeout: 120_000 })
})
