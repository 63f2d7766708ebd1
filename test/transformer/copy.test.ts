import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, groupOffsets, offsets, produce, readCommitted, sleep, startInstance, unique } from "../helpers/kafka.ts"

// Kafka Streams' EosIntegrationTest "copy with restarts": a stateless copy over
// two partitions, stopped and restarted twice mid-stream.
describe("stateless copy with restarts", () => {
  it.scopedLive("output equals the input exactly once and committed offsets reach the end", () =>
    Effect.gen(function*() {
      const input = unique("copy-in")
      const output = unique("copy-out")
      const applicationId = unique("copy-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const copy = Transformer.stateless({
        name: "copy",
        inputs: [In],
        transform: (record) => Effect.succeed({ emit: [Topic.record(Out, record.key, record.value)] })
      })

      const produceRound = (round: number) =>
        produce(
          input,
          Array.from({ length: 200 }, (_, i) => ({
            key: `k${i % 20}`,
            value: `r${round}-${i}`,
            partition: i % 2
          }))
        )

      for (let round = 0; round < 3; round++) {
        const instance = yield* startInstance(copy, { applicationId, maxPollRecords: 50 })
        yield* produceRound(round)
        // Stop mid-stream in the first two rounds; run to the end in the last.
        yield* sleep(round < 2 ? 700 : 0)
        if (round === 2) yield* caughtUp(applicationId, input)
        yield* instance.stop
      }

      const records = yield* readCommitted(output)
      const values = records.map((r) => r.value ?? "")
      const expected = Array.from({ length: 3 }, (_, round) => Array.from({ length: 200 }, (_, i) => `r${round}-${i}`)).flat()
      assert.strictEqual(values.length, expected.length, "no duplicate and no loss")
      assert.deepStrictEqual([...values].sort(), [...expected].sort())
      // Per-partition order is preserved: a copy keeps the key, so the input order per key survives.
      for (const partition of [0, 1]) {
        const seq = records.filter((r) => r.partition === partition).map((r) => r.value ?? "")
        const byKey = new Map<string, Array<string>>()
        for (const r of records.filter((r) => r.partition === partition)) {
          byKey.set(r.key ?? "", [...(byKey.get(r.key ?? "") ?? []), r.value ?? ""])
        }
        assert.ok(seq.length > 0)
        for (const list of byKey.values()) {
          const order = list.map((v) => {
            const [round, index] = v.slice(1).split("-").map(Number)
            return (round ?? 0) * 1000 + (index ?? 0)
          })
          assert.deepStrictEqual(order, [...order].sort((a, b) => a - b))
        }
      }
      const ends = yield* offsets(input)
      const committed = yield* groupOffsets(applicationId, input)
      for (const end of ends) assert.strictEqual(committed.get(end.partition), end.lastStable)
    }))
})
