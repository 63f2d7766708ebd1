import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Health, Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, eventually, produce, startInstance, unique } from "../helpers/kafka.ts"

// Issue 29, defect 13 (part): the lag and the per-partition series of a partition that moved to
// another instance stayed in this instance's health and metrics: it reported the lag of
// partitions it no longer has. A new assignment drops the series of the partitions it moved away.
describe("a partition that moves to another instance", () => {
  it.scopedLive("leaves this instance's lag and per-partition series", () =>
    Effect.gen(function*() {
      const input = unique("moved-in")
      const output = unique("moved-out")
      const applicationId = unique("moved-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 1 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const copy = Transformer.stateless({
        name: "moved-copy",
        inputs: [In],
        transform: (record) => Effect.succeed({ emit: [Topic.record(Out, record.key, record.value)] })
      })
      yield* produce(input, [0, 1].flatMap((partition) =>
        Array.from({ length: 5 }, (_, i) => ({ key: `k${partition}-${i}`, value: "v", partition }))
      ))
      const first = yield* startInstance(copy, { applicationId })
      yield* caughtUp(applicationId, input)
      yield* eventually(Effect.sync(() => first.stats.lag.size === 2 && first.stats.partitionCounts.size === 2), {
        what: "the first instance's lag and counts of both partitions"
      })
      const second = yield* startInstance(copy, { applicationId })
      yield* eventually(
        Effect.sync(() => first.stats.assigned.size === 1 && second.stats.assigned.size === 1),
        { what: "one partition's task running on each instance", timeout: 60_000 }
      )
      const [kept] = [...first.stats.assigned]
      const snapshot = yield* Health.snapshot(first.stats)
      const exposition = Health.prometheus(first.stats)
      const moved = 1 - (kept ?? 0)
      console.log(`first keeps ${kept}; lag ${JSON.stringify(snapshot.lag)}; partitions ${JSON.stringify(snapshot.partitions)}`)
      assert.deepStrictEqual(
        {
          lag: snapshot.lag.partitions.map((p) => p.partition),
          partitions: snapshot.partitions.map((p) => p.partition),
          movedSeries: exposition.split("\n").filter((line) => line.includes(`partition="${moved}"`))
        },
        { lag: [kept], partitions: [kept], movedSeries: [] },
        "the health and metrics of the first instance show only the partition it still has"
      )
    }), { timeout: 120_000 })
})
