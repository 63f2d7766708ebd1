/**
 * TestDriver: a transformer in memory through the runner's batch code, no broker.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schedule, Schema } from "effect"
import { ErrorRule, SkeinError, Topic, Transformer } from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"

// The README's word count.
const Words = Topic.make({ name: "words", key: Schema.String, value: Schema.String })
const Counts = Topic.make({ name: "word-counts", key: Schema.String, value: Topic.json(Schema.Number) })

const WordCount = Transformer.make({
  name: "word-count",
  inputs: [Words],
  state: Schema.Number,
  transform: (record, count) => {
    const next = Option.getOrElse(count, () => 0) + 1
    return Effect.succeed({ emit: [Topic.record(Counts, record.key, next)], state: Transformer.set(next) })
  }
})

const header = (record: TestDriver.RawRecord, name: string): ReadonlyArray<string> =>
  record.headers.filter(([n]) => n === name).map(([, v]) => v.toString("utf8"))

describe("TestDriver", () => {
  it.scoped("counts words: outputs in order, state per key, the changelog", () =>
    Effect.gen(function*() {
      const driver = yield* TestDriver.make(WordCount)
      for (const word of ["the", "fox", "the"]) yield* driver.pipe(Words, word, word)
      yield* driver.pipeAll(Words, [{ key: "dog", value: "dog" }, { key: "the", value: "the" }])

      const counts = yield* driver.outputs(Counts)
      assert.deepStrictEqual(counts.map((r) => [r.key, r.value]), [["the", 1], ["fox", 1], ["the", 2], ["dog", 1], ["the", 3]])
      // Outputs carry their input's timestamp: the TestClock's time under it.effect.
      assert.strictEqual(counts[0]!.timestamp, 0)
      assert.deepStrictEqual(yield* driver.state("the"), Option.some(3))
      assert.deepStrictEqual(yield* driver.state("cat"), Option.none())

      const changelog = yield* driver.records(driver.changelogTopic)
      assert.strictEqual(driver.changelogTopic, "test-word-count-changelog")
      assert.deepStrictEqual(changelog.map((r) => [r.key?.toString(), r.value?.toString()]), [
        ["the", "1"],
        ["fox", "1"],
        ["the", "2"],
        ["dog", "1"],
        ["the", "3"]
      ])
    }))

  it.scoped("keeps state per task: another input partition has its own", () =>
    Effect.gen(function*() {
      const driver = yield* TestDriver.make(WordCount)
      yield* driver.pipe(Words, "fox", "fox")
      yield* driver.pipe(Words, "fox", "fox", { partition: 1, timestamp: 1234 })
      assert.deepStrictEqual(yield* driver.state("fox"), Option.some(1))
      assert.deepStrictEqual(yield* driver.state("fox", 1), Option.some(1))
      const counts = yield* driver.outputs(Counts)
      assert.strictEqual(counts[1]!.timestamp, 1234)
    }))

  it.scoped("sends a poison record to the dead letter topic byte for byte, with its error headers", () =>
    Effect.gen(function*() {
      const driver = yield* TestDriver.make(WordCount, { deadLetterTopic: "word-count-dlq" })
      yield* driver.pipe(Words, "fox", "fox")
      const key = Buffer.from("k")
      const value = Buffer.from([0x66, 0xff, 0xfe]) // not UTF-8
      const trace = Buffer.from([0x00, 0x01, 0x02])
      yield* driver.pipeRaw(Words, { key, value, headers: [["trace", trace], ["trace", "second"]], timestamp: 42 })
      yield* driver.pipe(Words, "fox", "fox")

      const letters = yield* driver.deadLetters
      assert.strictEqual(letters.length, 1)
      const letter = letters[0]!
      assert.strictEqual(letter.topic, "word-count-dlq")
      assert.isTrue(letter.key !== null && letter.key.equals(key))
      assert.isTrue(letter.value !== null && letter.value.equals(value))
      const traces = letter.headers.filter(([name]) => name === "trace").map(([, v]) => v)
      assert.isTrue(traces[0]!.equals(trace))
      assert.strictEqual(traces[1]!.toString(), "second")
      assert.strictEqual(header(letter, "skein.error.part")[0], "value")
      assert.match(header(letter, "skein.error")[0]!, /Cannot decode the value of words\/0@1/)
      assert.deepStrictEqual(header(letter, "skein.source.offset"), ["1"])
      assert.deepStrictEqual(header(letter, "skein.source.timestamp"), ["42"])
      // The batch went on: the next record is counted.
      assert.deepStrictEqual((yield* driver.outputs(Counts)).map((r) => r.value), [1, 2])
    }))

  it.scoped("fails with the DecodeError without a dead letter topic", () =>
    Effect.gen(function*() {
      const driver = yield* TestDriver.make(WordCount)
      const error = yield* Effect.flip(driver.pipeRaw(Words, { key: Buffer.from("k"), value: null }))
      assert.instanceOf(error, SkeinError.DecodeError)
      assert.strictEqual(error._tag === "DecodeError" && error.part, "value")
      assert.deepStrictEqual(yield* driver.outputs(Counts), [])
    }))

  class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", { value: Schema.String }) {}

  it.scoped("retries under an error rule, then dead-letters", () =>
    Effect.gen(function*() {
      const attempts = new Map<string, number>()
      const Flaky = Transformer.make({
        name: "flaky",
        inputs: [Words],
        state: Schema.Number,
        rules: [ErrorRule.tagged("Unavailable", { retry: Schedule.recurs(2), then: "dlq" })],
        transform: (record, count) =>
          Effect.gen(function*() {
            const n = (attempts.get(record.value) ?? 0) + 1
            attempts.set(record.value, n)
            // "down" never succeeds; "flaky" succeeds on its second attempt.
            if (record.value === "down" || (record.value === "flaky" && n < 2)) {
              return yield* Effect.fail(new Unavailable({ value: record.value }))
            }
            const next = Option.getOrElse(count, () => 0) + 1
            return { emit: [Topic.record(Counts, record.key, next)], state: Transformer.set(next) }
          })
      })
      const driver = yield* TestDriver.make(Flaky, { deadLetterTopic: "dlq" })
      yield* driver.pipe(Words, "k", "flaky")
      yield* driver.pipe(Words, "k", "down", { headers: { source: "test" } })

      assert.strictEqual(attempts.get("flaky"), 2)
      assert.strictEqual(attempts.get("down"), 3) // the first attempt and two retries
      assert.deepStrictEqual((yield* driver.outputs(Counts)).map((r) => [r.key, r.value]), [["k", 1]])
      const letters = yield* driver.deadLetters
      assert.strictEqual(letters.length, 1)
      assert.strictEqual(letters[0]!.value?.toString(), "down")
      assert.deepStrictEqual(header(letters[0]!, "source"), ["test"])
      assert.deepStrictEqual(header(letters[0]!, "skein.error.part"), ["transform"])
      assert.match(header(letters[0]!, "skein.error")[0]!, /Unavailable/)
      // A dead-lettered record leaves the state as it was.
      assert.deepStrictEqual(yield* driver.state("k"), Option.some(1))
    }))

  it.scoped("fails with the transform's own error when no rule matches, keeping what came before", () =>
    Effect.gen(function*() {
      const Strict = Transformer.make({
        name: "strict",
        inputs: [Words],
        state: Schema.Number,
        transform: (record, count) =>
          record.value === "down"
            ? Effect.fail(new Unavailable({ value: record.value }))
            : Effect.succeed({ state: Transformer.set(Option.getOrElse(count, () => 0) + 1) })
      })
      const driver = yield* TestDriver.make(Strict)
      const error = yield* Effect.flip(driver.pipeAll(Words, [
        { key: "k", value: "up" },
        { key: "k", value: "down" },
        { key: "k", value: "up" }
      ]))
      assert.instanceOf(error, Unavailable)
      // The record before the failure committed, as in a run.
      assert.deepStrictEqual(yield* driver.state("k"), Option.some(1))
    }))

  it.scoped("deletes a state with Transformer.remove (a tombstone in the changelog)", () =>
    Effect.gen(function*() {
      const Resettable = Transformer.make({
        name: "resettable",
        inputs: [Words],
        state: Schema.Number,
        transform: (record, count) =>
          Effect.succeed(
            record.value === "reset"
              ? { state: Transformer.remove }
              : { state: Transformer.set(Option.getOrElse(count, () => 0) + 1) }
          )
      })
      const driver = yield* TestDriver.make(Resettable)
      yield* driver.pipe(Words, "k", "one")
      yield* driver.pipe(Words, "k", "two")
      assert.deepStrictEqual(yield* driver.state("k"), Option.some(2))
      yield* driver.pipe(Words, "k", "reset")
      assert.deepStrictEqual(yield* driver.state("k"), Option.none())
      const changelog = yield* driver.records(driver.changelogTopic)
      assert.strictEqual(changelog.at(-1)!.value, null)
      // The next record starts from no state again (the cache knows it is gone).
      yield* driver.pipe(Words, "k", "three")
      assert.deepStrictEqual(yield* driver.state("k"), Option.some(1))
    }))

  it.scoped("fails with OutputTooLarge past maxMessageBytes", () =>
    Effect.gen(function*() {
      const Echo = Transformer.stateless({
        name: "echo",
        inputs: [Words],
        transform: (record) => Effect.succeed({ emit: [Topic.record(Words, record.key, record.value.repeat(100))] })
      })
      const driver = yield* TestDriver.make(Echo, { maxMessageBytes: 200 })
      yield* driver.pipe(Words, "k", "a")
      const error = yield* Effect.flip(driver.pipe(Words, "k", "abc"))
      assert.instanceOf(error, SkeinError.OutputTooLarge)
      assert.strictEqual((yield* driver.outputs(Words)).length, 1)
      assert.deepStrictEqual(yield* driver.state("k"), Option.none())
    }))

  it.scoped("fails with PartitionOutOfRange for an output naming a missing partition", () =>
    Effect.gen(function*() {
      const Route = Transformer.stateless({
        name: "route",
        inputs: [Words],
        transform: (record) => Effect.succeed({ emit: [Topic.record(Counts, record.key, 1, undefined, { partition: 2 })] })
      })
      const driver = yield* TestDriver.make(Route, { partitions: { "word-counts": 2 } })
      const error = yield* Effect.flip(driver.pipe(Words, "k", "a"))
      assert.instanceOf(error, SkeinError.PartitionOutOfRange)
    }))
})

// Type-level: only the transformer's inputs can be piped.
export const notAnInput = Effect.scoped(Effect.gen(function*() {
  const driver = yield* TestDriver.make(WordCount)
  // @ts-expect-error Counts is not an input of WordCount
  yield* driver.pipe(Counts, "fox", 1)
  // @ts-expect-error a value of the wrong type
  yield* driver.pipe(Words, "fox", 1)
}))
