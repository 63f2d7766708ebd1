import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, Schema } from "effect"
import { Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, produce, readCommitted, sleep, startInstance, unique } from "../helpers/kafka.ts"

describe("rebalance", () => {
  it.scopedLive("instances join and leave while records flow: output exactly once, state exact, no teardown mid-transaction", () =>
    Effect.gen(function*() {
      const input = unique("reb-in")
      const output = unique("reb-out")
      const applicationId = unique("reb-app")
      yield* createTopics([{ name: input, partitions: 6 }, { name: output, partitions: 6 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Topic.json(Schema.Number) })
      const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Schema.Tuple(Schema.Number, Schema.Number)) })
      // Emits (input value, running count): a duplicate or a lost state update shows up in both.
      const counter = Transformer.make({
        name: "count",
        inputs: [In],
        state: Schema.Number,
        transform: (record, count) => {
          const next = Option.getOrElse(count, () => 0) + 1
          return Effect.succeed({
            emit: [Topic.record(Out, record.key, [record.value, next] as const)],
            state: Transformer.set(next)
          })
        }
      })
      const keys = 60
      const total = 3000
      const driver = yield* Effect.fork(Effect.gen(function*() {
        for (let start = 0; start < total; start += 100) {
          yield* produce(input, Array.from({ length: 100 }, (_, i) => ({
            key: `k${(start + i) % keys}`,
            value: JSON.stringify(start + i)
          })))
          yield* sleep(150)
        }
      }))
      const options = { applicationId, maxPollRecords: 50 }
      const one = yield* startInstance(counter, options)
      yield* sleep(1500)
      const two = yield* startInstance(counter, options)
      yield* sleep(2000)
      const three = yield* startInstance(counter, options)
      yield* sleep(2000)
      yield* two.stop
      yield* sleep(1500)
      yield* three.stop
      yield* Fiber.join(driver)
      yield* caughtUp(applicationId, input, 120_000)
      assert.ok(Option.isNone(yield* one.exit), "the surviving instance is still running")

      const records = yield* readCommitted(output)
      const values = records.map((r) => (JSON.parse(r.value ?? "[]") as [number, number])[0])
      assert.strictEqual(new Set(values).size, total, "no record lost")
      assert.strictEqual(values.length, total, "no record duplicated")
      // The running counts of each key are exactly 1..n in input order.
      for (let k = 0; k < keys; k++) {
        const seq = records
          .filter((r) => r.key === `k${k}`)
          .map((r) => JSON.parse(r.value ?? "[]") as [number, number])
          .sort((a, b) => a[0] - b[0])
        assert.deepStrictEqual(seq.map((s) => s[1]), seq.map((_, i) => i + 1), `counts of k${k}`)
      }
      for (const instance of [one, two, three]) {
        assert.strictEqual(instance.stats.teardownsWithTransactionInFlight, 0)
      }
      assert.isAbove(one.stats.tasksStopped, 0, "the first instance went through rebalances")
    }), 300_000)
})
