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
 * The test watches the idle sleep's own timer (the only timer armed with `idleSleepMs`): every
 * partition is paused at the join, and the partition is resumed right after the sleep's timer is
 * armed. The property is an order of events, whatever the machine's speed: kafkajs as published
 * delivers the records only after that timer has fired (the sleep ran out); the patched kafkajs
 * delivers them while it is still pending (it is cleared by the resume and never fires).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as KafkaJS from "kafkajs"
import { copyKafkajs, runUntilRead } from "./helpers/kafkajsCopies.ts"
import type { Side } from "./helpers/kafkajsCopies.ts"
import * as Helpers from "./helpers/kafka.ts"
import { brokers } from "./utils/broker.ts"

/** The idle sleep of the consumers under test: a value no other timer of the process uses. */
const idleSleepMs = 4_919

/** What happened around the first idle sleep, in order. */
type Event = "sleep armed" | "sleep ran out" | "all read"

/**
 * Calls `armed` when a timer of `delay` ms is armed, the first time only, and `ranOut` when that
 * timer fires. Restores `setTimeout` when the scope closes.
 */
const watchFirstTimer = (delay: number, armed: () => void, ranOut: () => void) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const original = globalThis.setTimeout
      let seen = false
      const watched = <TArgs extends Array<unknown>>(callback: (...args: TArgs) => void, ms?: number, ...args: TArgs) => {
        if (seen || ms !== delay) return original(callback, ms, ...args)
        seen = true
        const timer = original((...callbackArgs: TArgs) => {
          ranOut()
          callback(...callbackArgs)
        }, ms, ...args)
        armed()
        return timer
      }
      globalThis.setTimeout = Object.assign(watched, { __promisify__: original.__promisify__ })
      return original
    }),
    (original) => Effect.sync(() => {
      globalThis.setTimeout = original
    })
  )

/**
 * The events of a consumer of `side`, idle with its partition paused, resuming it as soon as its
 * idle sleep is armed, until it has read the topic's records.
 */
const eventsAfterResume = (side: Side, topic: string, records: number) =>
  Effect.gen(function*() {
    const events: Array<Event> = []
    const startedAt = performance.now()
    const log = (event: Event) => {
      events.push(event)
      process.stderr.write(`idle-resume ${side}: ${event} at ${Math.round(performance.now() - startedAt)} ms\n`)
    }
    let resume = (): void => {}
    yield* watchFirstTimer(idleSleepMs, () => {
      log("sleep armed")
      // After the sleep's promise executor has returned (the patch registers its wake-up there).
      setImmediate(() => resume())
    }, () => log("sleep ran out"))
    const copy = yield* Effect.acquireRelease(
      Effect.sync(() => copyKafkajs(side)),
      (copy) => Effect.sync(() => copy.remove())
    )
    yield* Effect.promise(async () => {
      const { Kafka, logLevel } = copy.load("index.js") as typeof KafkaJS
      const kafka = new Kafka({ clientId: `idle-resume-${side}`, brokers: [...brokers()], logLevel: logLevel.NOTHING })
      const consumer = kafka.consumer({ groupId: Helpers.unique(`idle-resume-${side}`), maxWaitTimeInMs: idleSleepMs })
      resume = () => consumer.resume([{ topic, partitions: [0] }])
      consumer.on(consumer.events.GROUP_JOIN, () => consumer.pause([{ topic, partitions: [0] }]))
      return runUntilRead(consumer, topic, records, async (allRead) => {
        await allRead
        log("all read")
      })
    })
    return events
  }).pipe(Effect.scoped)

describe("kafkajs resume during an idle fetch", () => {
  it.scopedLive("a partition resumed while every partition was paused is fetched at once, not after the idle sleep", () =>
    Effect.gen(function*() {
      const topic = Helpers.unique("idle-resume")
      yield* Helpers.createTopics([{ name: topic, partitions: 1 }])
      const records = Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: `v${i}`, partition: 0 }))
      yield* Helpers.produce(topic, records)
      const published = yield* eventsAfterResume("original", topic, records.length)
      const patched = yield* eventsAfterResume("patched", topic, records.length)
      // The case is provoked: as published, the resumed partition waits out the idle sleep.
      assert.deepStrictEqual(published, ["sleep armed", "sleep ran out", "all read"], "kafkajs as published")
      assert.deepStrictEqual(patched, ["sleep armed", "all read"], "patched: the records came only when the idle sleep ran out")
    }), { timeout: 90_000 })
})
