import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import kafkajs from "kafkajs"
import type { DescribeConfigResponse } from "kafkajs"
import { makeFrom } from "../../src/internal/kafka/admin.ts"
import * as PatchedKafkajs from "../../src/internal/kafka/patchedKafkajs.ts"

// The enrichment chaos runs (test/chaos/README.md) saw instances exit at startup: kafkajs's
// describeConfigs bails at once on a connection error to the broker it picked (a broker just
// killed), and Skein's `retentionMs` / `outputTopicConfig` did not retry it as its other admin
// calls do.
const refused = () =>
  new kafkajs.KafkaJSConnectionError("Connection error: connect ECONNREFUSED 127.0.0.1:44693", {
    broker: "127.0.0.1:44693",
    code: "ECONNREFUSED"
  })

const configResponse = (entries: ReadonlyArray<readonly [string, string]>): DescribeConfigResponse => ({
  throttleTime: 0,
  resources: [{
    errorCode: 0,
    errorMessage: "",
    resourceName: "orders",
    resourceType: kafkajs.ConfigResourceTypes.TOPIC,
    configEntries: entries.map(([configName, configValue]) => ({
      configName,
      configValue,
      isDefault: false,
      configSource: 1,
      isSensitive: false,
      readOnly: false,
      configSynonyms: []
    }))
  }]
})

