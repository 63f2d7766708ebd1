/**
 * The fetch bridge (`src/internal/kafka/consumer.ts`) and kafkajs agree on whether a rejoin is
 * due. When the bridge tells the runner a rebalance began (its tasks are torn down), kafkajs must
 * rejoin the group, or the member keeps its partitions with no task to process them.
 *
 * The chaos acceptance run found that member (test/chaos/FINDINGS.md #8): a heartbeat sent from
 * `eachBatch` was answered NOT_COORDINATOR (the group's coordinator had moved off a broker being
 * killed), the bridge signalled `Rebalancing` and the runner tore its tasks down; but the broker
 * kill also changed kafkajs's node list, so its fetch manager restarted its fetchers on their
 * `KafkaJSFetcherRebalanceError` and dropped the error `eachBatch` threw (`Promise.all` keeps the
 * first rejection). kafkajs never rejoined; its next heartbeat found the new coordinator (Skein's
 * patch) and the group stayed stable, its partitions assigned to members that no longer ran them.
 *
 * kafkajs here is a real consumer object whose group calls the test makes by hand: the joins
 * (`GROUP_JOIN`), a batch through `eachBatch`, and the check its patched runner makes before each
 * fetch (`rejoinRequested`). An error `eachBatch` throws is dropped, as the fetch manager does.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Queue } from "effect"
import kafkajs from "kafkajs"
import { createRequire } from "node:module"
import type { EachBatchPayload, KafkaMessage } from "kafkajs"
import * as Consumer from "../../src/internal/kafka/consumer.ts"
import { silentLogger } from "../helpers/kafkajsCopies.ts"

type Listener = (event: { readonly payload: unknown }) => void

/** The properties Skein's patch of kafkajs's runner reads from the eachBatch handler. */
interface PatchedHandler {
  (payload: EachBatchPayload): Promise<void>
  readonly rejoinRequested?: () => unknown
  readonly beforeRejoin?: () => Promise<void>
}

/** A kafkajs consumer that connects nowhere: the test emits its events and calls its handler. */
const fakeKafka = () => {
  const kafka = new kafkajs.Kafka({ brokers: ["127.0.0.1:1"], logLevel: kafkajs.logLevel.NOTHING })
  const listeners = new Map<string, Listener>()
  let handler: PatchedHandler | undefined
  const consumer = Object.assign(kafka.consumer({ groupId: "g" }), {
    on: (eventName: string, listener: Listener) => {
      listeners.set(eventName, listener)
      return () => listeners.delete(eventName)
    },
    connect: async () => {},
    disconnect: async () => {},
    subscribe: async () => {},
    run: async (config: { readonly eachBatch: PatchedHandler }) => {
      handler = config.eachBatch
    },
    pause: () => {},
    resume: () => {}
  })
  Object.assign(kafka, { consumer: () => consumer })
  const emit = (eventName: string, payload: unknown) => listeners.get(eventName)?.({ payload })
  return {
    kafka,
    /** A join completed: kafkajs emits GROUP_JOIN with this member's assignment. */
    join: (partitions: ReadonlyArray<number>) =>
      emit(consumer.events.GROUP_JOIN, { memberAssignment: { in: [...partitions] } }),
    rebalancing: () => emit(consumer.events.REBALANCING, {}),
    handler: () => {
      if (handler === undefined) throw new Error("consumer.run was not called")
      return handler
    }
  }
}

const message = (offset: number): KafkaMessage => ({
  key: Buffer.from("k"),
  value: Buffer.from("v"),
  timestamp: "0",
  attributes: 0,
  offset: String(offset),
  headers: {}
})

/** A batch of partition 0 of `in` whose heartbeat is answered NOT_COORDINATOR (the coordinator moved). */
const batchWithMovedCoordinator = (): EachBatchPayload => {
  const messages = [message(0)]
  return {
    batch: {
      topic: "in",
      partition: 0,
      highWatermark: "1",
      messages,
      isEmpty: () => false,
      firstOffset: () => "0",
      lastOffset: () => "0",
      offsetLag: () => "0",
      offsetLagLow: () => "0"
    },
    resolveOffset: () => {},
    heartbeat: () =>
      Promise.reject(
        new kafkajs.KafkaJSProtocolError(
          Object.assign(new Error("This is not the correct coordinator for this group"), {
            type: "NOT_COORDINATOR_FOR_GROUP",
            code: 16,
            retriable: true
          })
        )
      ),
    pause: () => () => {},
    commitOffsetsIfNecessary: async () => {},
    uncommittedOffsets: () => ({ topics: [] }),
    isRunning: () => true,
    isStale: () => false
  }
}

const options: Consumer.Options = {
  groupId: "g",
  awaitRevocation: true,
  topics: ["in"],
  sessionTimeout: Duration.seconds(30),
  rebalanceTimeout: Duration.seconds(30),
  heartbeatInterval: Duration.millis(5)
}

/** The next event that is not a batch. */
const nextGroupEvent = (events: Queue.Dequeue<Consumer.ConsumerEvent>) =>
  Effect.repeat(Queue.take(events), { until: (event) => event._tag !== "Batch" })

