import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Layer, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Timer, Topic, Transformer } from "../../src/index.ts"
import {
  caughtUp,
  createTopics,
  eventually,
  kafka,
  produce,
  produceRaw,
  readCommitted,
  startInstance,
  unique
} from "../helpers/kafka.ts"

/** The real clock moved by `offset` milliseconds (its sleeps unchanged). */
const shiftedClock = (offset: number): Clock.Clock => {
  const base = Clock.make()
  const nanos = BigInt(offset) * 1_000_000n
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => base.unsafeCurrentTimeMillis() + offset,
    unsafeCurrentTimeNanos: () => base.unsafeCurrentTimeNanos() + nanos,
    currentTimeMillis: Effect.sync(() => base.unsafeCurrentTimeMillis() + offset),
    currentTimeNanos: Effect.sync(() => base.unsafeCurrentTimeNanos() + nanos),
    sleep: (duration) => base.sleep(duration)
  }
}

describe("restore", () => {
  it.scopedLive("state, deletes included, is restored on another instance; aborted changelog writes never are", () =>
    Effect.gen(function*() {
      const input = unique("restore-in")
      const output = unique("restore-out")
      const applicationId = unique("restore-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Schema.Number) })
      const summer = Transformer.make({
        name: "sum",
        inputs: [In],
        state: Schema.Number,
        transform: (record, sum) => {
          if (record.value === "delete") return Effect.succeed({ state: Transformer.remove })
          const next = Option.getOrElse(sum, () => 0) + Number(record.value)
          return Effect.succeed({ emit: [Topic.record(Out, record.key, next)], state: Transformer.set(next) })
        }
      })
      const keys = Array.from({ length: 12 }, (_, i) => `key-${i}`)
      // First owner: every key gets 1 + 2 + 3; keys 0..3 are then deleted.
      yield* produce(input, keys.flatMap((key) => ["1", "2", "3"].map((value) => ({ key, value }))))
      yield* produce(input, keys.slice(0, 4).map((key) => ({ key, value: "delete" })))
      const first = yield* startInstance(summer, { applicationId, maxPollRecords: 7 })
      yield* caughtUp(applicationId, input)
      yield* first.stop

      // A crashed owner's transaction left open with changelog writes in it: the
      // next owner's fencing aborts it, and restoring must not see its values.
      const changelog = Transformer.changelogTopic(applicationId, summer)
      const zombies = yield* Effect.promise(() =>
        Promise.all([0, 1].map(async (partition) => {
          const producer = kafka().producer({ transactionalId: `${applicationId}-${partition}`, idempotent: true, maxInFlightRequests: 1 })
          await producer.connect()
          const transaction = await producer.transaction()
          await transaction.send({
            topic: changelog,
            messages: keys.map((key) => ({ key, value: "1000000", partition }))
          })
          return producer
        }))
      )

      // Another instance: its own stateDir, no local state, so it restores in full.
      const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), "skein-restore-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(elsewhere, { recursive: true, force: true })))
      const second = yield* startInstance(summer, { applicationId, maxPollRecords: 7, stateDir: elsewhere })
      yield* produce(input, keys.map((key) => ({ key, value: "10" })))
      yield* caughtUp(applicationId, input)
      assert.isAbove(second.stats.restoredRecords, 0)
      assert.deepStrictEqual([...second.stats.restores.values()].map((r) => r.mode), ["full", "full"])
      yield* Effect.promise(() => Promise.all(zombies.map((p) => p.disconnect())))

      const records = yield* readCommitted(output)
      const last = new Map<string, number>()
      for (const r of [...records].sort((a, b) => a.offset - b.offset)) last.set(r.key ?? "", Number(r.value))
      for (const [i, key] of keys.entries()) {
        // Deleted keys restart from nothing; the others continue from 6.
        assert.strictEqual(last.get(key), i < 4 ? 10 : 16, key)
      }
      assert.strictEqual(records.length, keys.length * 3 + keys.length)
    }))

  it.scopedLive("timers scheduled before a restart fire after it on another instance, each output committed once", () =>
    Effect.gen(function*() {
      const input = unique("timers-in")
      const output = unique("timers-out")
      const applicationId = unique("timers-app")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const hour = 3_600_000
      const reminders = Transformer.make({
        name: "reminders",
        inputs: [In],
        state: Schema.Number,
        transform: (record, seen) =>
          Effect.map(Clock.currentTimeMillis, (now) => ({
            state: Transformer.set(Option.getOrElse(seen, () => 0) + 1),
            timers: record.value === "schedule"
              ? [Timer.streamTime("s", record.timestamp + 60_000), Timer.wallClock("w", now + hour)]
              : []
          })),
        onTimer: (timer, seen) =>
          Effect.succeed({ emit: [Topic.record(Out, timer.key, `${timer.name} after ${Option.getOrElse(seen, () => 0)}`)] })
      })
      const t0 = Date.now() - 10 * 60_000
      const at = (key: string, value: string, timestamp: number) => ({ key, value, timestamp: String(timestamp) })

      // First owner: its clock a day behind, so its wall-clock timer (an hour later by it) is
      // a day away; no record moves stream time a minute past the first. Neither can fire here.
      yield* produceRaw(input, [at("k", "schedule", t0)])
      const first = yield* startInstance(reminders, { applicationId }, Layer.setClock(shiftedClock(-24 * hour)))
      yield* caughtUp(applicationId, input)
      yield* first.stop
      assert.deepStrictEqual(yield* readCommitted(output), [])

      // Another instance, no local state: the timers are restored from the changelog after
      // fencing. The wall-clock timer is due at once; a record 2 minutes later fires the other.
      const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), "skein-timers-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(elsewhere, { recursive: true, force: true })))
      yield* produceRaw(input, [at("other", "tick", t0 + 120_000)])
      const second = yield* startInstance(reminders, { applicationId, stateDir: elsewhere })
      yield* caughtUp(applicationId, input)
      assert.deepStrictEqual([...second.stats.restores.values()].map((r) => r.mode), ["full"])
      yield* eventually(Effect.map(readCommitted(output), (records) => records.length >= 2), { what: "both timers to fire" })
      yield* second.stop

      // A third owner, again from the changelog: the fired timers were deleted in their
      // transactions, so nothing fires twice.
      const third = yield* startInstance(reminders, { applicationId, stateDir: fs.mkdtempSync(path.join(elsewhere, "third-")) })
      yield* produceRaw(input, [at("other", "tick", t0 + 240_000)])
      yield* caughtUp(applicationId, input)
      yield* third.stop

      const fired = [...(yield* readCommitted(output))].sort((a, b) => a.offset - b.offset)
      assert.deepStrictEqual(fired.map((r) => [r.key, r.value]), [["k", "w after 1"], ["k", "s after 1"]])
      // The stream-time timer's output carries the stream time it fired at: the later record's.
      assert.strictEqual(fired[1]?.timestamp, t0 + 120_000)
    }))
})
