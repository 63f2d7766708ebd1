/**
 * A process node in process (TestDriver, no broker) against Kafka Streams'
 * TopologyTestDriver (`test/oracle/`, topology `process-expiry`): each
 * record kept in a store and forwarded as `seen:value`, each key's latest
 * value forwarded as `expired:value` once stream time reaches its timestamp
 * plus a ttl (Kafka Streams: a key-value store and a stream-time punctuator
 * every millisecond scanning it; Skein: a key-value store and a per-key
 * stream-time timer). Seeded inputs with out-of-order records (less than the
 * ttl behind, so no timer is scheduled behind stream time), records without a
 * key and gaps; the outputs (key, value, timestamp) equal, in order.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Option, Schema } from "effect"
import { KeyValueStore, KStream, Timer, Topic, Topology, type Transformer } from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"
import { generateInputs } from "../oracle/inputs.ts"
import { runKafkaStreamsBatch } from "../oracle/kafkaStreams.ts"

const Input = Topic.make({ name: "input", key: Schema.String, value: Schema.String })
const Output = Topic.make({ name: "output", key: Schema.String, value: Schema.String })
const Pending = KeyValueStore.make({ name: "pending", key: Schema.String, value: Schema.String })
const ttlMs = 400

const topology = Topology.make("expiry", [
  KStream.from(Input).pipe(
    KStream.filter((record) => record.key !== null),
    KStream.process({
      name: "expiry",
      stores: [Pending],
      process: (record) =>
        Effect.as(Pending.put(record.key ?? "", record.value), {
          outputs: [{ key: record.key, value: `seen:${record.value}` }],
          timers: [Timer.streamTime("expire", record.timestamp + ttlMs)]
        }),
      onTimer: (timer) =>
        Effect.gen(function*() {
          const value = yield* Pending.get(timer.key)
          yield* Pending.delete(timer.key)
          return { outputs: Option.isSome(value) ? [{ key: timer.key, value: `expired:${value.value}` }] : [] }
        })
    }),
    KStream.to(Output)
  )
])

describe("streams: a process node in process, against Kafka Streams", () => {
  it.scopedLive("a store and stream-time timers: the outputs equal Kafka Streams' store and punctuator's, in order", () =>
    Effect.gen(function*() {
      const seeds = [7, 8]
      const inputs = seeds.map((seed) =>
        generateInputs({ seed, count: 1_500, keys: 12, nullKeyRate: 0.03, maxDisorderMs: ttlMs - 1, lateRate: 0, gapRate: 0.02 })
      )
      const oracle = yield* runKafkaStreamsBatch(inputs.map((records) => ({ topology: "process-expiry", params: { ttlMs }, inputs: records })))
      const compiled = Topology.compile(topology, "diff")
      if (Either.isLeft(compiled)) return yield* Effect.dieMessage(compiled.left.message)
      for (const [i, records] of inputs.entries()) {
        const driver = yield* TestDriver.make(
          compiled.right.subTopologies[0]!.transformer as Transformer.Transformer<readonly [typeof Input], unknown, unknown, never>
        )
        for (let from = 0; from < records.length; from += 50) {
          yield* driver.pipeAll(
            Input,
            records.slice(from, from + 50).map((r) => ({
              key: r.key === null ? null : String(r.key),
              value: String(r.value),
              timestamp: r.timestamp
            }))
          )
        }
        const actual = (yield* driver.outputs(Output)).map((r) => `${r.key} ${r.value} @${r.timestamp}`)
        const expected = oracle[i]!.map((r) => `${r.key} ${r.value} @${r.timestamp}`)
        const expired = expected.filter((line) => line.includes(" expired:")).length
        assert.isAbove(expired, 100, `seed ${seeds[i]}: keys expired`)
        assert.deepStrictEqual(actual, expected, `seed ${seeds[i]}`)
        console.log(`seed ${seeds[i]}: ${actual.length} outputs equal Kafka Streams' (${expired} expired)`)
      }
    }), 300_000)
})
