/**
 * A transformer's task state beyond the record's key (`sharedState`:
 * `TaskState.get`, `Result.others`), through the batch code (TestDriver):
 * other keys' changes commit with the record (changelog, store, cache), a
 * later record of the same batch reads them, a failed record's changes are
 * not kept, and records of a key-concurrent topic run in order.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import { ErrorRule, Topic, Transformer } from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"

const Words = Topic.make({ name: "words", key: Schema.String, value: Schema.String, keyConcurrency: true })
const Totals = Topic.make({ name: "totals", key: Schema.String, value: Topic.json(Schema.Number) })

class Boom extends Schema.TaggedError<Boom>()("Boom", {}) {}

/** Counts per word (its own key) and in total (the task's `total` key); "boom" fails after reading. */
const Counting: Transformer.Transformer<readonly [typeof Words], number, Boom, never> = {
  name: "counting",
  inputs: [Words],
  state: Option.some(Topic.json(Schema.Number)),
  stateKey: (record) => `w-${record.key}`,
  sharedState: true,
  rules: [ErrorRule.tagged("Boom", { then: "skip" })],
  transform: (record, count, task) =>
    Effect.gen(function*() {
      if (task === undefined) return yield* Effect.dieMessage("no task state")
      const total = Option.getOrElse(yield* task.get("total"), () => 0) + 1
      if (record.value === "boom") return yield* new Boom()
      const own = Option.getOrElse(count, () => 0) + 1
      return {
        emit: [Topic.record(Totals, record.key, total)],
        state: Transformer.set(own),
        others: [{ key: "total", state: Transformer.set(total) }]
      }
    })
}

const words = (values: ReadonlyArray<string>): Array<TestDriver.Input<string, string>> =>
  values.map((value) => ({ key: value === "boom" ? "b" : value, value }))

describe("Transformer: task state shared across keys", () => {
  it.scoped("other keys' changes commit with the record and are read by later records, in and across batches", () =>
    Effect.gen(function*() {
      const driver = yield* TestDriver.make(Counting)
      // One batch (a poll): the total is read back by each record from the one before, though
      // the topic allows key concurrency (a shared-state transformer runs its records in order).
      yield* driver.pipeAll(Words, words(["a", "b", "a", "c"]))
      yield* driver.pipeAll(Words, words(["boom", "c"]))
      const totals = yield* driver.outputs(Totals)
      assert.deepStrictEqual(totals.map((r) => [r.key, r.value]), [["a", 1], ["b", 2], ["a", 3], ["c", 4], ["c", 5]])
      assert.deepStrictEqual(yield* driver.state("total"), Option.some(5))
      assert.deepStrictEqual(yield* driver.state("w-a"), Option.some(2))
      assert.deepStrictEqual(yield* driver.state("w-c"), Option.some(2))
      // The changelog has the other key's final state per batch (deduplicated per transaction).
      const changelog = yield* driver.records(driver.changelogTopic)
      assert.deepStrictEqual(
        changelog.map((r) => `${r.key?.toString()}=${r.value?.toString()}`).filter((e) => e.startsWith("total=")),
        ["total=4", "total=5"]
      )
    }))

  it.scoped("a record's changes to other keys are dropped with the record when it fails", () =>
    Effect.gen(function*() {
      const driver = yield* TestDriver.make(Counting)
      yield* driver.pipeAll(Words, words(["a", "boom", "boom", "a"]))
      const totals = yield* driver.outputs(Totals)
      // The skipped records read total 1 and failed: their (unreturned) increments never counted.
      assert.deepStrictEqual(totals.map((r) => r.value), [1, 2])
      assert.deepStrictEqual(yield* driver.state("total"), Option.some(2))
    }))
})

