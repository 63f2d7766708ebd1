import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

const Seen = Schema.Struct({ values: Schema.Array(Schema.String), marker: Schema.String })

describe("batch mechanics", () => {
  it.scopedLive("caps batches; with key concurrency, orders same-key records and runs keys concurrently; isolates state copies; dedupes changelog writes", () =>
    Effect.gen(function*() {
      const input = unique("batch-in")
      const output = unique("batch-out")
      const applicationId = unique("batch-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String, keyConcurrency: true })
      const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Seen) })

      // Two "rendezvous" keys on the same partition: each waits until the other
      // has started. Run serially, they would never meet and the transform fails.
      let started = 0
      const rendezvous = Effect.gen(function*() {
        started++
        const deadline = Date.now() + 10_000
        while (started < 2) {
          if (Date.now() > deadline) return yield* Effect.fail("keys did not run concurrently" as const)
          yield* Effect.sleep("10 millis")
        }
      })

      const transformer = Transformer.make({
        name: "seen",
        inputs: [In],
        state: Seen,
        transform: (record, state) =>
          Effect.gen(function*() {
            if (record.key === "meet-1" || record.key === "meet-2") yield* rendezvous
            const current = Option.getOrElse(state, () => ({ values: [] as ReadonlyArray<string>, marker: "clean" }))
            if (record.value.startsWith("mutate")) {
              // Mutating the private copy without a state change must leak nowhere.
              ;(current as { marker: string }).marker = "leaked"
              return { emit: [Topic.record(Out, record.key, current)] }
            }
            const next = { values: [...current.values, record.value], marker: current.marker }
            return { emit: [Topic.record(Out, record.key, next)], state: Transformer.set(next) }
          })
      })

      // All in the topic before the first fetch, so "hot" lands in one batch.
      const hot = Array.from({ length: 10 }, (_, i) => ({ key: "hot", value: `h${i}`, partition: 0 }))
      const mutations = [
        { key: "m", value: "v1", partition: 1 },
        { key: "m", value: "mutate", partition: 1 },
        { key: "m", value: "v2", partition: 1 }
      ]
      const meet = [{ key: "meet-1", value: "x", partition: 1 }, { key: "meet-2", value: "y", partition: 1 }]
      yield* produce(input, [...hot, ...mutations, ...meet])
      const bulk = Array.from({ length: 600 }, (_, i) => ({ key: `k${i % 50}`, value: `b${i}`, partition: i % 2 }))
      yield* produce(input, bulk)

      const instance = yield* startInstance(transformer, { applicationId, maxPollRecords: 40 })
      yield* caughtUp(applicationId, input)

      // The cap holds.
      assert.isAtMost(instance.stats.maxBatchRecords, 40)
      assert.isAtLeast(instance.stats.batches, Math.ceil(615 / 40))

      const records = yield* readCommitted(output)
      const byKey = (key: string) =>
        records.filter((r) => r.key === key).sort((a, b) => a.offset - b.offset).map((r) =>
          JSON.parse(r.value ?? "null") as { values: Array<string>; marker: string }
        )
      // Same-key records see each other's state, in offset order.
      const hotSeen = byKey("hot")
      assert.deepStrictEqual(hotSeen.map((s) => s.values.length), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
      assert.deepStrictEqual(hotSeen[9]?.values, hot.map((h) => h.value))
      // A mutation without a state change does not leak into later records.
      const mSeen = byKey("m")
      assert.deepStrictEqual(mSeen.map((s) => s.marker), ["clean", "leaked", "clean"])
      assert.deepStrictEqual(mSeen[2]?.values, ["v1", "v2"])
      // Different keys ran concurrently (the rendezvous completed).
      assert.strictEqual(byKey("meet-1").length, 1)
      assert.strictEqual(byKey("meet-2").length, 1)

      // Ten updates of "hot" in one batch wrote one changelog record.
      const changelog = yield* readCommitted(Transformer.changelogTopic(applicationId, transformer))
      const hotWrites = changelog.filter((r) => r.key === "hot")
      assert.strictEqual(hotWrites.length, 1)
      assert.deepStrictEqual(JSON.parse(hotWrites[0]?.value ?? "null").values, hot.map((h) => h.value))
    }))

  it.scopedLive("a stateless transformer opens no store and creates no changelog", () =>
    Effect.gen(function*() {
      const input = unique("sl-in")
      const output = unique("sl-out")
      const applicationId = unique("sl-app")
      const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-stateless-"))
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const upper = Transformer.stateless({
        name: "upper",
        inputs: [In],
        transform: (record) => Effect.succeed({ emit: [Topic.record(Out, record.key, record.value.toUpperCase())] })
      })
      yield* produce(input, Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: `v${i}` })))
      yield* startInstance(upper, { applicationId, stateDir })
      yield* caughtUp(applicationId, input)
      const records = yield* readCommitted(output)
      assert.strictEqual(records.length, 20)
      assert.deepStrictEqual(fs.readdirSync(stateDir), [])
      const { kafka } = yield* Effect.promise(() => import("../helpers/kafka.ts"))
      const topics = yield* Effect.promise(async () => {
        const admin = kafka().admin()
        await admin.connect()
        const list = await admin.listTopics()
        await admin.disconnect()
        return list
      })
      assert.notInclude(topics, Transformer.changelogTopic(applicationId, upper))
    }))
})
