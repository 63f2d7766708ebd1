import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Option, Schema } from "effect"
import { Runner, SkeinConfig, Topic, Transformer } from "../../src/index.ts"
import { brokers, caughtUp, createTopics, kafka, produce, readCommitted, unique } from "../helpers/kafka.ts"

const sessionTimeout = Duration.seconds(6) // the broker's group.min.session.timeout.ms (Kafka's default)
const handlerTime = Duration.times(sessionTimeout, 3)

/** The group's state and member ids, read with kafkajs's admin (not through Skein). */
const describeGroup = (groupId: string) =>
  Effect.promise(async () => {
    const admin = kafka().admin()
    await admin.connect()
    try {
      const { groups: [group] } = await admin.describeGroups([groupId])
      return { state: group?.state ?? "Unknown", members: (group?.members ?? []).map((m) => m.memberId) }
    } finally {
      await admin.disconnect()
    }
  })

describe("long handler", () => {
  it.scopedLive("a handler running 3x the session timeout does not trigger a rebalance", () =>
    Effect.gen(function*() {
      const input = unique("long-in")
      const output = unique("long-out")
      const applicationId = unique("long-app")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const slowRuns: Array<{ completed: boolean }> = []
      const copy = Transformer.stateless({
        name: "copy",
        inputs: [In],
        transform: (record) =>
          Effect.gen(function*() {
            if (record.value === "slow") {
              const run = { completed: false }
              slowRuns.push(run)
              yield* Effect.sleep(handlerTime)
              run.completed = true
            }
            return { emit: [Topic.record(Out, record.key, record.value)] }
          })
      })
      const stats = Runner.makeStats()
      const fiber = yield* Effect.forkScoped(
        Runner.runWithStats(copy, stats).pipe(
          Effect.provide(SkeinConfig.layer({
            applicationId,
            brokers: brokers(),
            sessionTimeout,
            heartbeatInterval: Duration.seconds(1),
            // Longer than the handler: even a rebalance would wait for the batch instead of evicting the member.
            rebalanceTimeout: Duration.seconds(60)
          }))
        )
      )

      // Warm up: the task is running and the group is stable before the slow record.
      yield* produce(input, [{ key: "k", value: "warm-up" }])
      yield* caughtUp(applicationId, input)
      const before = { tasksStarted: stats.tasksStarted, rebalances: stats.rebalances, group: yield* describeGroup(applicationId) }
      assert.strictEqual(before.tasksStarted, 1)
      assert.deepStrictEqual(before.group.state, "Stable")
      assert.strictEqual(before.group.members.length, 1)

      // One batch with the slow record between fast ones.
      yield* produce(input, ["fast-1", "fast-2", "slow", "fast-3", "fast-4"].map((value) => ({ key: "k", value })))
      yield* caughtUp(applicationId, input, 90_000)
      // A member evicted during the batch would rejoin when the batch returns,
      // before fetching again: a record processed after it proves the rejoin, if any, is over.
      yield* produce(input, [{ key: "k", value: "after" }])
      yield* caughtUp(applicationId, input)

      assert.ok(Option.isNone(yield* Fiber.poll(fiber)), "the runner is still running")
      assert.strictEqual(slowRuns.length, 1, "the slow record was processed once")
      const [slow] = slowRuns
      // Not a wall-clock check (timers may fire a millisecond early): the whole 3x-session-timeout sleep ran.
      assert.isTrue(slow?.completed, "the handler slept the whole 3x the session timeout, uninterrupted")
      const values = (yield* readCommitted(output)).map((r) => r.value)
      assert.deepStrictEqual(values, ["warm-up", "fast-1", "fast-2", "slow", "fast-3", "fast-4", "after"])
      assert.strictEqual(values.filter((v) => v === "slow").length, 1, "the slow record's output is committed exactly once")
      assert.strictEqual(stats.rebalances, before.rebalances, "no rebalance")
      assert.strictEqual(stats.rebalances, 0)
      assert.strictEqual(stats.tasksStarted, before.tasksStarted, "the task was not torn down and restarted")
      assert.strictEqual(stats.tasksStopped, 0)
      assert.strictEqual(stats.migrations, 0)
      // An evicted member rejoins with a new member id (and a new generation).
      const after = yield* describeGroup(applicationId)
      assert.deepStrictEqual(after, before.group, "the same member is still in the stable group")
    }), 180_000)
})
