/**
 * Teardown happens only under the batch lock (issue 29, defect 12): when the
 * task manager's scope closes while a poll holds the lock (a transaction in
 * flight), its tasks are torn down after that poll ends, never during it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Option, Queue, Scope } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SkeinConfig } from "../../src/index.ts"
import * as Admin from "../../src/internal/kafka/admin.ts"
import * as Client from "../../src/internal/kafka/client.ts"
import * as Consumer from "../../src/internal/kafka/consumer.ts"
import * as LocalStores from "../../src/internal/runtime/LocalStores.ts"
import * as PollBuffer from "../../src/internal/runtime/PollBuffer.ts"
import { makeStats } from "../../src/internal/runtime/RunnerStats.ts"
import * as TaskManager from "../../src/internal/runtime/TaskManager.ts"
import { brokers, createTopics, eventually, unique } from "../helpers/kafka.ts"

describe("teardown under the batch lock", () => {
  it.scopedLive("closing the manager's scope during a poll tears its task down only after the poll", () =>
    Effect.gen(function*() {
      const input = unique("teardown-in")
      const applicationId = unique("teardown-app")
      yield* createTopics([{ name: input, partitions: 1 }])
      const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-teardown-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(stateDir, { recursive: true, force: true })))
      const config = SkeinConfig.make({ brokers: brokers(), applicationId, stateDir })
      const kafka = yield* Client.makeKafka(config)
      const admin = yield* Admin.make(kafka)
      const real = yield* Consumer.make(kafka, {
        groupId: applicationId,
        topics: [input],
        sessionTimeout: config.sessionTimeout,
        rebalanceTimeout: config.rebalanceTimeout,
        heartbeatInterval: config.heartbeatInterval
      })
      /** What happened, in order: the poll's end and the task's teardown (its partition paused). */
      const events: Array<string> = []
      const consumer: Consumer.GroupConsumer = {
        ...real,
        pause: (partitions) => Effect.zipRight(Effect.sync(() => events.push("task torn down")), real.pause(partitions))
      }
      const stats = makeStats()
      const managerScope = yield* Scope.make()
      const manager = yield* Scope.extend(
        TaskManager.make({
          config,
          stats,
          buffer: PollBuffer.make(),
          context: {
            kafka,
            admin,
            consumer,
            applicationId,
            transformer: "teardown",
            inputTopics: [input],
            changelog: Option.none(),
            runs: Option.none(),
            storeDir: stateDir,
            transactionTimeout: Duration.seconds(30),
            processingGuarantee: "exactly-once",
            maxMessageBytes: config.maxMessageBytes,
            limitOf: () => undefined,
            onRestoreProgress: () => undefined,
            localStores: LocalStores.make(),
            onCheckpointLag: () => undefined
          }
        }),
        managerScope
      )
      const assigned = yield* Effect.repeat(Queue.take(real.events), { until: (event) => event._tag === "Assigned" })
      if (assigned._tag !== "Assigned") return assert.fail("no assignment")
      yield* manager.assign(assigned.generation, [0])
      yield* manager.startDue
      yield* eventually(Effect.sync(() => Option.isSome(manager.task(0))), { what: "task 0 to start" })

      // A poll of task 0 holds the lock: its work (a transaction in flight) waits for `release`.
      const inPoll = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const poll = yield* Effect.fork(manager.processTask(Option.getOrThrow(manager.task(0)), (task) =>
        Effect.uninterruptible(Effect.gen(function*() {
          yield* Deferred.succeed(inPoll, undefined)
          yield* Deferred.await(release)
          events.push("poll ended")
          return { _tag: "Committed" as const, partition: task.partition }
        }))))
      yield* Deferred.await(inPoll)
      const closing = yield* Effect.fork(Scope.close(managerScope, Exit.void))
      // Until the closing fiber first waits (for the lock, or on something it tears down).
      while ((yield* Fiber.status(closing))._tag !== "Suspended" && Option.isNone(yield* Fiber.poll(closing))) {
        yield* Effect.yieldNow()
      }
      const whileInPoll = [...events]
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(poll)
      yield* Fiber.join(closing)
      assert.deepStrictEqual({ whileInPoll, all: events }, { whileInPoll: [], all: ["poll ended", "task torn down"] })
    }), { timeout: 90_000 })
})
