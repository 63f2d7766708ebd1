import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Schema } from "effect"
import { expectTypeOf } from "vitest"
import { Runner, SkeinConfig, SkeinError, Topic, Transformer } from "../../src/index.ts"
import {
  brokers,
  caughtUp,
  createTopics,
  describeGroup,
  eventually,
  groupOffsets,
  offsets,
  produce,
  readCommitted,
  unique
} from "../helpers/kafka.ts"

class Boom extends Schema.TaggedError<Boom>()("Boom", { value: Schema.String }) {}

const get = (port: number, path: string) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`)
    return { status: response.status, body: await response.text() }
  })

/** Starts `Runner.runAllWithStats` in this process; interrupted with the test's scope. */
const startAll = <const Ts extends ReadonlyArray<Transformer.Any>>(
  transformers: Ts,
  options: Omit<SkeinConfig.Options, "brokers">,
  runOptions: Runner.RunAllOptions = {}
) =>
  Effect.gen(function*() {
    const stats = transformers.map(() => Runner.makeStats()) as Runner.StatsOf<Ts>
    const config = SkeinConfig.make({ brokers: brokers(), ...options })
    const fiber = yield* Effect.forkDaemon(
      Runner.runAllWithStats(transformers, stats, runOptions).pipe(
        Effect.provide(Layer.succeed(SkeinConfig.SkeinConfig, config))
      ) as Effect.Effect<never, SkeinError.RunnerError | Transformer.ErrorOf<Ts[number]>>
    )
    yield* Effect.addFinalizer(() => Fiber.interrupt(fiber))
    return { stats: stats as ReadonlyArray<Runner.Stats>, fiber, stop: Effect.asVoid(Fiber.interrupt(fiber)) }
  })

/** What a transform does before its work: nothing, or wait (see `makeHold`). */
type Before = (record: { readonly topic: string; readonly partition: number; readonly offset: number }) => Effect.Effect<void>

const setup = (prefix: string, before: Before = () => Effect.void) =>
  Effect.gen(function*() {
    const words = unique(`${prefix}-words`)
    const counts = unique(`${prefix}-counts`)
    const lines = unique(`${prefix}-lines`)
    const shouted = unique(`${prefix}-shouted`)
    yield* createTopics([
      { name: words, partitions: 2 },
      { name: counts, partitions: 2 },
      { name: lines, partitions: 2 },
      { name: shouted, partitions: 2 }
    ])
    const Words = Topic.make({ name: words, key: Schema.String, value: Schema.String })
    const Counts = Topic.make({ name: counts, key: Schema.String, value: Topic.json(Schema.Number) })
    const Lines = Topic.make({ name: lines, key: Schema.String, value: Schema.String })
    const Shouted = Topic.make({ name: shouted, key: Schema.String, value: Schema.String })
    const Count = Transformer.make({
      name: "count",
      inputs: [Words],
      state: Schema.Number,
      transform: (record, count) => {
        const next = Option.getOrElse(count, () => 0) + 1
        return Effect.as(before(record), { emit: [Topic.record(Counts, record.key, next)], state: Transformer.set(next) })
      }
    })
    const Shout = Transformer.stateless({
      name: "shout",
      inputs: [Lines],
      transform: (record) =>
        record.value === "boom"
          ? Effect.fail(new Boom({ value: record.value }))
          : Effect.as(before(record), { emit: [Topic.record(Shouted, record.key, record.value.toUpperCase())] })
    })
    return { words, counts, lines, shouted, Count, Shout }
  })

/**
 * Holds each transformer's record at partition 0, offset 25 until `release`:
 * a run stopped while both wait is stopped mid-stream, whatever the machine's
 * speed. `waiting` completes once both transformers wait there.
 */
const makeHold = Effect.gen(function*() {
  const released = yield* Deferred.make<void>()
  const waiting = yield* Deferred.make<void>()
  const holding = new Set<string>()
  const before: Before = (record) =>
    record.partition === 0 && record.offset === 25
      ? Effect.zipRight(
        Effect.suspend(() => holding.add(record.topic).size === 2 ? Deferred.succeed(waiting, undefined) : Effect.void),
        Deferred.await(released)
      )
      : Effect.void
  return { before, waiting: Deferred.await(waiting), release: Deferred.succeed(released, undefined) }
})

describe("Runner.runAll", () => {
  it.scopedLive("two transformers in one process, each exactly once, in its own group, under one health endpoint", () =>
    Effect.gen(function*() {
      const hold = yield* makeHold
      const { Count, Shout, counts, lines, shouted, words } = yield* setup("all", hold.before)
      const applicationId = unique("all-app")
      const produceRound = (round: number) =>
        Effect.zipRight(
          produce(words, Array.from({ length: 100 }, (_, i) => ({ key: `w${i % 10}`, value: `x`, partition: i % 2 }))),
          produce(lines, Array.from({ length: 100 }, (_, i) => ({ key: `l${i % 10}`, value: `r${round}-${i}`, partition: i % 2 })))
        )

      for (let round = 0; round < 2; round++) {
        const instance = yield* startAll([Count, Shout], {
          applicationId,
          maxPollRecords: 20,
          healthPort: 0,
          // The held handlers are interrupted after this grace (they never finish).
          shutdownGrace: Duration.seconds(1)
        })
        yield* produceRound(round)
        if (round === 0) {
          // Stopped mid-stream, while each transformer waits at partition 0, offset 25: the restart
          // resumes each transformer from its own committed offsets and state.
          yield* hold.waiting
          yield* instance.stop
          yield* hold.release
          for (const [group, topic] of [[`${applicationId}-count`, words], [`${applicationId}-shout`, lines]] as const) {
            const committed = yield* groupOffsets(group, topic)
            assert.strictEqual(committed.get(0), 25, `${group}: stopped mid-stream, partition 0 committed up to the held record`)
          }
        } else {
          yield* caughtUp(`${applicationId}-count`, words)
          yield* caughtUp(`${applicationId}-shout`, lines)
          const port = instance.stats[0]!.healthPort!
          assert.strictEqual(instance.stats[1]!.healthPort, port, "one endpoint for both")
          const ready = yield* eventually(
            Effect.map(get(port, "/health/ready"), (r) => r.status === 200),
            { timeout: 30_000, what: "both transformers ready" }
          ).pipe(Effect.zipRight(get(port, "/health/ready")))
          const body = JSON.parse(ready.body)
          assert.isTrue(body.ready)
          assert.deepStrictEqual(Object.keys(body.transformers).sort(), ["count", "shout"])
          assert.strictEqual(body.transformers.count.phase, "running")
          assert.strictEqual(body.transformers.shout.counters.recordsProcessed > 0, true)
          const metrics = (yield* get(port, "/metrics")).body
          assert.include(metrics, `skein_up{application_id="${applicationId}-count",transformer="count"} 1\n`)
          assert.include(metrics, `skein_up{application_id="${applicationId}-shout",transformer="shout"} 1\n`)
          assert.strictEqual(metrics.split("# HELP skein_up ").length, 2, "each metric family once")
          const live = yield* get(port, "/health/live")
          assert.strictEqual(live.status, 200)
        }
        yield* instance.stop
      }

      // The stateless one: every line once, upper-cased.
      const shoutedValues = (yield* readCommitted(shouted)).map((r) => r.value ?? "")
      const expected = [0, 1].flatMap((round) => Array.from({ length: 100 }, (_, i) => `R${round}-${i}`))
      assert.strictEqual(shoutedValues.length, expected.length, "no duplicate and no loss")
      assert.deepStrictEqual([...shoutedValues].sort(), [...expected].sort())
      // The stateful one: each key's counts exactly 1..20 (no duplicate, no loss, state carried across the restart).
      const byKey = new Map<string, Array<number>>()
      for (const r of yield* readCommitted(counts)) byKey.set(r.key ?? "", [...(byKey.get(r.key ?? "") ?? []), Number(r.value)])
      assert.strictEqual(byKey.size, 10)
      for (const [key, list] of byKey) {
        assert.deepStrictEqual(list, Array.from({ length: 20 }, (_, i) => i + 1), `counts of ${key}`)
      }
      // Each its own group and changelog.
      for (const [group, topic] of [[`${applicationId}-count`, words], [`${applicationId}-shout`, lines]] as const) {
        const ends = yield* offsets(topic)
        const committed = yield* groupOffsets(group, topic)
        for (const end of ends) assert.strictEqual(committed.get(end.partition), end.lastStable, group)
      }
      const bare = yield* groupOffsets(applicationId, words)
      assert.isTrue([...bare.values()].every((offset) => offset < 0), "no group named after the application alone")
      const changelog = yield* offsets(Transformer.changelogTopic(`${applicationId}-count`, Count))
      assert.isAbove(changelog.reduce((n, p) => n + p.lastStable, 0), 0)
    }))

  it.scopedLive("duplicate transformer names fail at startup with ConfigurationError", () =>
    Effect.gen(function*() {
      const { Count, Shout } = yield* setup("dup")
      // The error union is each transformer's error plus the runner's, the requirements only the
      // config: exactly these types (a type test, checked by `npm run typecheck`, part of `npm test`).
      expectTypeOf(Runner.runAll([Count, Shout])).toEqualTypeOf<
        Effect.Effect<never, SkeinError.RunnerError | Boom, SkeinConfig.SkeinConfig>
      >()
      const exit = yield* Runner.runAll([Count, Count]).pipe(
        Effect.provide(SkeinConfig.layer({ applicationId: unique("dup-app"), brokers: brokers() })),
        Effect.exit
      )
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
      assert.isTrue(Option.isSome(error) && error.value._tag === "ConfigurationError")
      assert.include(Option.isSome(error) ? error.value.message : "", `"count"`)
    }))

  it.scopedLive("a failing transformer ends the whole run with its typed error; the other stops cleanly", () =>
    Effect.gen(function*() {
      const { Count, Shout, lines, words } = yield* setup("fail")
      const applicationId = unique("fail-app")
      const instance = yield* startAll([Count, Shout], { applicationId })
      yield* produce(words, [{ key: "a", value: "x", partition: 0 }, { key: "b", value: "x", partition: 1 }])
      yield* caughtUp(`${applicationId}-count`, words)
      yield* produce(lines, [{ key: "b", value: "boom", partition: 0 }])
      const exit = yield* Fiber.await(instance.fiber).pipe(Effect.timeout("60 seconds"))
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
      assert.isTrue(Option.isSome(error) && error.value._tag === "Boom", String(Exit.isFailure(exit) && Cause.pretty(exit.cause)))
      assert.strictEqual(instance.stats[1]!.phase, "failed")
      assert.strictEqual(instance.stats[0]!.phase, "stopped", "the other was interrupted and stopped cleanly")
      yield* eventually(Effect.map(describeGroup(`${applicationId}-count`), (g) => g.members.length === 0), {
        timeout: 30_000,
        what: "the other transformer left its group"
      })
    }))

  it.scopedLive("failureIsolation \"transformer\": the others go on", () =>
    Effect.gen(function*() {
      const { Count, Shout, lines, words } = yield* setup("iso")
      const applicationId = unique("iso-app")
      const instance = yield* startAll([Count, Shout], { applicationId, healthPort: 0 }, { failureIsolation: "transformer" })
      yield* produce(lines, [{ key: "b", value: "boom", partition: 0 }])
      yield* eventually(Effect.sync(() => instance.stats[1]!.phase === "failed"), { timeout: 60_000, what: "shout failed" })
      yield* produce(words, [{ key: "a", value: "x", partition: 0 }, { key: "b", value: "x", partition: 1 }])
      yield* caughtUp(`${applicationId}-count`, words)
      assert.strictEqual(instance.stats[0]!.phase, "running")
      assert.isTrue(Option.isNone(yield* Fiber.poll(instance.fiber)), "the run goes on")
      const port = instance.stats[0]!.healthPort!
      const ready = yield* get(port, "/health/ready")
      assert.strictEqual(ready.status, 503)
      assert.strictEqual(JSON.parse(ready.body).transformers.shout.phase, "failed")
      assert.strictEqual((yield* get(port, "/health/live")).status, 200)
    }))
})
