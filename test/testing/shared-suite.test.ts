/**
 * One suite, two backends: the same transformers, inputs and assertions run on
 * `TestDriver` (in memory) and on a real broker (a runner instance, read back
 * read_committed), so what a user's driver test sees is what production does.
 * Cases: the word count, a poison record, a retry-then-dlq rule, a state delete.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schedule, Schema } from "effect"
import type { Scope } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ErrorRule, Topic, Transformer } from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"
import { caughtUp, createTopics, produceRaw, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

/** The topic names a case's transformer is built over (unique per broker run). */
interface Names {
  readonly input: string
  readonly output: string
  readonly deadLetters: string
}

/** What a backend saw: outputs and dead letters in order, and the last changelog value per key. */
interface Seen {
  readonly outputs: ReadonlyArray<readonly [string | null, string | null]>
  readonly deadLetters: ReadonlyArray<{ readonly key: string | null; readonly value: string | null; readonly error: string }>
  readonly state: ReadonlyMap<string, string | null>
}

type Build = (names: Names) => Transformer.Transformer<[Topic.Topic<string, string>], number, Unavailable, never>

interface Backend {
  readonly name: string
  readonly run: (
    build: Build,
    inputs: ReadonlyArray<{ readonly key: string; readonly value: Buffer }>
  ) => Effect.Effect<Seen, unknown, Scope.Scope>
}

const text = (b: Buffer | null | undefined) => (b === null || b === undefined ? null : b.toString("utf8"))

const lastPerKey = (records: ReadonlyArray<{ readonly key: string | null; readonly value: string | null }>) => {
  const state = new Map<string, string | null>()
  for (const r of records) state.set(r.key ?? "", r.value)
  return state
}

const driverBackend: Backend = {
  name: "TestDriver",
  run: (build, inputs) =>
    Effect.gen(function*() {
      const names = { input: "in", output: "out", deadLetters: "dead-letters" }
      const transformer = build(names)
      const driver = yield* TestDriver.make(transformer, { deadLetterTopic: names.deadLetters, applicationId: "suite" })
      for (const input of inputs) yield* driver.pipeRaw(names.input, { key: Buffer.from(input.key), value: input.value })
      const outputs = (yield* driver.records(names.output)).map((r) => [text(r.key), text(r.value)] as const)
      const deadLetters = (yield* driver.deadLetters).map((r) => ({
        key: text(r.key),
        value: text(r.value),
        error: r.headers.find(([name]) => name === "skein.error")?.[1].toString("utf8") ?? ""
      }))
      const changelog = (yield* driver.records(driver.changelogTopic)).map((r) => ({ key: text(r.key), value: text(r.value) }))
      return { outputs, deadLetters, state: lastPerKey(changelog) }
    })
}

const brokerBackend: Backend = {
  name: "Kafka broker",
  run: (build, inputs) =>
    Effect.gen(function*() {
      const names = { input: unique("suite-in"), output: unique("suite-out"), deadLetters: unique("suite-dlq") }
      const applicationId = unique("suite-app")
      yield* createTopics([names.input, names.output, names.deadLetters].map((name) => ({ name, partitions: 1 })))
      const transformer = build(names)
      const instance = yield* startInstance(transformer, { applicationId, deadLetterTopic: names.deadLetters, stateDir: fs.mkdtempSync(path.join(os.tmpdir(), "skein-suite-")) })
      yield* produceRaw(names.input, inputs.map((input) => ({ key: input.key, value: input.value, partition: 0 })))
      yield* caughtUp(applicationId, names.input)
      yield* instance.stop
      const outputs = (yield* readCommitted(names.output)).map((r) => [r.key, r.value] as const)
      const deadLetters = (yield* readCommitted(names.deadLetters)).map((r) => ({ key: r.key, value: r.value, error: r.headers["skein.error"] ?? "" }))
      const changelog = yield* readCommitted(Transformer.changelogTopic(applicationId, transformer))
      return { outputs, deadLetters, state: lastPerKey(changelog) }
    })
}

/** The ledger did not answer (retried, then dead-lettered). */
class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", { word: Schema.String }) {}

/**
 * The README's word count, plus: "reset" deletes the key's count (a tombstone),
 * "flaky" fails its first attempt (retried), "down" always fails (dead-lettered).
 */
