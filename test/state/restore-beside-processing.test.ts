/**
 * Restores beside processing (issue 29, defect 1): a task restoring its
 * store holds up only its own partition. Running tasks keep processing and
 * committing meanwhile, as Kafka Streams restores beside processing.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Option } from "effect"
import { SkeinConfig } from "../../src/index.ts"
import * as Runner from "../../src/internal/runtime/runner.ts"
import { countOf } from "../helpers/counter.ts"
import { tempDir } from "../helpers/tempDir.ts"
import { brokers, caughtUp, createTopics, eventually, groupOffsets, offsets, produce, unique } from "../helpers/kafka.ts"

describe("restore beside processing", () => {
  it.scopedLive("partition 0 commits while partition 1's restore is held", () =>
    Effect.gen(function*() {
      const input = unique("beside-in")
      const output = unique("beside-out")
      const applicationId = unique("beside-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const counter = countOf(input, output)
      const start = (stateDir: string, held?: Deferred.Deferred<void>) =>
        Effect.gen(function*() {
          const stats = Runner.makeStats()
          const config = SkeinConfig.make({ brokers: brokers(), applicationId, stateDir })
          const fiber = yield* Effect.forkDaemon(Effect.scoped(Runner.run(counter, config, stats, {
            // Partition 1's restore waits for `held` before it reads (a reader stuck on its group, a huge changelog).
            reader: (_topic, reader) =>
              held === undefined ? reader : {
                ...reader,
                read: (permit, partition, range, apply) =>
                  partition === 1
                    ? Effect.zipRight(Deferred.await(held), reader.read(permit, partition, range, apply))
                    : reader.read(permit, partition, range, apply)
              }
          })))
          yield* Effect.addFinalizer(() => Fiber.interrupt(fiber))
          return { stats, fiber }
        })

      // A first instance fills both changelog partitions.
      yield* produce(input, [0, 1].flatMap((partition) => ["a", "b", "c"].map((key) => ({ key: `${partition}-${key}`, value: "1", partition }))))
      const first = yield* start(yield* tempDir("skein-beside-1-"))
      yield* caughtUp(applicationId, input)
      yield* Fiber.interrupt(first.fiber)

      // A second instance without local state restores both partitions; partition 1's restore is held.
      const held = yield* Deferred.make<void>()
      const second = yield* start(yield* tempDir("skein-beside-2-"), held)
      yield* produce(input, [0, 1].flatMap((partition) => ["a", "b"].map((key) => ({ key: `${partition}-${key}`, value: "1", partition }))))
      const ends = new Map((yield* offsets(input)).map((o) => [o.partition, o.lastStable]))
      yield* eventually(
        Effect.map(groupOffsets(applicationId, input), (committed) => (committed.get(0) ?? -1) >= ends.get(0)!),
        { timeout: 45_000, what: "partition 0's new records to be committed while partition 1 restores" }
      )
      // Partition 1's restore cannot have ended: it is still held.
      assert.isFalse(second.stats.restores.has(1), "partition 1's restore ended before it was released")
      assert.isTrue(second.stats.restores.has(0))
      yield* Deferred.succeed(held, undefined)
      yield* caughtUp(applicationId, input)
      assert.strictEqual(second.stats.restores.get(1)?.records, 3)
      const exit = yield* Fiber.poll(second.fiber)
      assert.isTrue(Option.isNone(exit) || Exit.isInterrupted(exit.value), "the runner keeps running")
    }), { timeout: 150_000 })

  it.scopedLive("a restore held when a rebalance revokes its partition is interrupted", () =>
    Effect.gen(function*() {
      const input = unique("moved-in")
      const output = unique("moved-out")
      const applicationId = unique("moved-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const counter = countOf(input, output)
      /** Set once instance A's restore of partition 1 is held, and once it is interrupted. */
      const holding = yield* Deferred.make<void>()
      const interrupted = yield* Deferred.make<void>()
      const start = (stateDir: string, hold: boolean) =>
        Effect.gen(function*() {
          const stats = Runner.makeStats()
          const config = SkeinConfig.make({ brokers: brokers(), applicationId, stateDir })
          const fiber = yield* Effect.forkDaemon(Effect.scoped(Runner.run(counter, config, stats, {
            // Instance A's restore of partition 1 never ends by itself.
            reader: (_topic, reader) =>
              !hold ? reader : {
                ...reader,
                read: (permit, partition, range, apply) =>
                  partition === 1
                    ? Effect.zipRight(
                      Deferred.succeed(holding, undefined),
                      Effect.onInterrupt(Effect.never, () => Deferred.succeed(interrupted, undefined))
                    )
                    : reader.read(permit, partition, range, apply)
              }
          })))
          yield* Effect.addFinalizer(() => Fiber.interrupt(fiber))
          return { stats, fiber }
        })
      // A first instance fills both changelog partitions, so that the next one restores them.
      yield* produce(input, [0, 1].flatMap((partition) => ["a", "b"].map((key) => ({ key: `${partition}-${key}`, value: "1", partition }))))
      const first = yield* start(yield* tempDir("skein-moved-first-"), false)
      yield* caughtUp(applicationId, input)
      yield* Fiber.interrupt(first.fiber)
      // Instance A, without local state: its restore of partition 1 is held.
      const a = yield* start(yield* tempDir("skein-moved-a-"), true)
      yield* Deferred.await(holding)
      // Instance B joins: the rebalance revokes A's partitions; A's held restore must stop.
      const b = yield* start(yield* tempDir("skein-moved-b-"), false)
      yield* Effect.timeout(Deferred.await(interrupted), "60 seconds").pipe(
        Effect.catchTag("TimeoutException", () => Effect.dieMessage("instance A's held restore was never interrupted"))
      )
      assert.isTrue(Option.isNone(yield* Fiber.poll(a.fiber)), "instance A keeps running")
      assert.isTrue(Option.isNone(yield* Fiber.poll(b.fiber)), "instance B keeps running")
    }), { timeout: 150_000 })
})
