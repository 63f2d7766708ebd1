/**
 * kafkajs 2.2.4: a seek made while a fetch resolves its offsets costs a whole fetch.
 *
 * `ConsumerGroup#fetch` applies the pending seeks, then resolves the partitions' offsets (the
 * first fetch after a join looks them up at the broker: OffsetFetch, ListOffsets), then builds
 * the request from the partitions not paused. A partition resumed and seeked during those
 * lookups is in the request from the offset it had, and its data is dropped when the response
 * arrives, because a seek is pending for it. Skein's changelog reader does exactly this: the
 * restores of the tasks of an assignment start right after the reader's join, each seeking and
 * resuming its partition, and a profile of a restore showed the first fetch's data for five of six
 * partitions decoded and dropped, and fetched again (the changelog fetched and decoded 1.8 times).
 *
 * The patch (`consumer/consumerGroup.js`) applies the seeks again until none is pending, right
 * before it builds the request: a seek made before the request is built is in the request.
 *
 * The test provokes the race on purpose: every partition paused at the join, then seeked and
 * resumed one macrotask after the first fetch starts, so during its offset lookups (network
 * round trips). kafkajs as published needs a second fetch for the data; the patched kafkajs
 * delivers it from the first.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as KafkaJS from "kafkajs"
import { copyKafkajs, runUntilRead } from "./helpers/kafkajsCopies.ts"
import type { Side } from "./helpers/kafkajsCopies.ts"
import * as Helpers from "./helpers/kafka.ts"
import { brokers } from "./utils/broker.ts"

const partitions = [0, 1, 2]

/** The fetches a consumer of `side` starts until it has every record of `topic`, seeked to 0 during its first fetch. */
const fetchesUntilRead = (side: Side, topic: string, records: number) =>
  Effect.acquireUseRelease(
    Effect.sync(() => copyKafkajs(side)),
    (copy) =>
      Effect.promise(async () => {
        const { Kafka, logLevel } = copy.load("index.js") as typeof KafkaJS
        const kafka = new Kafka({ clientId: `seek-race-${side}`, brokers: [...brokers()], logLevel: logLevel.NOTHING })
        const consumer = kafka.consumer({ groupId: Helpers.unique(`seek-race-${side}`), maxWaitTimeInMs: 200 })
        let fetches = 0
        consumer.on(consumer.events.GROUP_JOIN, () => consumer.pause([{ topic, partitions }]))
        consumer.on(consumer.events.FETCH_START, () => {
          fetches++
          if (fetches !== 1) return
          // One macrotask later: the fetch is waiting for its offset lookups.
          setImmediate(() => {
            for (const partition of partitions) consumer.seek({ topic, partition, offset: "0" })
            consumer.resume([{ topic, partitions }])
          })
        })
        return runUntilRead(consumer, topic, records, async (allRead) => {
          await allRead
          return fetches
        })
      }),
    (copy) => Effect.sync(() => copy.remove())
  )

describe("kafkajs seek during a fetch", () => {
  it.scopedLive("a partition seeked while the fetch resolves its offsets is fetched from the seek, once", () =>
    Effect.gen(function*() {
      const topic = Helpers.unique("seek-race")
      yield* Helpers.createTopics([{ name: topic, partitions: partitions.length }])
      const records = partitions.flatMap((partition) =>
        Array.from({ length: 50 }, (_, i) => ({ key: `k${i}`, value: `${partition}:${i}`, partition }))
      )
      yield* Helpers.produce(topic, records)
      const published = yield* fetchesUntilRead("original", topic, records.length)
      const patched = yield* fetchesUntilRead("patched", topic, records.length)
      // The race is provoked: as published, the first fetch's data is dropped and fetched again.
      assert.isAtLeast(published, 2, "kafkajs as published: the data of the first fetch was not dropped (the race did not happen)")
      assert.strictEqual(patched, 1, "patched: the seeked partitions' data came with the first fetch")
    }), { timeout: 60_000 })
})