const wordCount: Build = (names) => {
  const Words = Topic.make({ name: names.input, key: Schema.String, value: Schema.String })
  const Counts = Topic.make({ name: names.output, key: Schema.String, value: Topic.json(Schema.Number) })
  const attempts = new Map<string, number>()
  return Transformer.make({
    name: "word-count",
    inputs: [Words],
    state: Schema.Number,
    stateKey: (record) => record.value.replace(/^(reset|flaky|down):/, ""),
    transform: (record, count) =>
      Effect.suspend(() => {
        const [command, word] = record.value.includes(":") ? record.value.split(":") as [string, string] : ["count", record.value]
        const attempt = (attempts.get(`${record.offset}`) ?? 0) + 1
        attempts.set(`${record.offset}`, attempt)
        if (command === "down" || (command === "flaky" && attempt === 1)) return Effect.fail(new Unavailable({ word }))
        if (command === "reset") return Effect.succeed({ emit: [Topic.record(Counts, word, 0)], state: Transformer.remove })
        const next = Option.getOrElse(count, () => 0) + 1
        return Effect.succeed({ emit: [Topic.record(Counts, word, next)], state: Transformer.set(next) })
      }),
    rules: [ErrorRule.tagged("Unavailable", { retry: Schedule.recurs(2), then: "dlq" })]
  })
}

const words = (...values: ReadonlyArray<string>) => values.map((value, i) => ({ key: `k${i}`, value: Buffer.from(value) }))

for (const backend of [driverBackend, brokerBackend]) {
  describe(`shared suite on ${backend.name}`, () => {
    it.scopedLive("the word count: a running count per word, one output per input, state per key", () =>
      Effect.gen(function*() {
        const seen = yield* backend.run(wordCount, words("the", "fox", "the", "dog", "the"))
        assert.deepStrictEqual(seen.outputs, [["the", "1"], ["fox", "1"], ["the", "2"], ["dog", "1"], ["the", "3"]])
        assert.deepStrictEqual([...seen.state].sort(), [["dog", "1"], ["fox", "1"], ["the", "3"]])
        assert.deepStrictEqual(seen.deadLetters, [])
      }), 120_000)

    it.scopedLive("a poison record goes to the dead letter topic byte for byte, with its error; the rest is counted", () =>
      Effect.gen(function*() {
        const poison = Buffer.from([0xff, 0xfe, 0x00, 0x41])
        const seen = yield* backend.run(wordCount, [...words("fox"), { key: "bad", value: poison }, ...words("fox")])
        assert.deepStrictEqual(seen.outputs, [["fox", "1"], ["fox", "2"]])
        assert.strictEqual(seen.deadLetters.length, 1)
        assert.strictEqual(seen.deadLetters[0]!.key, "bad")
        assert.strictEqual(seen.deadLetters[0]!.value, poison.toString("utf8"))
        assert.match(seen.deadLetters[0]!.error, /Cannot decode the value/)
      }), 120_000)

    it.scopedLive("a retry-then-dlq rule: a flaky record succeeds on its retry, a failing one is dead-lettered", () =>
      Effect.gen(function*() {
        const seen = yield* backend.run(wordCount, words("fox", "flaky:fox", "down:fox", "fox"))
        assert.deepStrictEqual(seen.outputs, [["fox", "1"], ["fox", "2"], ["fox", "3"]])
        assert.deepStrictEqual(seen.deadLetters.map((d) => [d.key, d.value]), [["k2", "down:fox"]])
        assert.match(seen.deadLetters[0]!.error, /Unavailable/)
        assert.deepStrictEqual([...seen.state], [["fox", "3"]])
      }), 120_000)

    it.scopedLive("a state delete: the key's state is gone (a tombstone), and counting starts again", () =>
      Effect.gen(function*() {
        const seen = yield* backend.run(wordCount, words("fox", "fox", "reset:fox", "dog", "fox"))
        assert.deepStrictEqual(seen.outputs, [["fox", "1"], ["fox", "2"], ["fox", "0"], ["dog", "1"], ["fox", "1"]])
        assert.deepStrictEqual([...seen.state].sort(), [["dog", "1"], ["fox", "1"]])
        const deleted = yield* backend.run(wordCount, words("fox", "reset:fox"))
        assert.deepStrictEqual([...deleted.state], [["fox", null]], "the last changelog record of a deleted key is a tombstone")
      }), 120_000)
  })
}
