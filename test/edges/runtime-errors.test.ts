import { assert, describe, it } from "@effect/vitest"
import { Cause, Data, Duration, Effect, Exit, Fiber, Option, Schema } from "effect"
import { ErrorRule, Topic, Transformer } from "../../src/index.ts"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { brokers, createTopics, eventually, groupOffsets, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

const tagOf = (error: unknown): string =>
  typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : String(error)

class Rejected extends Data.TaggedError("Rejected")<{ readonly value: string }> {}

// Issue 11, defect 4: a runtime error (here a KafkaError from the size lookup of
// an output topic the broker refuses to describe) must never reach the user's
// rule predicate: a catch-all "skip" rule used to commit past the record and
// drop its output. A runtime error is a rewind; after maxDeliveryFailures the
// run ends with DeliveryFailed, and nothing past the record is committed.
describe("error rules see only the transform's errors", () => {
  it.scopedLive("a catch-all skip rule never sees a KafkaError from output encoding", () =>
    Effect.gen(function*() {
      const input = unique("rt-in")
      const applicationId = unique("rt-app")
      yield* createTopics([{ name: input, partitions: 1 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      // Not a valid topic name: describeConfigs fails with INVALID_TOPIC_EXCEPTION.
      const Bad = Topic.make({ name: "not a valid topic!", key: Schema.String, value: Schema.String })
      const seen: Array<unknown> = []
      const transformer = Transformer.stateless({
        name: "rt-copy",
        inputs: [In],
        rules: [ErrorRule.make({ when: (error: Rejected) => (seen.push(error), true), then: "skip" })],
        transform: (record) =>
          record.value === "reject"
            ? Effect.fail(new Rejected({ value: record.value }))
            : Effect.succeed({ emit: [Topic.record(Bad, record.key, record.value)] })
      })
      yield* produce(input, [{ key: "a", value: "reject" }, { key: "b", value: "b" }])
      const instance = yield* startInstance(transformer, {
        applicationId,
        maxDeliveryFailures: 2,
        deliveryBackoff: Duration.millis(50)
      })
      const ended = yield* Fiber.await(instance.fiber).pipe(Effect.timeout("30 seconds"), Effect.option)
      const failure = Option.flatMap(ended, (exit) => Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none())
      assert.deepStrictEqual(
        {
          ruleSaw: [...new Set(seen.map(tagOf))],
          skipped: instance.stats.skipped,
          failure: Option.map(failure, tagOf)
        },
        { ruleSaw: ["Rejected"], skipped: 1, failure: Option.some("DeliveryFailed") }
      )
      const committed = yield* groupOffsets(applicationId, input)
      assert.strictEqual(committed.get(0), 1, "committed past the rejected record only")
    }), { timeout: 90_000 })
})

// Issue 11, defect 8: a failure raised while the runner is shutting down (a
// handler that fails during shutdownGrace) was ignored: the process exited 0.
describe("failures during the shutdown grace", () => {
  it.scopedLive("a handler failing during shutdownGrace makes the process exit non-zero, with the error logged", () =>
    Effect.gen(function*() {
      const input = unique("sg-in")
      const output = unique("sg-out")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      yield* produce(input, [{ key: "a", value: "a" }, { key: "b", value: "slow-fail" }])
      const result = yield* Effect.async<{ readonly code: number | null; readonly output: string }>((resume) => {
        const child = ChildProcess.spawn(process.execPath, ["--import", "tsx", Path.join(import.meta.dirname, "apps", "grace-fail.ts")], {
          env: { ...process.env, INPUT: input, OUTPUT: output, APPLICATION_ID: unique("sg-app"), BROKERS: brokers().join(",") },
          stdio: ["ignore", "pipe", "pipe"]
        })
        let text = ""
        const collect = (chunk: Buffer) => {
          text += chunk.toString("utf8")
          if (text.includes("ENTERED") && !child.killed) child.kill("SIGTERM")
        }
        child.stdout.on("data", collect)
        child.stderr.on("data", collect)
        child.on("exit", (code) => resume(Effect.succeed({ code, output: text })))
        return Effect.sync(() => child.kill("SIGKILL"))
      }).pipe(Effect.timeout("60 seconds"))
      assert.deepStrictEqual(
        { code: result.code, logged: /failed while stopping[\s\S]*Rejected/.test(result.output) },
        { code: 1, logged: true },
        result.output.slice(-2000)
      )
      const values = (yield* readCommitted(output)).map((r) => r.value)
      assert.deepStrictEqual(values, ["a"], "the work finished before the failure committed")
    }), { timeout: 90_000 })
})

// Issue 11, defect 9: the transform's private copy of its state must keep what
// the state Schema decodes (a Schema.Class with methods, Option fields), and a
// throwing stateKey fails its record like a transform error, not the run.
class Counter extends Schema.Class<Counter>("Counter")({
  count: Schema.Number,
  last: Schema.Option(Schema.String)
}) {
  next(value: string): Counter {
    return new Counter({ count: this.count + 1, last: Option.some(value) })
  }
}

const endedWith = (exit: Exit.Exit<unknown, unknown>): string =>
  Exit.isFailure(exit) ? (Cause.pretty(exit.cause).split("\n")[0] ?? "") : "ok"

describe("state copies and state keys", () => {
  it.scopedLive("a Schema.Class state keeps its methods and Option fields in every copy", () =>
    Effect.gen(function*() {
      const input = unique("cls-in")
      const output = unique("cls-out")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const transformer = Transformer.make({
        name: "cls-count",
        inputs: [In],
        state: Counter,
        transform: (record, state) =>
          Effect.sync(() => {
            const current = Option.getOrElse(state, () => new Counter({ count: 0, last: Option.none() }))
            const next = current.next(record.value)
            const described = `${next.count}:${Option.isOption(current.last) ? Option.getOrElse(current.last, () => "-") : "not-an-option"}`
            return { emit: [Topic.record(Out, record.key, described)], state: Transformer.set(next) }
          })
      })
      yield* produce(input, ["x", "y", "z"].map((value) => ({ key: "k", value })))
      const instance = yield* startInstance(transformer, { applicationId: unique("cls-app") })
      // Three outputs, or the run ended (a copy without its methods fails the transform).
      yield* eventually(
        Effect.gen(function*() {
          if (Option.isSome(yield* instance.exit)) return true
          return (yield* readCommitted(output)).length >= 3
        }),
        { what: "three outputs or the end of the run", timeout: 30_000 }
      )
      const exit = yield* instance.exit
      const values = (yield* readCommitted(output)).map((r) => r.value ?? "")
      assert.deepStrictEqual(
        { values, ended: Option.map(exit, endedWith) },
        { values: ["1:-", "2:x", "3:y"], ended: Option.none<string>() }
      )
    }), { timeout: 60_000 })

  it.scopedLive("a throwing stateKey fails its record (failure isolation partition), not the run", () =>
    Effect.gen(function*() {
      const input = unique("sk-in")
      const output = unique("sk-out")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 1 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const transformer = Transformer.make({
        name: "sk-count",
        inputs: [In],
        state: Schema.Number,
        stateKey: (record) => {
          if (record.value === "boom") throw new Error("stateKey cannot handle boom")
          return record.key ?? ""
        },
        transform: (record, count) => {
          const next = Option.getOrElse(count, () => 0) + 1
          return Effect.succeed({ emit: [Topic.record(Out, record.key, record.value)], state: Transformer.set(next) })
        }
      })
      yield* produce(input, [
        { key: "a", value: "a0", partition: 0 },
        { key: "b", value: "b0", partition: 1 },
        { key: "b", value: "boom", partition: 1 },
        { key: "a", value: "a1", partition: 0 }
      ])
      const applicationId = unique("sk-app")
      const instance = yield* startInstance(transformer, { applicationId, failureIsolation: "partition" })
      yield* eventually(
        Effect.gen(function*() {
          const exit = yield* instance.exit
          return Option.isSome(exit) || instance.stats.stopped.has(1)
        }),
        { what: "partition 1 to stop or the end of the run", timeout: 30_000 }
      )
      const exit = yield* instance.exit
      assert.deepStrictEqual(
        {
          ended: Option.map(exit, endedWith),
          stopped: [...instance.stats.stopped.keys()]
        },
        { ended: Option.none<string>(), stopped: [1] }
      )
      yield* eventually(
        Effect.map(groupOffsets(applicationId, input), (c) => c.get(0) === 2 && c.get(1) === 1),
        { what: "partition 0 fully and partition 1 up to the failed record committed", timeout: 20_000 }
      )
    }), { timeout: 60_000 })
})
