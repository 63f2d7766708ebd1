/**
 * A test run refuses a broker that is not the Kafka version it claims
 * (test/globalSetup.ts): `KAFKA_BROKERS` pointing at another version fails the
 * setup with a message naming the fix and the opt-out, unless
 * `SKEIN_ALLOW_ANY_KAFKA_VERSION=1`. The run's own broker plays the cluster:
 * it is claimed as the version it runs, then as the other one.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as LocalKafka from "../../src/testing/LocalKafka.ts"
import { startKafka } from "../globalSetup.ts"
import { brokers } from "../utils/broker.ts"
import * as BrokerVersion from "../utils/brokerVersion.ts"

/** The version this run's broker runs (as globalSetup claimed and checked it). */
const runVersion = (): LocalKafka.KafkaVersion => {
  const asked = (process.env["SKEIN_KAFKA_VERSION"] ?? "").trim()
  return asked === "" ? LocalKafka.defaultVersion : Effect.runSync(LocalKafka.parseVersion(asked))
}

const otherVersion = (version: LocalKafka.KafkaVersion): LocalKafka.KafkaVersion => version === "4.4.0" ? "3.9.2" : "4.4.0"

/** Runs `body` with some environment variables set, restoring them after. */
const withEnv = <A>(variables: Record<string, string>, body: () => Promise<A>): Promise<A> => {
  const saved = Object.fromEntries(Object.keys(variables).map((name) => [name, process.env[name]]))
  Object.assign(process.env, variables)
  return body().finally(() => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name]
      else process.env[name] = value
    }
  })
}

/** startKafka against the run's broker as an existing cluster: the error message, or undefined if it started. */
const setupWith = (version: LocalKafka.KafkaVersion, extra: Record<string, string> = {}) =>
  Effect.promise(() =>
    withEnv({ KAFKA_BROKERS: brokers().join(","), SKEIN_KAFKA_PROVIDER: "auto", ...extra }, () =>
      startKafka({ version }).then(
        async (broker) => {
          await broker.close()
          return undefined
        },
        (error: unknown) => error instanceof Error ? error.message : String(error)
      ))
  )

describe("the run's Kafka version", () => {
  it.effect("the broker reports the metadata.version levels of the release it runs", () =>
    Effect.gen(function*() {
      const found = yield* BrokerVersion.supportedLevels(brokers()[0] ?? "")
      console.log(`run's broker ${found.address}: metadata.version ${found.min}-${found.max}`)
      assert.strictEqual(found.max, BrokerVersion.metadataVersionMax[runVersion()])
      assert.strictEqual(BrokerVersion.releaseOf(found.max), runVersion().replace(/\.\d+$/, ".x"))
    }))

  it.effect("KAFKA_BROKERS of the claimed version is accepted", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* setupWith(runVersion()), undefined)
    }))

  it.effect("KAFKA_BROKERS of another version fails the setup, naming the fix and the opt-out", () =>
    Effect.gen(function*() {
      const claimed = otherVersion(runVersion())
      const message = yield* setupWith(claimed)
      console.log(`claiming ${claimed}: ${message}`)
      assert.isDefined(message, `a run claiming Kafka ${claimed} accepted a Kafka ${runVersion()} broker`)
      assert.include(message, `this run tests Kafka ${claimed}, but its broker is not Kafka ${claimed.replace(/\.\d+$/, "")}`)
      assert.include(message, `(Kafka ${runVersion().replace(/\.\d+$/, ".x")})`)
      assert.include(message, "SKEIN_ALLOW_ANY_KAFKA_VERSION=1")
    }))

  it.effect("SKEIN_ALLOW_ANY_KAFKA_VERSION=1 runs against another version", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* setupWith(otherVersion(runVersion()), { SKEIN_ALLOW_ANY_KAFKA_VERSION: "1" }), undefined)
    }))
})
