/**
 * Table joins in process (TestDriver, no broker) against Kafka Streams'
 * TopologyTestDriver (test/oracle): table-table inner, left and outer joins
 * (plain, and through a filter and a mapValues on each side), an
 * aggregation's table joined with a stream and with a table, a re-keyed
 * stream joined with a table through the repartition topic Skein inserts,
 * foreign-key joins through their subscription and response topics, and
 * stream-global table joins (a global table's record applied at once)
 * (`tableJoinCases.ts`), each on three seeds (a foreign-key join on one) of 1,500 records with
 * tombstones, records without a key and out-of-order timestamps. Skein's
 * output equals Kafka Streams', record for record, in order (key, value,
 * timestamp). Each record is piped as its own batch in input order, and what
 * a sub-topology writes to a repartition topic is piped into its reader at
 * once, as the oracle processes it.
 *
 * `DEBUG_JOIN=<part of a topology's name>` runs only the cases it names and
 * prints the first difference with the key's inputs and outputs.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { Topology, Transformer } from "../../src/index.ts"
import type * as Topic from "../../src/Topic.ts"
import { TestDriver } from "../../src/testing/index.ts"
import { runKafkaStreamsBatch } from "../oracle/kafkaStreams.ts"
import { cases, count, inputsOf, seeds } from "./tableJoinCases.ts"

const bytes = (datum: string | number | null): Buffer | null => datum === null ? null : Buffer.from(String(datum), "utf8")
const text = (buffer: Buffer | null): string | null => buffer === null ? null : buffer.toString("utf8")

describe("streams: table joins in process, against Kafka Streams", () => {
  it.scopedLive("table-table, aggregation-table and re-keyed stream-table joins equal Kafka Streams' output, record for record", () =>
    Effect.gen(function*() {
      const scenarios = cases.filter((c) => process.env.DEBUG_JOIN === undefined || c.topology.includes(process.env.DEBUG_JOIN)).flatMap((c) => (c.seeds ?? seeds).map((seed) => ({ case: c, seed, inputs: inputsOf(seed, c.tombstones) })))
      const started = Date.now()
      const oracle = yield* runKafkaStreamsBatch(
        scenarios.map((s) => ({ topology: s.case.topology, inputs: s.inputs, ...(s.case.params === undefined ? {} : { params: s.case.params }) }))
      )
      console.log(`oracle: ${scenarios.length} scenarios in ${Date.now() - started} ms`)
      let total = 0
      for (const [i, scenario] of scenarios.entries()) {
        const began = Date.now()
        const name = `${scenario.case.topology}${scenario.case.params === undefined ? "" : ` ${JSON.stringify(scenario.case.params)}`} seed ${scenario.seed}`
        const compiled = Topology.compile(scenario.case.build(), "diff")
        if (Either.isLeft(compiled)) return assert.fail(`${name}: ${compiled.left.message}`)
        const subTopologies = compiled.right.subTopologies
        assert.strictEqual(subTopologies.length, scenario.case.subTopologies, `${name}: sub-topologies`)
        // The compiled transformers are Transformer.Any: their inputs, state and errors erased by compile.
        const drivers = yield* Effect.forEach(subTopologies, (sub) =>
          TestDriver.make(sub.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>))
        const readerOf = (topic: string) => subTopologies.findIndex((sub) => sub.inputs.includes(topic))
        const internal = compiled.right.internalTopics.map((spec) => spec.name)
        /** Per writer and repartition topic, how many of its records were piped on. */
        const forwarded = new Map<string, number>()
        /** Pipes a record into its reader, then what that wrote to repartition topics into theirs, depth first. */
        const pipe = (topic: string, raw: { key: Buffer | null; value: Buffer | null; timestamp: number }): Effect.Effect<void, unknown> =>
          Effect.gen(function*() {
            // A global table's record updates it at once, as the oracle's global task does.
            const global = compiled.right.globalTables.find((table) => table.topic === topic)
            if (global !== undefined) return void global.store.apply(raw.key, raw.value)
            const reader = readerOf(topic)
            assert.isAtLeast(reader, 0, `${name}: a sub-topology reads ${topic}`)
            yield* drivers[reader]!.pipeRaw(topic, raw)
            for (const repartition of internal) {
              const written = yield* drivers[reader]!.records(repartition)
              const done = forwarded.get(`${reader}:${repartition}`) ?? 0
              forwarded.set(`${reader}:${repartition}`, written.length)
              for (const w of written.slice(done)) {
                yield* pipe(repartition, { key: w.key, value: w.value, timestamp: w.timestamp ?? 0 })
              }
            }
          })
        for (const r of scenario.inputs) yield* pipe(r.topic, { key: bytes(r.key), value: bytes(r.value), timestamp: r.timestamp })
        const outputs = yield* Effect.forEach(drivers, (driver) => driver.records("output"))
        const actual = outputs.flat().map((r) => ({ key: text(r.key), value: text(r.value), timestamp: r.timestamp }))
        const expected = oracle[i]!.map((r) => ({
          key: r.key === null ? null : String(r.key),
          value: r.value === null ? null : String(r.value),
          timestamp: r.timestamp
        }))
        // The case must exercise what it claims: joins of both values, with a missing side where the kind has it, deletions.
        const both = expected.filter((r) => r.value !== null && !r.value.startsWith("null+") && !r.value.endsWith("+null")).length
        const oneSided = expected.filter((r) => r.value !== null && (r.value.startsWith("null+") || r.value.endsWith("+null"))).length
        const deletions = expected.filter((r) => r.value === null).length
        assert.isAbove(both, 100, `${name}: Kafka Streams joined both sides`)
        if (/left|outer/.test(scenario.case.topology)) assert.isAbove(oneSided, 20, `${name}: Kafka Streams joined one side with null`)
        // Both sides tables with tombstones (an aggregation deletes nothing).
        if (scenario.case.topology.startsWith("table-table") || scenario.case.topology.startsWith("fk-")) {
          assert.isAbove(deletions, 20, `${name}: Kafka Streams deleted joined keys`)
        }
        if (process.env.DEBUG_JOIN !== undefined && JSON.stringify(actual) !== JSON.stringify(expected)) {
          const at = actual.findIndex((r, j) => JSON.stringify(r) !== JSON.stringify(expected[j]))
          const key = actual[at]?.key ?? expected[at]?.key
          console.log(name, "first difference at", at, "actual", actual[at], "expected", expected[at])
          console.log("inputs of", key, JSON.stringify(scenario.inputs.filter((r) => r.key === key).slice(0, 40)))
          console.log("actual of", key, JSON.stringify(actual.filter((r) => r.key === key).slice(0, 30)))
          console.log("expected of", key, JSON.stringify(expected.filter((r) => r.key === key).slice(0, 30)))
        }
        assert.deepStrictEqual(actual, expected, name)
        total += actual.length
        console.log(
          `${name}: ${actual.length} results equal (${count} inputs; ${both} joined, ${oneSided} with null, ` +
            `${deletions} deletions) in ${Date.now() - began} ms`
        )
      }
      console.log(`${scenarios.length} scenarios, ${total} results equal`)
    }), 600_000)
})