/** An admin whose describeConfigs is refused `failures` times, then answers. */
const flakyAdmin = (failures: number, entries: ReadonlyArray<readonly [string, string]>) => {
  const kafka = new kafkajs.Kafka({ brokers: ["127.0.0.1:1"], logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  let calls = 0
  admin.describeConfigs = async () => {
    calls++
    if (calls <= failures) throw refused()
    return configResponse(entries)
  }
  return { kafka, admin, calls: () => calls }
}

describe("admin describeConfigs retries", () => {
  it.live("retentionMs retries a refused connection to a killed broker", () =>
    Effect.gen(function*() {
      const { admin, calls, kafka } = flakyAdmin(2, [["retention.ms", "604800000"]])
      const patched = yield* PatchedKafkajs.ofExistingClient
      const retention = yield* makeFrom(patched, kafka, admin).retentionMs("orders")
      assert.strictEqual(retention, 604800000)
      assert.strictEqual(calls(), 3)
    }))

  it.live("outputTopicConfig retries a refused connection to a killed broker", () =>
    Effect.gen(function*() {
      const { admin, calls, kafka } = flakyAdmin(2, [["max.message.bytes", "1048588"]])
      const patched = yield* PatchedKafkajs.ofExistingClient
      const config = yield* makeFrom(patched, kafka, admin).outputTopicConfig("orders")
      assert.strictEqual(config?.maxMessageBytes, 1048588)
      assert.strictEqual(calls(), 3)
    }))
})

// The chaos acceptance run (3 brokers) saw windowed instances exit at startup with TopicNotFound
// for the repartition topic that one of them had just created ("created repartition topic ...",
// then 200 ms later "Topic ... does not exist"): a new topic reaches each broker's metadata a
// little after CreateTopics returns, and the broker asked did not know it yet.
const unknownTopic = () =>
  new kafkajs.KafkaJSProtocolError(
    Object.assign(new Error("This server does not host this topic-partition"), {
      type: "UNKNOWN_TOPIC_OR_PARTITION",
      code: 3,
      retriable: true
    })
  )

/** An admin whose metadata does not know `topic` for its first `misses` requests, then has 6 partitions. */
const settlingAdmin = (misses: number) => {
  const kafka = new kafkajs.Kafka({ brokers: ["127.0.0.1:1"], logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  let calls = 0
  admin.fetchTopicMetadata = async (options) => {
    calls++
    if (calls <= misses) throw unknownTopic()
    return {
      topics: (options?.topics ?? []).map((name) => ({
        name,
        partitions: Array.from({ length: 6 }, (_, partitionId) => ({
          partitionErrorCode: 0,
          partitionId,
          leader: 1,
          replicas: [1],
          isr: [1],
          offlineReplicas: []
        }))
      }))
    }
  }
  return { kafka, admin, calls: () => calls }
}

describe("admin partition counts of a topic just created", () => {
  it.live("partitionCounts asks again while the broker's metadata does not know the topic yet", () =>
    Effect.gen(function*() {
      const { admin, calls, kafka } = settlingAdmin(2)
      const patched = yield* PatchedKafkajs.ofExistingClient
      const counts = yield* makeFrom(patched, kafka, admin).partitionCounts(["app-by-key-repartition"])
      assert.strictEqual(counts.get("app-by-key-repartition"), 6)
      assert.strictEqual(calls(), 3)
    }))

  it.live("a topic that stays unknown is TopicNotFound, with the fix", () =>
    Effect.gen(function*() {
      const { admin, kafka } = settlingAdmin(Number.POSITIVE_INFINITY)
      const patched = yield* PatchedKafkajs.ofExistingClient
      const error = yield* Effect.flip(makeFrom(patched, kafka, admin).partitionCounts(["orders"]))
      assert.strictEqual(error._tag, "TopicNotFound")
      assert.include(error.message, "Topic orders does not exist. Create it")
    }))
})

// The chaos acceptance run (3 brokers, 2026-12-05) saw a pipeline instance exit 21 s after it started with
// `Kafka describeGroups failed (Connection): Connection error: connect ECONNREFUSED`: it started as the broker
// coordinating its group was killed. kafkajs looks the coordinator up once a describeGroups and retries the dead
// one until its retries end (a KafkaJSNonRetriableError around the connection error); meanwhile the group's
// coordinator had moved to a live broker, which a new describeGroups would have asked.
const gaveUpOnDeadBroker = () => {
  const refusedError = refused()
  return Object.assign(new kafkajs.KafkaJSNonRetriableError(refusedError), { cause: refusedError })
}

/** An admin whose describeGroups gives up on a dead coordinator `failures` times, then answers. */
const movingCoordinatorAdmin = (failures: number) => {
  const kafka = new kafkajs.Kafka({ brokers: ["127.0.0.1:1"], logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  let calls = 0
  admin.describeGroups = async (groupIds) => {
    calls++
    if (calls <= failures) throw gaveUpOnDeadBroker()
    return {
      groups: groupIds.map((groupId) => ({
        groupId,
        errorCode: 0,
        members: [],
        protocol: "",
        protocolType: "consumer",
        state: "Empty"
      }))
    }
  }
  return { kafka, admin, calls: () => calls }
}

describe("admin calls after a broker died", () => {
  it.live("groupMembers asks again when kafkajs gave up on the group's dead coordinator", () =>
    Effect.gen(function*() {
      const { admin, calls, kafka } = movingCoordinatorAdmin(2)
      const patched = yield* PatchedKafkajs.ofExistingClient
      const members = yield* makeFrom(patched, kafka, admin).groupMembers("app")
      assert.deepStrictEqual(members, [])
      assert.strictEqual(calls(), 3)
    }))
})

// The acceptance run of 0d9afe5 (session 26) had two more instances exit at startup on a saturated
// cluster: `Kafka fetchTopicMetadata failed (Unknown): Closed connection` (a broker killed while asked
// for its inputs' partition counts) and `Kafka createTopics failed (Unknown): Topic creation errors`
// (the controller, starting up, answered REQUEST_TIMED_OUT for each topic: "createTopics: event unable
// to start processing because of TimeoutException" in its log).
// kafkajs's types leave these two classes out: its errors as it makes them (name, type, topic).
const closedConnection = () =>
  Object.assign(new kafkajs.KafkaJSConnectionError("Closed connection", { broker: "127.0.0.1:44693" }), {
    name: "KafkaJSConnectionClosedError"
  })

const createTopicError = (topic: string, cause: Error) =>
  Object.assign(new kafkajs.KafkaJSProtocolError(cause), { name: "KafkaJSCreateTopicError", topic })

const creationTimedOut = (topic: string) =>
  new kafkajs.KafkaJSAggregateError("Topic creation errors", [
    createTopicError(
      topic,
      Object.assign(new Error("The request timed out."), { type: "REQUEST_TIMED_OUT", code: 7, retriable: true })
    )
  ])

/** An admin whose createTopics fails with `failure()` `failures` times, then creates the topic. */
const creatingAdmin = (failures: number, failure: () => Error) => {
  const kafka = new kafkajs.Kafka({ brokers: ["127.0.0.1:1"], logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  let calls = 0
  admin.createTopics = async () => {
    calls++
    if (calls <= failures) throw failure()
    return true
  }
  return { kafka, admin, calls: () => calls }
}

describe("admin calls at startup on a busy or changing cluster", () => {
  it.live("partitionCount asks again when the broker's connection closed", () =>
    Effect.gen(function*() {
      const { admin, kafka } = settlingAdmin(0)
      const answer = admin.fetchTopicMetadata
      let calls = 0
      admin.fetchTopicMetadata = async (options) => {
        calls++
        if (calls <= 2) throw closedConnection()
        return answer(options)
      }
      const patched = yield* PatchedKafkajs.ofExistingClient
      const count = yield* makeFrom(patched, kafka, admin).partitionCount("orders")
      assert.strictEqual(count, 6)
      assert.strictEqual(calls, 3)
    }))

  it.live("createTopic asks again when every topic's creation timed out", () =>
    Effect.gen(function*() {
      const { admin, calls, kafka } = creatingAdmin(2, () => creationTimedOut("app-store-changelog"))
      const patched = yield* PatchedKafkajs.ofExistingClient
      yield* makeFrom(patched, kafka, admin).createCompactedTopic("app-store-changelog", 6, 3)
      assert.strictEqual(calls(), 3)
    }))

  it.live("createTopic asks again when kafkajs gave up on a broker that died", () =>
    Effect.gen(function*() {
      const { admin, calls, kafka } = creatingAdmin(2, gaveUpOnDeadBroker)
      const patched = yield* PatchedKafkajs.ofExistingClient
      yield* makeFrom(patched, kafka, admin).createRepartitionTopic("app-by-key-repartition", 6, 3)
      assert.strictEqual(calls(), 3)
    }))

  it.live("a topic creation that keeps failing names the topic and the broker's answer", () =>
    Effect.gen(function*() {
      const { admin, kafka } = creatingAdmin(Number.POSITIVE_INFINITY, () =>
        new kafkajs.KafkaJSAggregateError("Topic creation errors", [
          createTopicError(
            "app-store-changelog",
            Object.assign(new Error("Replication factor: 3 larger than available brokers: 1."), {
              type: "INVALID_REPLICATION_FACTOR",
              code: 38,
              retriable: false
            })
          )
        ]))
      const patched = yield* PatchedKafkajs.ofExistingClient
      const error = yield* Effect.flip(makeFrom(patched, kafka, admin).createCompactedTopic("app-store-changelog", 6, 3))
      assert.include(error.message, "app-store-changelog: Replication factor: 3 larger than available brokers: 1.")
    }))
})
