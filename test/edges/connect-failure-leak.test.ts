import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit } from "effect"
import type { Scope } from "effect"
import * as Fs from "node:fs"
import * as Admin from "../../src/internal/kafka/admin.ts"
import * as ChangelogReader from "../../src/internal/kafka/changelogReader.ts"
import * as Client from "../../src/internal/kafka/client.ts"
import * as Producer from "../../src/internal/kafka/producer.ts"
import { brokers, createTopics, eventually, unique } from "../helpers/kafka.ts"

/** Open sockets of this process. */
const sockets = (): number =>
  Fs.readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return Fs.readlinkSync(`/proc/self/fd/${fd}`).startsWith("socket:")
    } catch {
      return false
    }
  }).length

type Connectable = { connect: () => Promise<void> }

const isConnectable = (value: unknown): value is Connectable =>
  typeof value === "object" && value !== null && "connect" in value && typeof value.connect === "function"

/**
 * A client whose producers, admins and consumers connect to the broker, then fail their
 * `connect` (as kafkajs's does when the producer's InitProducerId fails after its cluster
 * connected). `connected` counts the connections made.
 */
const failingAfterConnect = Effect.gen(function*() {
  const kafka = yield* Client.makeKafka({ clientId: unique("connect-leak"), brokers: brokers() })
  const state = { connected: 0 }
  const wrap = <C extends Connectable>(client: C): C => {
    const connect = client.connect.bind(client)
    client.connect = async () => {
      await connect()
      state.connected++
      throw new Error("injected: connect failed after the cluster connected")
    }
    return client
  }
  for (const method of ["producer", "admin", "consumer"] as const) {
    const make: unknown = Reflect.get(kafka, method)
    if (typeof make !== "function") throw new Error(`kafkajs's Kafka has no ${method}()`)
    Reflect.set(kafka, method, (...args: ReadonlyArray<unknown>) => {
      const client: unknown = Reflect.apply(make, kafka, args)
      if (!isConnectable(client)) throw new Error(`kafka.${method}() made no client`)
      return wrap(client)
    })
  }
  return { kafka, state }
})

// Issue 29, defect 13 (part): a client whose connect failed after its cluster connected kept its
// cluster and sockets: the failed acquire registered no release, and nothing disconnected it.
describe("a client whose connect fails after the cluster connected", () => {
  const cases: ReadonlyArray<readonly [string, (kafka: Client.Kafka) => Effect.Effect<unknown, unknown, Scope.Scope>]> = [
    ["a transactional producer", (kafka: Client.Kafka) =>
      Producer.make(kafka, {
        partition: 0,
        transactionalId: unique("connect-leak-txn"),
        transactionTimeout: Duration.seconds(30),
        maxMessageBytes: 1_048_576
      })],
    ["an at-least-once producer", (kafka: Client.Kafka) =>
      Producer.atLeastOnce(kafka, { partition: 0, maxMessageBytes: 1_048_576 })],
    ["the admin", (kafka: Client.Kafka) => Admin.make(kafka)],
    ["a changelog reader", (kafka: Client.Kafka) =>
      Effect.flatMap(
        Effect.promise(() => Promise.resolve(unique("connect-leak-changelog"))),
        (topic) =>
          Effect.zipRight(
            createTopics([{ name: topic, partitions: 1 }]),
            ChangelogReader.make(kafka, { topic, groupId: unique("connect-leak-reader") })
          )
      )]
  ]
  for (const [what, make] of cases) {
    it.live(`${what} is disconnected: no socket stays open`, () =>
      Effect.gen(function*() {
        const { kafka, state } = yield* failingAfterConnect
        const baseline = sockets()
        const made = yield* Effect.exit(Effect.scoped(make(kafka)))
        assert.isTrue(Exit.isFailure(made), "the connect failed")
        assert.isAtLeast(state.connected, 1, "the cluster connected before the failure")
        // Sockets close a moment after their disconnect; a leaked one never does.
        const closed = yield* Effect.exit(eventually(Effect.sync(() => sockets() <= baseline), {
          what: "the sockets to close",
          timeout: 10_000
        }))
        const open = sockets()
        console.log(`${what}: ${open} sockets open after the failed connect (baseline ${baseline})`)
        assert.isTrue(Exit.isSuccess(closed), `${open - baseline} sockets still open 10 s after the failed connect`)
      }), 60_000)
  }
})
