/**
 * kafkajs 2.2.4: a partition resumed on an idle consumer waits out the idle sleep.
 *
 * `ConsumerGroup#fetch` with no partition to fetch (every assigned partition paused) sleeps
 * `maxWaitTimeInMs` and returns nothing; a partition resumed during that sleep is fetched only
 * after it. Skein's changelog reader is such a consumer between restores: every partition
 * paused until a task's restore resumes its own. In the benchmark's restore (a process killed,
 * restarted on the same group) the reader joined at startup and idled ~3 s while the group
 * waited out the killed member; the six restores then resumed their partitions in the middle of
 * an idle sleep, and a profile showed the main thread idle ~150 ms before the first fetch (the
 * reader sleeps 200 ms). Skein's input consumer pauses and resumes partitions the same way.
 *
 * The patch (`consumer/consumerGroup.js`) ends an idle sleep when partitions are resumed: the
 * fetch loop goes round at once and fetches them.
 *
 * The test makes the sleep long (8 s) so the two behaviours are apart by seconds: every
 * partition paused at the join, resumed 1 s into the first idle sleep; kafkajs as published
 * delivers the records ~7 s later, when its sleep ends, the patched kafkajs at once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as KafkaJS from "kafkajs"
import { copyKafkajs, runUntilRead } from "./helpers/kafkajsCopies.ts"
import type { Side } from "./helpers/kafkajsCopies.ts"
import * as Helpers from "./helpers/kafka.ts"
import { brokers } from "./utils/broker.ts"

/** The idle sleep of the consumers under test. */
const idleSleepMs = 8_000
/** How long after the resume the records must have arrived: well inside the sleep's remaining ~7 s. */
const deliveredWithinMs = 3_000

/**
 * Whether a consumer of `side`, idle with its partition paused, delivers the topic's records
 * within `deliveredWithinMs` of resuming it, 1 s into its idle sleep.
 */
const deliversAfterResume = (side: Side, topic: string, records: number) =>
  Effect.acquireUseRelease(
    Effect.sync(() => copyKafkajs(side)),
    (copy) =>
      Effect.promise(async () => {
        const { Kafka, logLevel } = copy.load("index.js") as typeof KafkaJS
        const kafka = new Kafka({ clientId: `idle-resume-${side}`, brokers: [...brokers()], logLevel: logLevel.NOTHING })
        const consumer = kafka.consumer({ groupId: Helpers.unique(`idle-resume-${side}`), maxWaitTimeInMs: idleSleepMs })
        let resumed = (): void => {}
        const resumedAt = new Promise<void>((resolve) => {
          resumed = resolve
        })
        let fetchStarts = 0
        consumer.on(consumer.events.GROUP_JOIN, () => consumer.pause([{ topic, partitions: [0] }]))
        consumer.on(consumer.events.FETCH_START, () => {
          fetchStarts++
          if (fetchStarts !== 1) return
          // Every partition is paused: this fetch sleeps. Resume 1 s into the sleep.
          setTimeout(() => {
            consumer.resume([{ topic, partitions: [0] }])
            resumed()
          }, 1_000)
        })
        return runUntilRead(consumer, topic, records, async (allRead) => {
          await resumedAt
          let timer: ReturnType<typeof setTimeout> | undefined
          const outcome = await Promise.race([
            allRead.then(() => "delivered" as const),
            new Promise<"not yet">((resolve) => {
              timer = setTimeout(() => resolve("not yet"), deliveredWithinMs)
            })
          ])
          clearTimeout(timer)
          return outcome === "delivered"
        })
      }),
    (copy) => Effect.sync(() => copy.remove())
  )

describe("kafkajs resume during an idle fetch", () => {
  it.scopedLive("a partition resumed while every partition was paused is fetched at once, not after the idle sleep", () =>
    Effect.gen(function*() {
      const topic = Helpers.unique("idle-resume")
      yield* Helpers.createTopics([{ name: topic, partitions: 1 }])
      const records = Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: `v${i}`, partition: 0 }))
      yield* Helpers.produce(topic, records)
      const published = yield* deliversAfterResume("original", topic, records.length)
      const patched = yield* deliversAfterResume("patched", topic, records.length)
      // The case is provoked: as published, the resumed partition waits out the idle sleep.
      assert.isFalse(published, "kafkajs as published: the records came before the idle sleep ended (the resume did not land in it)")
      assert.isTrue(patched, `patched: the records did not come within ${deliveredWithinMs} ms of the resume`)
    }), { timeout: 90_000 })
})
