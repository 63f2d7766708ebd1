import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schedule } from "effect"
import kafkajs from "kafkajs"
import type { Admin, Kafka } from "kafkajs"
import * as ChildProcess from "node:child_process"
import { randomUUID } from "node:crypto"
import * as LocalKafka from "../src/testing/LocalKafka.ts"

const client = (brokers: ReadonlyArray<string>): Kafka =>
  new kafkajs.Kafka({
    clientId: "skein-broker-cluster-test",
    brokers: [...brokers],
    logLevel: kafkajs.logLevel.NOTHING,
    retry: { retries: 30, initialRetryTime: 200, maxRetryTime: 1_000 }
  })

const produce = (kafka: Kafka, topic: string, values: ReadonlyArray<string>) =>
  Effect.acquireUseRelease(
    // kafkajs sends an idempotent producer's InitProducerId to one broker and does not retry a
    // refused connection: retry the connect until the dead node is fenced and out of the metadata.
    Effect.suspend(() => {
      const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
      return Effect.tryPromise(() => producer.connect()).pipe(
        Effect.tapError(() => Effect.promise(() => producer.disconnect())),
        Effect.as(producer)
      )
    }).pipe(Effect.retry({ schedule: Schedule.spaced("500 millis"), times: 60 })),
    (producer) =>
      Effect.tryPromise(() =>
        producer.send({ topic, acks: -1, messages: values.map((value) => ({ key: value, value })) })
      ),
    (producer) => Effect.promise(() => producer.disconnect())
  )

const consumeAll = (kafka: Kafka, topic: string, count: number) =>
  Effect.acquireUseRelease(
    Effect.tryPromise(async () => {
      const consumer = kafka.consumer({ groupId: `g-${randomUUID()}` })
      await consumer.connect()
      await consumer.subscribe({ topic, fromBeginning: true })
      return consumer
    }),
    (consumer) =>
      Effect.async<ReadonlyArray<string>>((resume) => {
        const seen: Array<string> = []
        void consumer.run({
          eachMessage: async ({ message }) => {
            seen.push(message.value?.toString() ?? "")
            if (seen.length === count) resume(Effect.succeed(seen))
          }
        })
      }),
    (consumer) => Effect.promise(() => consumer.disconnect())
  )

/** Phase timings on stderr, to see where a slow or failed run spent its time. */
const phase = (name: string) => Effect.sync(() => process.stderr.write(`[broker-cluster] ${new Date().toISOString()} ${name}\n`))

const withAdmin = <A>(kafka: Kafka, f: (admin: Admin) => Promise<A>) =>
  Effect.acquireUseRelease(
    Effect.tryPromise(async () => {
      const admin = kafka.admin()
      await admin.connect()
      return admin
    }),
    (admin) => Effect.tryPromise(() => f(admin)),
    (admin) => Effect.promise(() => admin.disconnect())
  )

const alive = (pid: number) =>
  ChildProcess.execFileSync("ps", ["-eo", "pid="], { encoding: "utf8" })
    .split("\n")
    .some((line) => Number(line.trim()) === pid)

describe("LocalKafka cluster", () => {
  it.scopedLive("3 nodes: acks=all survives a killed node, which restarts and rejoins", () =>
    Effect.gen(function*() {
      yield* phase("starting 3 nodes")
      const cluster = yield* LocalKafka.start({ nodes: 3 })
      assert.strictEqual(cluster.brokers.length, 3)
      const kafka = client(cluster.brokers)
      const topic = `cluster-${randomUUID().slice(0, 8)}`
      yield* phase("creating the topic")
      yield* withAdmin(kafka, (admin) =>
        admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 3, replicationFactor: 3 }] })
      ).pipe(Effect.retry({ times: 5 }))
      yield* phase("producing")
      const before = Array.from({ length: 30 }, (_, i) => `before-${i}`)
      yield* produce(kafka, topic, before)

      const victim = 2
      const victimPid = Option.getOrThrow(yield* cluster.pid(victim))
      yield* phase("killing node 3")
      yield* cluster.killNode(victim)
      assert.isFalse(alive(victimPid), "the killed node's process is gone")
      assert.isTrue(Option.isNone(yield* cluster.pid(victim)))

      // Two of three replicas are left: min.insync.replicas=2 still accepts acks=all.
      // Clients seeded with the live nodes only (kafkajs would also retry past a dead seed, slowly).
      const survivors = client(cluster.brokers.slice(0, victim))
      const after = Array.from({ length: 30 }, (_, i) => `after-${i}`)
      yield* phase("producing with a node down")
      yield* produce(survivors, topic, after)
      yield* phase("consuming")
      const consumed = yield* consumeAll(survivors, topic, 60)
      assert.sameMembers([...consumed], [...before, ...after])

      yield* phase("restarting node 3")
      yield* cluster.restartNode(victim)
      assert.isTrue(Option.isSome(yield* cluster.pid(victim)))
      const described = yield* withAdmin(kafka, (admin) => admin.describeCluster())
      assert.sameMembers(described.brokers.map((b) => b.nodeId), [1, 2, 3])

      yield* phase("stopping")
      const pids = (yield* Effect.forEach(cluster.nodes, (node) => cluster.pid(node.index))).map(Option.getOrThrow)
      yield* cluster.stop
      for (const pid of pids) assert.isFalse(alive(pid), `node pid ${pid} has exited`)
      yield* phase("done")
    }), 300_000)
})
