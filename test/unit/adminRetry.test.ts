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
