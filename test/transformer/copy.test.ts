import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Schema } from "effect"
import { Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, eventually, groupOffsets, offsets, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

// Kafka Streams' EosIntegrationTest "copy with restarts": a stateless copy over
// two partitions, stopped and restarted twice mid-stream. Mid-stream by construction, and
// checked: in the first two rounds one record's handler never finishes (its batch cannot
// commit), the stop comes once some of the round is committed, and the committed input at the
// stop is more than before the round and less than what was produced.
describe("stateless copy with restarts", () => {
  it.scopedLive("output equals the input exactly once and committed offsets reach the end", () =>
    Effect.gen(function*() {
      const input = unique("copy-in")
      const output = unique("copy-out")
      const applicationId = unique("copy-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      // The record whose handler hangs until the instance is stopped (interrupted then).
      const hanging = new Set<string>()
      const copy = Transformer.stateless({
        name: "copy",
        inputs: [In],
        transform: (record) =>
          hanging.has(record.value)
            ? Effect.never
            : Effect.succeed({ emit: [Topic.record(Out, record.key, record.value)] })
      })
      const committedTotal = Effect.map(
        groupOffsets(applicationId, input),
        (committed) => [...committed.values()].reduce((n, o) => n + Math.max(0, o), 0)
      )

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
        const before = yield* committedTotal
        // The 76th record of partition 0: the batches of 50 before it commit, its own cannot.
        if (round < 2) hanging.add(`r${round}-150`)
        const instance = yield* startInstance(copy, { applicationId, maxPollRecords: 50, shutdownGrace: Duration.millis(500) })
        yield* produceRound(round)
        if (round === 2) {
          // Run to the end in the last round.
          yield* caughtUp(applicationId, input)
          yield* instance.stop
          continue
        }
        // Stop mid-stream in the first two rounds: once some of it is committed.
        yield* eventually(Effect.map(committedTotal, (n) => n > before), { what: `round ${round}: a first commit` })
        yield* instance.stop
        hanging.clear()
        const atStop = yield* committedTotal
        process.stderr.write(`copy: round ${round} stopped with ${atStop} of ${(round + 1) * 200} input records committed\n`)
        assert.isAbove(atStop, before, `round ${round}: something was committed before the stop`)
        assert.isBelow(atStop, (round + 1) * 200, `round ${round}: the stop was mid-stream`)
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