/** The bridge over a fake kafkajs consumer, joined with partition 0 (its `Assigned` event taken). */
const joined = Effect.gen(function*() {
  const fake = fakeKafka()
  const consumer = yield* Consumer.make(fake.kafka, options)
  fake.join([0])
  assert.strictEqual((yield* Queue.take(consumer.events))._tag, "Assigned")
  return { consumer, fake }
})

describe("consumer rejoin", () => {
  it.scoped("a rebalance the bridge signalled from a heartbeat makes kafkajs rejoin, even when kafkajs drops the error", () =>
    Effect.gen(function*() {
      const { consumer, fake } = yield* joined

      // The batch's heartbeat fails: the bridge signals a rebalance, the runner tears its tasks down.
      const batchDone = fake.handler()(batchWithMovedCoordinator()).then(() => undefined, (error: unknown) => error)
      const delivered = yield* Queue.take(consumer.events)
      assert.strictEqual(delivered._tag, "Batch")
      assert.strictEqual((yield* nextGroupEvent(consumer.events))._tag, "Rebalancing")
      yield* consumer.revoked
      if (delivered._tag === "Batch") delivered.batch.complete("Dropped")
      // eachBatch throws the heartbeat's error; kafkajs's fetch manager drops it here.
      const thrown = yield* Effect.promise(() => batchDone)
      assert.include(String(thrown), "not the correct coordinator")

      // kafkajs's next fetch: the bridge asks for the rejoin its runner's tasks were torn down for.
      const rejoin = fake.handler().rejoinRequested?.()
      assert.instanceOf(
        rejoin,
        kafkajs.KafkaJSProtocolError,
        "after the bridge signalled Rebalancing, kafkajs's next fetch must rejoin the group"
      )
      fake.rebalancing()
      yield* Effect.promise(() => fake.handler().beforeRejoin?.() ?? Promise.resolve())
      fake.join([0])
      // One rebalance, one revocation: kafkajs's own REBALANCING event is not a second one.
      const assigned = yield* nextGroupEvent(consumer.events)
      assert.strictEqual(assigned._tag, "Assigned")
      assert.isUndefined(fake.handler().rejoinRequested?.(), "the join answered the request")
    }))

  it.scoped("a requested rejoin stays requested until a join, whatever kafkajs does with the first error", () =>
    Effect.gen(function*() {
      const { consumer, fake } = yield* joined

      yield* consumer.requestRejoin
      assert.instanceOf(fake.handler().rejoinRequested?.(), kafkajs.KafkaJSProtocolError)
      // The fetch that threw it was restarted (a broker joined or left): the next one throws again.
      assert.instanceOf(
        fake.handler().rejoinRequested?.(),
        kafkajs.KafkaJSProtocolError,
        "a rejoin request dropped by kafkajs's fetch manager must be made again at the next fetch"
      )
      fake.join([0])
      assert.isUndefined(fake.handler().rejoinRequested?.(), "the join answered the request")
    }))
})

/** kafkajs's fetch manager (not changed by Skein's patch): one fetcher per broker, restarted when the brokers change. */
interface FetchManager {
  readonly start: () => Promise<void>
  readonly stop: () => Promise<void>
}
type CreateFetchManager = (options: {
  readonly logger: unknown
  readonly getNodeIds: () => ReadonlyArray<number>
  readonly fetch: (nodeId: number) => Promise<ReadonlyArray<string>>
  readonly handler: (batch: string) => Promise<void>
  readonly concurrency: number
}) => FetchManager

describe("kafkajs's fetch manager", () => {
  it.live("drops a batch handler's error when a fetcher of another broker sees the brokers change first", () =>
    Effect.promise(async () => {
      const createFetchManager = createRequire(import.meta.url)("kafkajs/src/consumer/fetchManager.js") as CreateFetchManager
      const noLogger = silentLogger()
      let nodes: ReadonlyArray<number> = [1, 2]
      let handled = 0
      let rounds = 0
      const later = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
      const manager: FetchManager = createFetchManager({
        logger: noLogger,
        getNodeIds: () => nodes,
        concurrency: 2,
        fetch: async (nodeId) => {
          rounds++
          if (rounds > 4) {
            // The fetchers were restarted: end the test's manager.
            void manager.stop()
            return []
          }
          if (nodeId === 1) return rounds <= 2 ? ["batch of node 1"] : []
          // Broker 2 leaves the cluster while node 1's batch is in its handler.
          nodes = [1]
          await later(5)
          return []
        },
        handler: async () => {
          handled++
          await later(50)
          throw new Error("This is not the correct coordinator for this group")
        }
      })
      // The handler's NOT_COORDINATOR never reaches kafkajs's runner (which would rejoin on it).
      const outcome = await manager.start().then(() => "resolved", (error: unknown) => `rejected: ${String(error)}`)
      assert.strictEqual(handled, 1)
      assert.strictEqual(outcome, "resolved")
    }))
})
