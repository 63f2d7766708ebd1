/**
 * A `stateKey` other than the record key splits a key's state when its
 * records arrive on several input partitions (state is per partition). The
 * tracker (pure) and the runner's warning (real broker).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger, Option, Schema } from "effect"
import { Topic, Transformer } from "../../src/index.ts"
import * as StateKeyCheck from "../../src/internal/runtime/StateKeyCheck.ts"
import { caughtUp, createTopics, produce, startInstance, unique } from "../helpers/kafka.ts"

describe("StateKeyCheck", () => {
  it("reports a key the first time it is seen on a second partition, once", () => {
    const check = StateKeyCheck.make()
    assert.isUndefined(check.observe("a", 0))
    assert.isUndefined(check.observe("a", 0))
    assert.isUndefined(check.observe("b", 1))
    assert.deepStrictEqual(check.observe("a", 1), { stateKey: "a", firstPartition: 0, partition: 1 })
    // Once per key, whatever partition comes next.
    assert.isUndefined(check.observe("a", 1))
    assert.isUndefined(check.observe("a", 2))
    assert.isUndefined(check.observe("a", 0))
    assert.deepStrictEqual(check.drain(), [{ stateKey: "a", firstPartition: 0, partition: 1 }])
    assert.deepStrictEqual(check.drain(), [])
  })

  it("stays bounded: the oldest keys are forgotten first", () => {
    const check = StateKeyCheck.make(10)
    for (let i = 0; i < 1000; i++) check.observe(`k${i}`, 0)
    // k0 was forgotten long ago: seen again elsewhere, it is a first sighting.
    assert.isUndefined(check.observe("k0", 1))
    // k999 is remembered.
    assert.deepStrictEqual(check.observe("k999", 1), { stateKey: "k999", firstPartition: 0, partition: 1 })
  })

  it("passes the key through and names the key, both partitions and the fix", () => {
    const check = StateKeyCheck.make()
    assert.strictEqual(StateKeyCheck.observe(check, "alice", 0), "alice")
    assert.strictEqual(StateKeyCheck.observe(check, "alice", 3), "alice")
    assert.strictEqual(StateKeyCheck.observe(undefined, "bob", 3), "bob")
    const [split] = check.drain()
    assert.isDefined(split)
    const message = StateKeyCheck.message("balance", split!)
    assert.include(message, `"alice"`)
    assert.include(message, "partitions 0 and 3")
    assert.include(message, "balance")
    assert.include(message, "re-key the input topic by the state key upstream")
  })

  it("is on for a custom stateKey unless configured off, off for the record key unless configured on", () => {
    const In = Topic.make({ name: "in", key: Schema.String, value: Schema.String })
    const byKey = Transformer.make({ name: "k", inputs: [In], state: Schema.Number, transform: () => Effect.succeed({}) })
    const byValue = Transformer.make({
      name: "v",
      inputs: [In],
      state: Schema.Number,
      stateKey: (record) => record.value,
      transform: () => Effect.succeed({})
    })
    assert.isFalse(StateKeyCheck.enabled(undefined, byKey))
    assert.isTrue(StateKeyCheck.enabled(true, byKey))
    assert.isTrue(StateKeyCheck.enabled(undefined, byValue))
    assert.isFalse(StateKeyCheck.enabled(false, byValue))
  })
})

describe("state keys across partitions", () => {
  it.scopedLive("the runner warns once per state key seen on two partitions, naming the key, both partitions and the fix", () => {
    const warnings: Array<string> = []
    const capture = Logger.make(({ logLevel, message }) => {
      if (logLevel._tag === "Warning") warnings.push(Array.isArray(message) ? message.join(" ") : String(message))
    })
    return Effect.gen(function*() {
      const input = unique("statekey-in")
      const applicationId = unique("statekey-app")
      yield* createTopics([{ name: input, partitions: 2 }])
      const Payments = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      // Keyed by payment id, state keyed by account (the value): "alice" lands on both partitions.
      const transformer = Transformer.make({
        name: "balance",
        inputs: [Payments],
        state: Schema.Number,
        stateKey: (record) => record.value,
        transform: (_record, count) => Effect.succeed({ state: Transformer.set(Option.getOrElse(count, () => 0) + 1) })
      })
      yield* produce(input, [
        { key: "p1", value: "alice", partition: 0 },
        { key: "p2", value: "bob", partition: 0 },
        { key: "p3", value: "alice", partition: 1 },
        { key: "p4", value: "alice", partition: 1 },
        { key: "p5", value: "alice", partition: 0 }
      ])
      yield* startInstance(transformer, { applicationId })
      yield* caughtUp(applicationId, input)
      const splits = warnings.filter((w) => w.includes("state key"))
      assert.strictEqual(splits.length, 1, splits.join("\n"))
      assert.include(splits[0], `"alice"`)
      assert.match(splits[0]!, /partitions (0 and 1|1 and 0)/)
      assert.include(splits[0], "re-key the input topic by the state key upstream")
    }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
  })
})
