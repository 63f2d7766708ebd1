/**
 * Stream-stream windowed joins (inner, left, outer) in process (TestDriver,
 * no broker) against Kafka Streams' TopologyTestDriver (test/oracle): 1,000
 * seeded records per case of both inputs, 30% out of order within the window
 * plus grace and 6% past it, several keys, records without a key (`streamJoinCases.ts`),
 * two windows per kind (symmetric with grace; asymmetric, `before` 50 ms and
 * `after` 10 ms, without grace). Skein's output equals Kafka Streams', record
 * for record, in order (key, value, timestamp), once the deviations of
 * docs/streams.md are applied to Kafka Streams' output (`expectedOf`): none
 * for the inner join, whose output must equal Kafka Streams' as it is. Each
 * record is piped as its own batch, in input order, as the oracle pipes them.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { Topology, Transformer } from "../../src/index.ts"
import type * as Topic from "../../src/Topic.ts"
import { TestDriver } from "../../src/testing/index.ts"
import { runKafkaStreamsBatch } from "../oracle/kafkaStreams.ts"
import { cases, count, expectedOf, inputsOf, topologyOf } from "./streamJoinCases.ts"

const bytes = (datum: string | number | null): Buffer | null => datum === null ? null : Buffer.from(String(datum), "utf8")

describe("streams: stream-stream joins in process, against Kafka Streams", () => {
  it.scopedLive("inner, left and outer windowed joins equal Kafka Streams' output, record for record, with the documented deviations", () =>
    Effect.gen(function*() {
      const scenarios = cases.map((c) => ({ case: c, inputs: inputsOf(c) }))
      const started = Date.now()
      const oracle = yield* runKafkaStreamsBatch(scenarios.map((s) => ({
        topology: s.case.topology,
        params: s.case.params,
        inputs: s.inputs
      })))
      console.log(`oracle: ${scenarios.length} scenarios in ${Date.now() - started} ms`)
      const total = { late: 0, early: 0, removed: 0, joinsAfterNull: 0, added: 0, neverEmitted: 0 }
      for (const [i, scenario] of scenarios.entries()) {
        const c = scenario.case
        const began = Date.now()
        const name = `${c.topology} seed ${c.seed} (before ${c.beforeMs} ms, after ${c.afterMs} ms, grace ${c.graceMs} ms)`
        const compiled = Topology.compile(topologyOf(c), "diff")
        assert.ok(Either.isRight(compiled), "the topology compiles")
        if (Either.isLeft(compiled)) return
        assert.strictEqual(compiled.right.subTopologies.length, 1, `${name}: one sub-topology`)
        // The compiled transformer is Transformer.Any: its inputs, state and errors erased by compile.
        const driver = yield* TestDriver.make(
          compiled.right.subTopologies[0]!.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>
        )
        for (const r of scenario.inputs) {
          yield* driver.pipeRaw(r.topic, { key: bytes(r.key), value: bytes(r.value), timestamp: r.timestamp })
        }
        const actual = (yield* driver.records("output")).map((r) => ({
          key: r.key === null ? null : r.key.toString("utf8"),
          value: r.value === null ? null : r.value.toString("utf8"),
          timestamp: r.timestamp
        }))
        const kafkaStreams = oracle[i]!
        const { deviations, expected } = expectedOf(c, scenario.inputs, kafkaStreams)
        const joined = expected.filter((r) => r.value !== null && !r.value.includes("null")).length
        const nulls = expected.length - joined
        assert.isAbove(joined, 200, `${name}: Kafka Streams joined records`)
        if (c.kind === "inner") {
          assert.deepStrictEqual(deviations, { late: 0, early: 0, removed: 0, joinsAfterNull: 0, added: 0, neverEmitted: 0 }, `${name}: no deviation`)
          assert.strictEqual(nulls, 0)
        } else {
          assert.isAbove(nulls, 50, `${name}: records without a partner`)
        }
        assert.deepStrictEqual(actual, [...expected], name)
        for (const k of Object.keys(total) as Array<keyof typeof total>) total[k] += deviations[k]
        const late = scenario.inputs.filter((r, n) =>
          r.timestamp + (r.topic === "left" ? c.afterMs : c.beforeMs) + c.graceMs <
            Math.max(...scenario.inputs.slice(0, n + 1).map((x) => x.timestamp))
        ).length
        console.log(
          `${name}: ${actual.length} results equal (${count} inputs, ${late} past their window and grace; ${joined} joins, ${nulls} ` +
            `without a partner; Kafka Streams ${kafkaStreams.length} results; deviations ${JSON.stringify(deviations)}) in ${Date.now() - began} ms`
        )
      }
      console.log(`deviations applied in all: ${JSON.stringify(total)}`)
      // The cases exercise each deviation at least once (else the inputs do not test what docs/streams.md lists).
      assert.isAbove(total.late, 0, "a null result Kafka Streams emits late")
      assert.isAbove(total.early, 0, "a null result Kafka Streams emits before the window closed")
      assert.isAbove(total.removed, 0, "a null result Kafka Streams emits at once for a record that joins later")
      assert.isAbove(total.joinsAfterNull, 0, "a join Kafka Streams emits after the record's null result")
    }), 300_000)
})
