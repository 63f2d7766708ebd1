/**
 * Differential tests: the same topology in Kafka Streams' TopologyTestDriver
 * (test/oracle) and in Skein on a real broker, on the same seeded input, give
 * the same output records (key, value, timestamp), in the same order. One
 * input partition, so that Skein's order is the input's, as the driver's is.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, Schema } from "effect"
import { KGroupedStream, KStream, KTable, SkeinConfig, Topic, Topology } from "../../src/index.ts"
import { brokers, createTopics, eventually, produceRaw, readCommitted, unique } from "../helpers/kafka.ts"
import { generateInputs } from "../oracle/inputs.ts"
import type { Datum, InputRecord, OutputRecord } from "../oracle/kafkaStreams.ts"
import { runKafkaStreamsBatch } from "../oracle/kafkaStreams.ts"

const seeds = [11, 29]
const count = 1_000

interface Case {
  readonly topology: string
  readonly inputs: (seed: number) => ReadonlyArray<InputRecord>
  /** The same topology in Skein, reading `input` and writing `output`. */
  readonly skein: (input: string, output: string) => Topology.Topology<never, never>
}

const cases: ReadonlyArray<Case> = [
  {
    topology: "selectKey-groupByKey-count",
    inputs: (seed) => generateInputs({ seed, count, startMs: 1_000_000, nullKeyRate: 0.05 }),
    skein: (input, output) => {
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Schema.Number) })
      return Topology.make("rekeyed-count", [
        KStream.from(In).pipe(
          KStream.selectKey((record) => record.value),
          KStream.groupByKey({ key: Schema.String, value: Schema.String, name: "rekeyed" }),
          KGroupedStream.count({ name: "counts" }),
          KTable.toStream,
          KStream.to(Out)
        )
      ])
    }
  },
  {
    topology: "reduce-sum",
    inputs: (seed) => generateInputs({ seed, count, startMs: 1_000_000, values: "number", valueCardinality: 100, nullKeyRate: 0.05 }),
    skein: (input, output) => {
      const In = Topic.make({ name: input, key: Schema.String, value: Topic.json(Schema.Number) })
      const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Schema.Number) })
      return Topology.make("sums", [
        KStream.from(In).pipe(
          KStream.groupByKey(),
          KGroupedStream.reduce((sum: number, value: number) => sum + value, { state: Schema.Number, name: "sums" }),
          KTable.toStream,
          KStream.to(Out)
        )
      ])
    }
  }
]

const text = (datum: Datum): string | null => datum === null ? null : String(datum)

/** Runs `topology` in Skein over `inputs` until it has written `expected` records; returns them in order. */
const runSkein = (make: Case["skein"], inputs: ReadonlyArray<InputRecord>, expected: number) =>
  Effect.scoped(Effect.gen(function*() {
    const input = unique("diff-in")
    const output = unique("diff-out")
    // Event times in 1970: without retention.ms -1 the broker's next retention check deletes the records.
    const keep = { "retention.ms": "-1" }
    yield* createTopics([{ name: input, partitions: 1, config: keep }, { name: output, partitions: 1, config: keep }])
    yield* produceRaw(input, inputs.map((r) => ({ key: text(r.key), value: text(r.value), timestamp: String(r.timestamp) })))
    const fiber = yield* Effect.forkScoped(
      Topology.run(make(input, output)).pipe(
        Effect.provide(SkeinConfig.layer({ applicationId: unique("diff-app"), brokers: brokers() }))
      )
    )
    yield* eventually(Effect.map(readCommitted(output), (records) => records.length >= expected), {
      timeout: 90_000,
      what: `${expected} records in ${output}`
    })
    assert.ok(Option.isNone(yield* Fiber.poll(fiber)), "the topology is still running")
    return yield* readCommitted(output)
  }))

describe("streams: differential tests against Kafka Streams", () => {
  it.scopedLive("re-keyed count and per-key sum equal Kafka Streams' output, record for record", () =>
    Effect.gen(function*() {
      const scenarios = cases.flatMap((c) => seeds.map((seed) => ({ case: c, seed, inputs: c.inputs(seed) })))
      const oracle = yield* runKafkaStreamsBatch(scenarios.map((s) => ({ topology: s.case.topology, inputs: s.inputs })))
      for (const [i, scenario] of scenarios.entries()) {
        const expected: ReadonlyArray<OutputRecord> = oracle[i]!
        assert.isAbove(expected.length, count / 2, `${scenario.case.topology} seed ${scenario.seed}: Kafka Streams emitted most records`)
        const actual = yield* runSkein(scenario.case.skein, scenario.inputs, expected.length)
        const project = (r: { key: string | null | number; value: string | null | number; timestamp: number }) =>
          `${r.key}=${r.value}@${r.timestamp}`
        assert.deepStrictEqual(
          actual.map((r) => project({ key: r.key, value: r.value === null ? null : Number(r.value), timestamp: r.timestamp })),
          expected.map(project),
          `${scenario.case.topology} seed ${scenario.seed}`
        )
      }
    }), 600_000)
})
