/**
 * App under test: two transformers in one process with `Runner.runAll` (test/transformer/run-all-kill.test.ts):
 * split lines into words, count words (changelog-backed state).
 *
 *   node --import tsx test/transformer/apps/split-and-count.ts
 *
 * with SKEIN_APPLICATION_ID, KAFKA_BROKERS, SKEIN_STATE_DIR, LINES, WORDS, COUNTS (topic names).
 * Stops on SIGTERM (exit 0); the test SIGKILLs it too.
 */
import { Effect, Option, Schema } from "effect"
import { Runner, SkeinConfig, Topic, Transformer } from "../../../src/index.ts"

const env = (name: string) => process.env[name] ?? ""
const Lines = Topic.make({ name: env("LINES"), key: Schema.String, value: Schema.String })
const Words = Topic.make({ name: env("WORDS"), key: Schema.String, value: Schema.String })
const Counts = Topic.make({ name: env("COUNTS"), key: Schema.String, value: Topic.json(Schema.Number) })

const Split = Transformer.stateless({
  name: "split",
  inputs: [Lines],
  transform: (line) => Effect.succeed({ emit: line.value.split(" ").map((word) => Topic.record(Words, word, word)) })
})

const Count = Transformer.make({
  name: "count",
  inputs: [Words],
  state: Schema.Number,
  transform: (record, count) => {
    const next = Option.getOrElse(count, () => 0) + 1
    return Effect.succeed({ emit: [Topic.record(Counts, record.key, next)], state: Transformer.set(next) })
  }
})

Runner.runAll([Split, Count]).pipe(Effect.provide(SkeinConfig.layerConfig()), Runner.runMain)
