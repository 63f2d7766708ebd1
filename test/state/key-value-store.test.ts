/**
 * A transformer's KeyValueStore on a real broker (issue 31, item 2): its
 * entries commit with the task's transaction, a fenced zombie's writes are
 * never read (not by the task that restarts after the fencing, not by a
 * later restore), and the store survives restarts: restored in full from
 * its changelog by an instance without local state (as after a crash that
 * lost the disk), and from the kept LevelDB store's tail by one with it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { KeyValueStore, Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, eventually, kafka, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

describe("KeyValueStore on a broker", () => {
  it.scopedLive("a fenced zombie's writes are not visible; the store survives a restart without and with local state", () =>
    Effect.gen(function*() {
      const input = unique("kv-in")
      const output = unique("kv-out")
      const applicationId = unique("kv-app")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const Entries = KeyValueStore.make({ name: "entries", key: Schema.String, value: Schema.String })
      const fenceNow = yield* Deferred.make<void>()
      const fenced = yield* Deferred.make<void>()
      let zombieCalls = 0
      const transformer = Transformer.make({
        name: "kv",
        inputs: [In],
        state: Schema.Null,
        stores: [Entries],
        transform: (record) =>
          Effect.gen(function*() {
            const [op, key = "", value = ""] = record.value.split(" ")
            if (op === "put") {
              yield* Entries.put(key, value)
              return { emit: [Topic.record(Out, record.key, `put ${key}`)] }
            }
            if (op === "zombie") {
              zombieCalls++
              const before = Option.getOrElse(yield* Entries.get("z"), () => "none")
              if (zombieCalls === 1) {
                // Written, then the task is fenced before its transaction commits.
                yield* Entries.put("z", "zombie")
                yield* Entries.put("a", "zombie")
                yield* Deferred.succeed(fenceNow, undefined)
                yield* Deferred.await(fenced)
              } else {
                yield* Entries.put("z", "second")
              }
              return { emit: [Topic.record(Out, record.key, `z was ${before}`)] }
            }
            const all = yield* Entries.all
            return { emit: [Topic.record(Out, record.key, all.map((e) => `${e.key}=${e.value}`).join(","))] }
          })
      })
      const dirs = [fs.mkdtempSync(path.join(os.tmpdir(), "skein-kv-a-")), fs.mkdtempSync(path.join(os.tmpdir(), "skein-kv-b-"))]
      yield* Effect.addFinalizer(() => Effect.sync(() => dirs.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true }))))
      const answers = Effect.map(readCommitted(output), (records) => [...records].sort((a, b) => a.offset - b.offset).map((r) => r.value))

      const first = yield* startInstance(transformer, { applicationId, stateDir: dirs[0]! })
      yield* produce(input, [{ key: "c", value: "put a 1" }, { key: "c", value: "put b 2" }, { key: "c", value: "zombie" }])
      yield* Deferred.await(fenceNow)
      // A newer owner of task 0's transactional id: the zombie's transaction (with its store writes) is fenced.
      yield* Effect.promise(async () => {
        const producer = kafka().producer({ transactionalId: `${applicationId}-0`, idempotent: true, maxInFlightRequests: 1 })
        await producer.connect()
        const transaction = await producer.transaction()
        await transaction.abort()
        await producer.disconnect()
      })
      yield* Deferred.succeed(fenced, undefined)
      yield* eventually(Effect.sync(() => first.stats.migrations > 0 && zombieCalls >= 2), { what: "the task to restart after its fencing" })
      yield* produce(input, [{ key: "c", value: "all" }])
      yield* caughtUp(applicationId, input)
      yield* first.stop
      const settled = "a=1,b=2,z=second"
      assert.deepStrictEqual(yield* answers, ["put a", "put b", "z was none", settled])

      // No local state: the whole store comes back from its changelog, without the zombie's writes.
      const second = yield* startInstance(transformer, { applicationId, stateDir: dirs[1]! })
      yield* produce(input, [{ key: "c", value: "all" }])
      yield* caughtUp(applicationId, input)
      assert.deepStrictEqual([...second.stats.restores.values()].map((r) => r.mode), ["full"])
      yield* second.stop

      // The first instance's kept store: only the changelog's tail is read.
      const third = yield* startInstance(transformer, { applicationId, stateDir: dirs[0]! })
      yield* produce(input, [{ key: "c", value: "put b 3" }, { key: "c", value: "all" }])
      yield* caughtUp(applicationId, input)
      assert.deepStrictEqual([...third.stats.restores.values()].map((r) => r.mode), ["tail"])
      yield* third.stop
      assert.deepStrictEqual((yield* answers).slice(4), [settled, "put b", "a=1,b=3,z=second"])
    }), { timeout: 120_000 })
})
