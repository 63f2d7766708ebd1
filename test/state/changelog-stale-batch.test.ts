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

// Issue 29, defect 14, follow-up: a batch of only filtered records (an aborted transaction and its
// marker, commit markers) never reaches eachBatch, so its isStale() is never asked: kafkajs
// resolves it itself and reports it only by END_BATCH_PROCESS (batchSize 0, its last offset). One
// fetched for a read of a partition, but handled after a later read of that partition seeked,
// moved the later read's position past records it had not read: the read ended at once, with
// none of them applied.
//
// Partition 1 holds a committed transaction (offsets 0-9, its marker at 10) and then an aborted
// one (11-20, its marker at 21). A read of 11..22 fetches the aborted one: a batch of only
// filtered records. The test holds the worker on partition 0's batch of that same fetch (so the
// filtered batch waits behind it), interrupts that read, starts a read of 0..22 (it seeks back to
// 0), and only then lets the worker go on. The broker orders a fetch's partitions as it likes: a
// fetch whose filtered batch comes first is handled at once (not stale), and the tail read is
// tried again.
describe("changelog reader, batches of only filtered records", () => {
  it.scopedLive("a filtered batch fetched before a read's seek never moves that read's position", () =>
    Effect.gen(function*() {
      const topic = Helpers.unique("stale-filtered")
      yield* Helpers.createTopics([{ name: topic, partitions: 2 }])
      const kafka = yield* Client.makeKafka({ clientId: "stale-filtered", brokers: brokers() })
      // Partition 0: ~4 MiB batches (the reader's maxBytesPerPartition), one per attempt at most.
      const large = 40
      const value = "x".repeat(900_000)
      for (let i = 0; i < large; i++) yield* Helpers.produce(topic, [{ key: `k${i}`, value, partition: 0 }])
      // Partition 1: committed 0-9 (marker 10), aborted 11-20 (marker 21).
      yield* Effect.promise(async () => {
        const producer = kafka.producer({ transactionalId: Helpers.unique("stale-filtered-tx"), idempotent: true, maxInFlightRequests: 1 })
        await producer.connect()
        try {
          for (const outcome of ["commit", "abort"] as const) {
            const transaction = await producer.transaction()
            await transaction.send({
              topic,
              messages: Array.from({ length: 10 }, (_, i) => ({ key: `t${i}`, value: outcome, partition: 1 }))
            })
            await (outcome === "commit" ? transaction.commit() : transaction.abort())
          }
        } finally {
          await producer.disconnect()
        }
      })
      const ends = new Map((yield* Helpers.offsets(topic)).map((o) => [o.partition, o.lastStable]))
      assert.deepStrictEqual([ends.get(0), ends.get(1)], [large, 22], "partition 1: 10 committed records, a marker, 10 aborted ones, a marker")
      const permit0 = yield* Producer.atLeastOnce(kafka, { partition: 0, maxMessageBytes: 1_048_576 })
      const permit1 = yield* Producer.atLeastOnce(kafka, { partition: 1, maxMessageBytes: 1_048_576 })

      /** Seeks of partition 1, in order. */
      const seeks: Array<string> = []
      /** Partition 1's batches as kafkajs handled them (filtered ones included), with the seeks before each. */
      const handled: Array<{ readonly first: string | null; readonly last: string; readonly size: number; readonly seeksBefore: number }> = []
      /** Completed by the tail read's fetch: true when partition 0's batch is held before the filtered one, else false. */
      let attempt = yield* Deferred.make<boolean>()
      /** A tail read seeked and no fetch has begun since: the next fetch fetches its filtered batch. */
      let seekedForTail = false
      /** The fetch begun since the tail read's seek: its first batch decides the attempt. */
      let armed = false
      let handOn: () => void = () => {}
      const handedOn = new Promise<void>((resolve) => {
        handOn = resolve
      })
      const makeConsumer: unknown = Reflect.get(kafka, "consumer")
      if (typeof makeConsumer !== "function") throw new Error("kafkajs's Kafka has no consumer()")
      Reflect.set(kafka, "consumer", (...args: ReadonlyArray<unknown>) => {
        const consumer: Consumer = Reflect.apply(makeConsumer, kafka, args)
        const run = consumer.run.bind(consumer)
        const seek = consumer.seek.bind(consumer)
        consumer.on(consumer.events.FETCH_START, () => {
          if (seekedForTail) {
            seekedForTail = false
            armed = true
          }
        })
        consumer.on(consumer.events.START_BATCH_PROCESS, (event) => {
          if (event.payload.partition !== 1) return
          handled.push({
            first: event.payload.firstOffset,
            last: event.payload.lastOffset,
            size: event.payload.batchSize,
            seeksBefore: seeks.length
          })
          if (armed) {
            // The filtered batch came first in its fetch: handled at once, this attempt shows nothing.
            armed = false
            Deferred.unsafeDone(attempt, Effect.succeed(false))
          }
        })
        consumer.run = (config?: ConsumerRunConfig) =>
          run({
            ...config,
            eachBatch: async (payload: EachBatchPayload) => {
              if (armed && payload.batch.partition === 0) {
                // Partition 0's batch of the fetch that also fetched partition 1's filtered batch: the worker waits here.
                armed = false
                Deferred.unsafeDone(attempt, Effect.succeed(true))
                await handedOn
              }
              await config?.eachBatch?.(payload)
            }
          })
        consumer.seek = (topicPartitionOffset) => {
          seek(topicPartitionOffset)
          if (topicPartitionOffset.partition !== 1) return
          seeks.push(topicPartitionOffset.offset)
          if (topicPartitionOffset.offset === "11") seekedForTail = true
        }
        return consumer
      })
      const reader = yield* ChangelogReader.make(kafka, { topic, groupId: Helpers.unique("stale-filtered-reader") })

      // Partition 0's read runs throughout; once its first batch is in, partition 1's tail reads begin.
      const firstApplied = yield* Deferred.make<void>()
      const read0 = yield* Effect.fork(reader.read(permit0, 0, { from: 0, until: large }, () => Deferred.succeed(firstApplied, undefined)))
      yield* Deferred.await(firstApplied)
      let attempts = 0
      for (;;) {
        attempts++
        const tailRead = yield* Effect.fork(reader.read(permit1, 1, { from: 11, until: 22 }, () => Effect.void))
        const held = yield* Deferred.await(attempt).pipe(
          Effect.timeoutFail({ duration: Duration.seconds(60), onTimeout: () => new Error(`attempt ${attempts}: no fetch of partition 1`) })
        )
        if (held) {
          yield* Fiber.interrupt(tailRead)
          break
        }
        // Handled at once: the tail read ends there (every record of it filtered).
        yield* Fiber.join(tailRead)
        if (attempts >= 8) return assert.fail(`no fetch of ${attempts} put partition 0's batch before partition 1's`)
        attempt = yield* Deferred.make<boolean>()
      }
      const seeksBeforeFull = seeks.length
      const applied: Array<number> = []
      const fullRead = yield* Effect.fork(reader.read(permit1, 1, { from: 0, until: 22 }, (records) =>
        Effect.sync(() => {
          applied.push(...records.map((r) => r.offset))
        })))
      yield* Helpers.eventually(Effect.sync(() => seeks.length > seeksBeforeFull), { what: "the full read's seek" })
      handOn()
      const restored = yield* Fiber.join(fullRead).pipe(
        Effect.timeoutFail({ duration: Duration.seconds(60), onTimeout: () => new Error("the full read did not end") })
      )
      yield* Fiber.interrupt(read0)
      console.log(
        `attempts ${attempts}; seeks of partition 1 ${JSON.stringify(seeks)}; its batches ${JSON.stringify(handled)}; ` +
          `the full read applied ${JSON.stringify(applied)}`
      )
      // The scenario happened: the aborted transaction's batch, fetched for the tail read, was handled after the full read's seek.
      const stale = handled.find((b) => b.seeksBefore > seeksBeforeFull)
      assert.deepStrictEqual(
        stale === undefined ? undefined : { first: stale.first, size: stale.size },
        { first: "11", size: 0 },
        `partition 1's first batch after the full read's seek is the tail read's filtered one: ${JSON.stringify(handled)}`
      )
      assert.deepStrictEqual(
        { restored, offsets: applied },
        { restored: 10, offsets: Array.from({ length: 10 }, (_, i) => i) },
        "the full read applies every committed record of its range once, in order"
      )
    }), { timeout: 180_000 })
})
