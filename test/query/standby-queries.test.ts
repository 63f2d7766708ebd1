/**
 * Standby reads on a real broker (KIP-535's stale stores): two instances
 * with a standby of every partition; a key asked at the instance that does
 * not run it, told not to forward and allowing a standby, is answered from
 * that instance's standby copy with its lag, and once the copy has caught
 * up its value is the committed count; without `allowStandby` it is
 * NotHere naming the owner.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import { Topic, Transformer } from "../../src/index.ts"
import { partitionOf } from "../../src/internal/query/partitioner.ts"
import { caughtUp, createTopics, eventually, produce, startInstance, unique } from "../helpers/kafka.ts"
import { tempDir } from "../helpers/tempDir.ts"

const partitions = 2

describe("standby reads on a broker", () => {
  it.scopedLive("allowStandby=true at the instance keeping the standby: the committed value, with the standby's lag", () =>
    Effect.gen(function*() {
      const input = unique("qs-in")
      const output = unique("qs-out")
      const applicationId = unique("qs-app")
      yield* createTopics([{ name: input, partitions }, { name: output, partitions }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Schema.Number) })
      const transformer = Transformer.make({
        name: "count",
        inputs: [In],
        state: Schema.Number,
        transform: (record, count) => {
          const next = Option.getOrElse(count, () => 0) + 1
          return Effect.succeed({ emit: [Topic.record(Out, record.key, next)], state: Transformer.set(next) })
        }
      })
      const settings = { applicationId, queryPort: 0, standbyReplicas: 1 }
      const a = yield* startInstance(transformer, { ...settings, stateDir: yield* tempDir("skein-qs-a-") })
      const b = yield* startInstance(transformer, { ...settings, stateDir: yield* tempDir("skein-qs-b-") })
      yield* eventually(
        Effect.sync(() =>
          a.stats.assigned.size === 1 && b.stats.assigned.size === 1 && a.stats.standbys.size === 1 && b.stats.standbys.size === 1
        ),
        { what: "one active task and one standby on each instance" }
      )
      const keys = ["a", "b", "c", "d", "e", "f"]
      yield* produce(input, keys.flatMap((key, i) => Array.from({ length: i + 1 }, () => ({ key, value: "x" }))))
      yield* caughtUp(applicationId, input)
      const ask = (at: typeof a, path: string) =>
        Effect.promise(async () => {
          const response = await fetch(`http://127.0.0.1:${at.stats.queryPort}${path}`, { headers: { "x-skein-forward": "no" } })
          return { status: response.status, json: await response.json() as Record<string, unknown> }
        })
      for (const [i, key] of keys.entries()) {
        const partition = partitionOf(key, partitions)
        const [owner, other] = a.stats.assigned.has(partition) ? [a, b] : [b, a]
        assert.strictEqual((yield* ask(owner, `/state/count/${key}`)).json.value, i + 1, key)
        const notHere = yield* ask(other, `/state/count/${key}`)
        assert.deepStrictEqual([notHere.status, notHere.json.error, notHere.json.owner], [404, "NotHere", `127.0.0.1:${owner.stats.queryPort}`])
        // The standby copy catches up with the changelog: then it answers the committed count, lag 0.
        yield* eventually(
          Effect.map(ask(other, `/state/count/${key}?allowStandby=true`), (answer) => {
            const standby = answer.json.standby
            return answer.status === 200 && answer.json.value === i + 1 &&
              typeof standby === "object" && standby !== null && "lag" in standby && standby.lag === 0
          }),
          { what: `the standby's answer for ${key}` }
        )
      }
    }), { timeout: 60_000 })
})
