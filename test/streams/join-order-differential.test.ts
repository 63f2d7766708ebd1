/**
 * A stream-table left join on a broker against Kafka Streams'
 * TopologyTestDriver (test/oracle), with both inputs on the broker before
 * the join starts: the task fetches the stream's and the table's partitions
 * together and must process them in timestamp order across the two, as
 * Kafka Streams does and as the TopologyTestDriver is fed (the join cases'
 * 1,500 seeded records, `joinCases.ts`, with distinct timestamps so that the
 * order across the topics is the timestamps': records of one timestamp on
 * both topics are processed in the order the TopologyTestDriver is piped,
 * which a broker does not keep). Skein's output equals Kafka Streams',
 * record for record, in order (key, value, timestamp).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, Schema } from "effect"
import { KStream, KTable, SkeinConfig, Topic, Topology } from "../../src/index.ts"
import { brokers, createTopics, eventually, produceRaw, readCommitted, unique } from "../helpers/kafka.ts"
import { runKafkaStreamsBatch } from "../oracle/kafkaStreams.ts"
import { inputsOf } from "./joinCases.ts"

describe("streams: a stream-table join on a broker reads its inputs in timestamp order, as Kafka Streams", () => {
  it.scopedLive("both inputs fetched together: the left join equals Kafka Streams' output, record for record", () =>
    Effect.gen(function*() {
      // Timestamps 10 ms apart in input order (1970: the topics keep their records, retention.ms -1).
      const inputs = inputsOf(7).map((r, i) => ({ ...r, timestamp: 1_000_000 + i * 10 }))
      const [expected] = yield* runKafkaStreamsBatch([{ topology: "stream-table-left-join", inputs }])
      assert.isAbove(expected!.length, 500, "Kafka Streams joined the stream's records")

      const left = unique("left")
      const right = unique("right")
      const output = unique("joined")
      const keep = { "retention.ms": "-1" }
      yield* createTopics([left, right, output].map((name) => ({ name, partitions: 1, config: keep })))
      const text = (datum: string | number | null) => datum === null ? null : String(datum)
      for (const topic of ["left", "right"]) {
        yield* produceRaw(
          topic === "left" ? left : right,
          inputs.filter((r) => r.topic === topic).map((r) => ({ key: text(r.key), value: text(r.value), timestamp: String(r.timestamp) }))
        )
      }
      const Left = Topic.make({ name: left, key: Schema.String, value: Schema.String })
      const Right = Topic.make({ name: right, key: Schema.String, value: Schema.String })
      const Output = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const topology = Topology.make("stream-table-left-join", [
        KStream.to(KStream.leftJoin(KStream.from(Left), KTable.from(Right), (l, r) => `${l}+${r ?? "null"}`), Output)
      ])
      const fiber = yield* Effect.forkScoped(
        Topology.run(topology).pipe(Effect.provide(SkeinConfig.layer({ applicationId: unique("join-order-app"), brokers: brokers() })))
      )
      yield* eventually(Effect.map(readCommitted(output), (records) => records.length >= expected!.length), {
        timeout: 90_000,
        what: `${expected!.length} joined records`
      })
      assert.ok(Option.isNone(yield* Fiber.poll(fiber)), "the topology is still running")
      const project = (r: { key: string | number | null; value: string | number | null; timestamp: number }) =>
        `${r.key}=${r.value}@${r.timestamp}`
      assert.deepStrictEqual((yield* readCommitted(output)).map(project), expected!.map(project))
    }), 180_000)
})
