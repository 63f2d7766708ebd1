/**
 * Stream-table joins (inner, left) in process (TestDriver, no broker) against
 * Kafka Streams' TopologyTestDriver (test/oracle): 1,500 seeded records per
 * seed of both inputs interleaved in timestamp order, with table updates,
 * tombstones and records without a key (`joinCases.ts`), three seeds, the
 * stream as read and re-keyed through a repartition topic. Skein's
 * output equals Kafka Streams', record for record, in order (key, value,
 * timestamp). Each record is piped as its own batch, in input order, as the
 * oracle pipes them.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { Topology, Transformer } from "../../src/index.ts"
import type * as Topic from "../../src/Topic.ts"
import { TestDriver } from "../../src/testing/index.ts"
import { runKafkaStreamsBatch } from "../oracle/kafkaStreams.ts"
import { cases, count, inputsOf, seeds, topologyOf } from "./joinCases.ts"

const bytes = (datum: string | number | null): Buffer | null => datum === null ? null : Buffer.from(String(datum), "utf8")

describe("streams: stream-table joins in process, against Kafka Streams", () => {
  it.scopedLive("inner and left stream-table joins, of the stream as read and re-keyed, equal Kafka Streams' output, record for record", () =>
    Effect.gen(function*() {
      const scenarios = cases.flatMap((c) => seeds.map((seed) => ({ case: c, seed, inputs: inputsOf(seed) })))
      const started = Date.now()
      const oracle = yield* runKafkaStreamsBatch(scenarios.map((s) => ({ topology: s.case.topology, inputs: s.inputs })))
      console.log(`oracle: ${scenarios.length} scenarios in ${Date.now() - started} ms`)
      for (const [i, scenario] of scenarios.entries()) {
        const began = Date.now()
        const name = `${scenario.case.topology} seed ${scenario.seed}`
        const compiled = Topology.compile(topologyOf(scenario.case), "diff")
        assert.ok(Either.isRight(compiled), "the topology compiles")
        if (Either.isLeft(compiled)) return
        const subTopologies = compiled.right.subTopologies
        assert.strictEqual(subTopologies.length, scenario.case.rekeyed ? 2 : 1, `${name}: sub-topologies`)
        // The compiled transformers are Transformer.Any: their inputs, state and errors erased by compile.
        const drivers = yield* Effect.forEach(subTopologies, (sub) =>
          TestDriver.make(sub.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>))
        const joining = subTopologies.findIndex((sub) => sub.inputs.includes("right"))
        const driver = drivers[joining]!
        // A re-keyed case: the stream's sub-topology writes the repartition topic, whose new records are
        // piped into the join's at once, before the next input (as the TopologyTestDriver processes them).
        const upstream = drivers[1 - joining]
        const repartition = "diff-rekeyed-repartition"
        let forwarded = 0
        for (const r of scenario.inputs) {
          const raw = { key: bytes(r.key), value: bytes(r.value), timestamp: r.timestamp }
          if (upstream === undefined || r.topic === "right") {
            yield* driver.pipeRaw(r.topic, raw)
            continue
          }
          yield* upstream.pipeRaw(r.topic, raw)
          const written = yield* upstream.records(repartition)
          for (const w of written.slice(forwarded)) {
            yield* driver.pipeRaw(repartition, { key: w.key, value: w.value, timestamp: w.timestamp })
          }
          forwarded = written.length
        }
        if (upstream !== undefined) {
          assert.strictEqual(forwarded, scenario.inputs.filter((r) => r.topic === "left").length, `${name}: every stream record re-keyed`)
        }
        const actual = (yield* driver.records("output")).map((r) => ({
          key: r.key === null ? null : r.key.toString("utf8"),
          value: r.value === null ? null : r.value.toString("utf8"),
          timestamp: r.timestamp
        }))
        const expected = oracle[i]!.map((r) => ({
          key: r.key === null ? null : String(r.key),
          value: r.value === null ? null : String(r.value),
          timestamp: r.timestamp
        }))
        const joined = expected.filter((r) => r.value !== null && !r.value.endsWith("+null")).length
        assert.isAbove(joined, 100, `${name}: Kafka Streams joined records with table values`)
        if (scenario.case.kind === "left") {
          assert.isAbove(expected.length - joined, 50, `${name}: Kafka Streams joined records without a table value`)
        }
        assert.deepStrictEqual(actual, expected, name)
        const tombstoned = scenario.inputs.filter((r) => r.topic === "right" && r.value === null).length
        const keyless = scenario.inputs.filter((r) => r.key === null).length
        console.log(
          `${name}: ${actual.length} results equal (${count} inputs: ${tombstoned} tombstones, ${keyless} without a key; ` +
            `${joined} with a table value) in ${Date.now() - began} ms`
        )
      }
    }), 300_000)
})
