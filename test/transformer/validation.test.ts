import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Schema } from "effect"
import { Runner, SkeinConfig, SkeinError, Topic, Transformer } from "../../src/index.ts"
import { brokers, createTopics, unique } from "../helpers/kafka.ts"

const config = (applicationId: string) =>
  Layer.succeed(SkeinConfig.SkeinConfig, SkeinConfig.make({ applicationId, brokers: brokers() }))

const counter = (inputs: ReadonlyArray<string>) =>
  Transformer.make({
    name: "count",
    inputs: inputs.map((name) => Topic.make({ name, key: Schema.String, value: Schema.String })),
    state: Schema.Number,
    transform: () => Effect.succeed({})
  })

describe("startup validation", () => {
  it.live("input topics with unequal partition counts fail with PartitionCountMismatch", () =>
    Effect.gen(function*() {
      const a = unique("val-a")
      const b = unique("val-b")
      yield* createTopics([{ name: a, partitions: 2 }, { name: b, partitions: 3 }])
      const error = yield* Effect.flip(Runner.run(counter([a, b])).pipe(Effect.provide(config(unique("val-app")))))
      assert.ok(error instanceof SkeinError.PartitionCountMismatch)
      assert.include(error.message, `${a}=2`)
      assert.include(error.message, `${b}=3`)
    }))

  it.live("an existing changelog with another partition count fails with ChangelogPartitionMismatch", () =>
    Effect.gen(function*() {
      const input = unique("val-in")
      const applicationId = unique("val-app")
      const transformer = counter([input])
      const changelog = Transformer.changelogTopic(applicationId, transformer)
      yield* createTopics([{ name: input, partitions: 2 }, { name: changelog, partitions: 4 }])
      const error = yield* Effect.flip(Runner.run(transformer).pipe(Effect.provide(config(applicationId))))
      assert.ok(error instanceof SkeinError.ChangelogPartitionMismatch)
      assert.include(error.message, changelog)
      assert.include(error.message, "4 partitions")
      assert.include(error.message, "have 2")
    }))

  it.live("a missing input topic fails with TopicNotFound naming it", () =>
    Effect.gen(function*() {
      const missing = unique("val-missing")
      const error = yield* Effect.flip(Runner.run(counter([missing])).pipe(Effect.provide(config(unique("val-app")))))
      assert.ok(error instanceof SkeinError.TopicNotFound)
      assert.include(error.message, missing)
    }))

  it.live("a revocation grace not below the rebalance timeout fails at startup with the fix in the message", () =>
    Effect.gen(function*() {
      const input = unique("val-in")
      yield* createTopics([{ name: input, partitions: 1 }])
      const layer = SkeinConfig.layer({
        applicationId: unique("val-app"),
        brokers: brokers(),
        revocationGrace: Duration.seconds(30),
        rebalanceTimeout: Duration.seconds(30)
      })
      const error = yield* Effect.flip(Runner.run(counter([input])).pipe(Effect.provide(layer)))
      assert.ok(error instanceof SkeinError.ConfigurationError)
      assert.include(error.message, "revocationGrace")
      assert.include(error.message, "SKEIN_REVOCATION_GRACE")
    }))

  it.live("a negative or fractional standbyReplicas fails at startup naming the setting and the fix", () =>
    Effect.gen(function*() {
      const input = unique("val-in")
      yield* createTopics([{ name: input, partitions: 1 }])
      for (const standbyReplicas of [-1, 1.5]) {
        const layer = SkeinConfig.layer({ applicationId: unique("val-app"), brokers: brokers(), standbyReplicas })
        const error = yield* Effect.flip(Runner.run(counter([input])).pipe(Effect.provide(layer)))
        assert.ok(error instanceof SkeinError.ConfigurationError)
        assert.include(error.message, `standbyReplicas must be an integer of at least 0, got ${standbyReplicas}`)
        assert.include(error.message, "SKEIN_STANDBY_REPLICAS")
      }
    }))

  it.live("a runtime runs once: the stats of a finished run cannot start another", () =>
    Effect.gen(function*() {
      const input = unique("val-in")
      yield* createTopics([{ name: input, partitions: 1 }])
      const stats = Runner.makeStats()
      const first = yield* Effect.fork(Runner.runWithStats(counter([input]), stats).pipe(Effect.provide(config(unique("val-app")))))
      while (stats.phase !== "running") yield* Effect.sleep("50 millis")
      yield* Fiber.interrupt(first)
      assert.strictEqual(stats.phase, "stopped")
      const error = yield* Effect.flip(Runner.runWithStats(counter([input]), stats).pipe(Effect.provide(config(unique("val-app")))))
      assert.ok(error instanceof SkeinError.ConfigurationError)
      assert.include(error.message, "a runtime runs once")
    }))
})
