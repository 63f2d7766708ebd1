import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Option, Schema } from "effect"
import { SkeinError, Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, eventually, groupOffsets, produce, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

const Order = Schema.Struct({ id: Schema.String, amount: Schema.Number })

/** The records of the dead letter test: a poison record on each partition, between good ones. */
const mixed = [
  { key: "a", value: JSON.stringify({ id: "1", amount: 10 }), partition: 0 },
  { key: "b", value: "{not json", partition: 0 },
  { key: "c", value: JSON.stringify({ id: "3", amount: "x" }), partition: 1 },
  { key: "d", value: JSON.stringify({ id: "4", amount: 40 }), partition: 1 }
]

const setup = (records: ReadonlyArray<{ readonly key: string; readonly value: string; readonly partition: number }>) =>
  Effect.gen(function*() {
    const input = unique("poison-in")
    const output = unique("poison-out")
    const dlq = unique("poison-dlq")
    yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }, { name: dlq, partitions: 1 }])
    const In = Topic.make({ name: input, key: Schema.String, value: Topic.json(Order) })
    const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Schema.Number) })
    let calls = 0
    const transformer = Transformer.stateless({
      name: "amounts",
      inputs: [In],
      transform: (record) =>
        Effect.sync(() => {
          calls++
          return { emit: [Topic.record(Out, record.key, record.value.amount)] }
        })
    })
    yield* produce(input, records)
    return { input, output, dlq, transformer, calls: () => calls }
  })

describe("poison records", () => {
  it.scopedLive("go to the dead letter topic with their error and coordinates; the rest commits", () =>
    Effect.gen(function*() {
      const { dlq, input, output, transformer, calls } = yield* setup(mixed)
      const applicationId = unique("poison-app")
      const instance = yield* startInstance(transformer, { applicationId, deadLetterTopic: dlq })
      yield* caughtUp(applicationId, input).pipe(
        Effect.tapError(() => Effect.flatMap(instance.exit, (exit) => Effect.logError("run ended", exit)))
      )
      const outputs = yield* readCommitted(output)
      assert.deepStrictEqual(outputs.map((r) => r.value).sort(), ["10", "40"])
      assert.strictEqual(calls(), 2, "the handler never sees a poison record")
      const dead = yield* readCommitted(dlq)
      assert.strictEqual(dead.length, 2)
      const byKey = new Map(dead.map((m) => [m.key, m]))
      const b = byKey.get("b")
      assert.strictEqual(b?.value, "{not json")
      assert.strictEqual(b?.headers?.["skein.source.topic"], input)
      assert.strictEqual(b?.headers?.["skein.source.partition"], "0")
      assert.strictEqual(b?.headers?.["skein.source.offset"], "1")
      assert.ok(b?.headers?.["skein.source.timestamp"])
      assert.include(b?.headers?.["skein.error"] ?? "", "Cannot decode the value")
      assert.include(byKey.get("c")?.headers?.["skein.error"] ?? "", "amount")
    }))

  it.scopedLive("without a dead letter topic, a poison record fails the run with DecodeError; the record before it commits, nothing past it", () =>
    Effect.gen(function*() {
      // One send: a good record, a poison one, a good one, in one batch of partition 0.
      const { calls, input, output, transformer } = yield* setup([
        { key: "a", value: JSON.stringify({ id: "1", amount: 10 }), partition: 0 },
        { key: "b", value: "{not json", partition: 0 },
        { key: "e", value: JSON.stringify({ id: "5", amount: 50 }), partition: 0 }
      ])
      const applicationId = unique("poison-app")
      const instance = yield* startInstance(transformer, { applicationId })
      yield* eventually(Effect.map(instance.exit, Option.isSome), { what: "the run to fail" })
      const exit = yield* Fiber.await(instance.fiber)
      assert.ok(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      assert.ok(error instanceof SkeinError.DecodeError, String(error))
      assert.strictEqual(calls(), 1, "the transform ran for the record before the poison one only")
      // The work finished before the poison record is committed, nothing at or past it.
      const outputs = yield* readCommitted(output)
      assert.deepStrictEqual(outputs.map((r) => [r.key, r.value]), [["a", "10"]])
      assert.deepStrictEqual(
        Object.fromEntries(yield* groupOffsets(applicationId, input)),
        { 0: 1, 1: -1 },
        "partition 0 committed up to the poison record (offset 1), nothing on the empty partition 1"
      )
    }))
})
