/**
 * `DatabaseSink` and key concurrency (issue 34): a sink refuses an input
 * topic declared with `keyConcurrency` at startup, with why and the fix (a
 * partition's records share one database transaction on one connection, and
 * a per-record handler's savepoints nest); a sink without it passes that
 * check (test/database/driver.test.ts: `TestDriver` refuses it too). No
 * database, no broker.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { DatabaseSink, SkeinError, Topic } from "../../src/index.ts"
import * as DatabaseTask from "../../src/internal/database/DatabaseTask.ts"

const Concurrent = Topic.make({ name: "orders-by-key", key: Schema.String, value: Schema.String, keyConcurrency: true })
const Sequential = Topic.make({ name: "orders", key: Schema.String, value: Schema.String })

const perRecord = DatabaseSink.make({ name: "per-record", inputs: [Sequential, Concurrent], handler: () => Effect.void })
const perBatch = DatabaseSink.batch({ name: "per-batch", inputs: [Concurrent], handler: () => Effect.void })
const plain = DatabaseSink.make({ name: "plain", inputs: [Sequential], handler: () => Effect.void })

/** What the run's startup of `sink`'s tables fails with (`Runner.run` calls it before any task starts). */
const startup = (sink: { readonly name: string; readonly database?: DatabaseTask.SinkHooks<unknown> | undefined }) =>
  Effect.flip(DatabaseTask.setup(sink.database, sink.name))

describe("DatabaseSink: key concurrency", () => {
  it.effect("a per-record sink reading a topic with keyConcurrency fails at startup, naming the topic, why and the fix", () =>
    Effect.gen(function*() {
      const error = yield* startup(perRecord)
      assert.instanceOf(error, SkeinError.ConfigurationError)
      assert.include(error.message, `The database sink "per-record" reads orders-by-key with keyConcurrency`)
      assert.include(error.message, "one database transaction on one connection, which runs one statement at a time")
      assert.include(error.message, "savepoints nest")
      assert.include(error.message, "Declare the sink's input topic without keyConcurrency")
      assert.include(error.message, "Effect.forEach(records, ..., { concurrency })")
    }))

  it.effect("a batch sink is refused the same way", () =>
    Effect.gen(function*() {
      const error = yield* startup(perBatch)
      assert.include(error.message, `The database sink "per-batch" reads orders-by-key with keyConcurrency`)
    }))

  it.effect("a sink without it gets past that check (to the next: no SqlClient in this context)", () =>
    Effect.gen(function*() {
      const error = yield* startup(plain)
      assert.instanceOf(error, SkeinError.ConfigurationError)
      assert.notInclude(error.message, "keyConcurrency")
      assert.include(error.message, "holds no SqlClient")
    }))
})
