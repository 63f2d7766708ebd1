/**
 * Windowed aggregations in process (TestDriver, no broker) against Kafka
 * Streams' TopologyTestDriver: tumbling count, hopping sum, sliding count and session count (merges),
 * emitting updates and final results, and a tumbling count's final results after a groupBy (through a
 * repartition topic), 1,000 seeded records per seed (out of order,
 * late past grace, gaps), two seeds; each key's results equal Kafka
 * Streams', in order (with the documented deviations applied to its output:
 * `windowCases.ts`). The records are piped in batches of 100 (the state
 * crosses batches as it crosses transactions). A case that re-keys through a
 * repartition topic (`groupBy`) has two sub-topologies: the records the first
 * writes to the repartition topic are piped into the second, one batch each.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { Topology, Transformer } from "../../src/index.ts"
import type * as Topic from "../../src/Topic.ts"
import { TestDriver } from "../../src/testing/index.ts"
import { runKafkaStreamsBatch } from "../oracle/kafkaStreams.ts"
import { actualPerKey, cases, count, expectedPerKey, inputsOf, inputTopic, seeds, sortedEntries, topologyOf } from "./windowCases.ts"

describe("streams: windowed aggregations in process, against Kafka Streams", () => {
  it.scopedLive("tumbling count, hopping sum, sliding count, session count, groupBy count, updates and final results, equal Kafka Streams' per key", () =>
    Effect.gen(function*() {
      const scenarios = cases.flatMap((c) => seeds.map((seed) => ({ case: c, seed, inputs: inputsOf(c, seed) })))
      const started = Date.now()
      const oracle = yield* runKafkaStreamsBatch(scenarios.map((s) => ({ topology: s.case.topology, params: s.case.params, inputs: s.inputs })))
      console.log(`oracle: ${scenarios.length} scenarios in ${Date.now() - started} ms`)
      let compared = 0
      for (const [i, scenario] of scenarios.entries()) {
        const began = Date.now()
        const input = inputTopic(scenario.case, "input")
        const compiled = Topology.compile(topologyOf(scenario.case, input, "output"), "diff")
        assert.ok(Either.isRight(compiled), "the topology compiles")
        if (Either.isLeft(compiled)) return
        const subTopologies = compiled.right.subTopologies
        assert.strictEqual(subTopologies.length, scenario.case.repartition === undefined ? 1 : 2, `${scenario.case.topology}: sub-topologies`)
        // The compiled transformers are Transformer.Any: their inputs, state and errors erased by compile.
        const drivers = yield* Effect.forEach(subTopologies, (sub) =>
          TestDriver.make(sub.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>))
        for (let from = 0; from < scenario.inputs.length; from += 100) {
          yield* drivers[0]!.pipeAll(
            input as Topic.Topic<string, string | number>,
            scenario.inputs.slice(from, from + 100).map((r) => ({ key: r.key === null ? null : String(r.key), value: r.value as string | number, timestamp: r.timestamp }))
          )
        }
        // Each later sub-topology reads the repartition topic the one before it wrote.
        for (let next = 1; next < drivers.length; next++) {
          const repartition = subTopologies[next]!.inputs[0]!
          const written = yield* drivers[next - 1]!.records(repartition)
          assert.isAbove(written.length, 0, `${repartition}: records re-keyed`)
          for (const r of written) yield* drivers[next]!.pipeRaw(repartition, { key: r.key, value: r.value, timestamp: r.timestamp })
        }
        const outputs = (yield* drivers[drivers.length - 1]!.records("output")).map((r) => ({
          key: r.key === null ? null : r.key.toString("utf8"),
          value: r.value === null ? null : r.value.toString("utf8"),
          timestamp: r.timestamp
        }))
        const expected = oracle[i]!
        const updates = scenarios.findIndex((s) => s.case.topology === scenario.case.updatesTopology && s.seed === scenario.seed)
        const name = `${scenario.case.topology} seed ${scenario.seed}`
        assert.isAbove(expected.length, 100, `${name}: Kafka Streams emitted results`)
        const want = expectedPerKey(scenario.case, expected, { inputs: scenario.inputs, updates: oracle[updates] })
        const wanted = [...want.values()].reduce((n, lines) => n + lines.length, 0)
        assert.deepStrictEqual(sortedEntries(actualPerKey(outputs)), sortedEntries(want), name)
        compared += wanted
        const deviation = expected.length - wanted
        const tombstones = outputs.filter((r) => r.value === null).length
        console.log(
          `${name}: ${outputs.length} results equal (${count} inputs) in ${Date.now() - began} ms` +
            (tombstones === 0 ? "" : ` (${tombstones} tombstones of merged sessions)`) +
            (deviation === 0 ? "" : `; the deviation removed ${deviation} of Kafka Streams' ${expected.length}`)
        )
      }
      console.log(`compared ${compared} results`)
    }), 300_000)
})
