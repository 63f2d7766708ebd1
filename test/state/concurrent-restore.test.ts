import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import * as ChangelogReader from "../../src/internal/kafka/changelogReader.ts"
import * as Client from "../../src/internal/kafka/client.ts"
import * as Producer from "../../src/internal/kafka/producer.ts"
import * as Helpers from "../helpers/kafka.ts"
import { brokers } from "../utils/broker.ts"

describe("changelog reader", () => {
  it.scopedLive("restores several partitions at once, each getting exactly its own records in order", () =>
    Effect.gen(function*() {
      const topic = Helpers.unique("concurrent-restore")
      const partitions = [0, 1, 2]
      yield* Helpers.createTopics([{ name: topic, partitions: partitions.length }])
      const kafka = yield* Client.makeKafka({ clientId: "concurrent-restore", brokers: brokers() })
      // One fenced producer per partition, as each task has: the reader's permits.
      const producers = yield* Effect.forEach(partitions, (partition) =>
        Effect.flatMap(
          Producer.make(kafka, {
            partition,
            transactionalId: Helpers.unique(`concurrent-restore-${partition}`),
            transactionTimeout: Duration.seconds(30),
            maxMessageBytes: 1_048_576
          }),
          (transactional) => transactional.fence
        ))
      // Three transactions per partition, of different sizes: each partition's range has commit markers in it.
      const sizes = [3_000, 4_500, 6_000]
      for (const producer of producers) {
        const partition = producer.partition
        for (let t = 0; t < 3; t++) {
          const records = Array.from({ length: sizes[partition]! / 3 }, (_, i) => ({
            topic,
            key: `p${partition}-t${t}-k${i}`,
            value: `${partition}:${t}:${i}`,
            partition
          }))
          yield* producer.commit(records, { groupId: Helpers.unique("concurrent-restore-group"), offsets: [] })
        }
      }
      const reader = yield* ChangelogReader.make(kafka, { topic, groupId: Helpers.unique("concurrent-restore-reader") })
      const ends = yield* Effect.promise(async () => {
        const admin = Helpers.kafka().admin()
        await admin.connect()
        try {
          return await admin.fetchTopicOffsets(topic)
        } finally {
          await admin.disconnect()
        }
      })

      const read = (producer: Producer.FencedProducer) =>
        Effect.gen(function*() {
          const partition = producer.partition
          const until = Number(ends.find((o) => o.partition === partition)!.high)
          const got: Array<ChangelogReader.ChangelogRecord> = []
          const count = yield* reader.read(producer, partition, { from: 0, until }, (records) =>
            Effect.sync(() => {
              got.push(...records)
            }))
          return { partition, count, got }
        })
      const results = yield* Effect.forEach(producers, read, { concurrency: "unbounded" })

      for (const { count, got, partition } of results) {
        assert.strictEqual(count, sizes[partition], `partition ${partition}: records restored`)
        assert.strictEqual(got.length, sizes[partition])
        assert.isTrue(got.every((r) => r.key?.toString("utf8").startsWith(`p${partition}-`)), `partition ${partition}: only its own records`)
        const offsets = got.map((r) => r.offset)
        assert.deepStrictEqual(offsets, [...offsets].sort((a, b) => a - b), `partition ${partition}: in offset order`)
        const values = got.map((r) => r.value?.toString("utf8"))
        const expected = [0, 1, 2].flatMap((t) => Array.from({ length: sizes[partition]! / 3 }, (_, i) => `${partition}:${t}:${i}`))
        assert.deepStrictEqual(values, expected, `partition ${partition}: every record once`)
      }
      // A partition read again afterwards (a task restarting) still gets every record.
      const again = yield* read(producers[1]!)
      assert.strictEqual(again.count, sizes[1])
    }), { timeout: 120_000 })
})
