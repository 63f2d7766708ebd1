/**
 * App under test: a `DatabaseSink` with a batch handler that bulk-inserts every
 * record of its input topic into a table without a unique constraint (a
 * duplicate would show), for the SIGKILL test (test/database/sink-kill.test.ts).
 *
 *   node --import tsx test/database/apps/sink-app.ts
 *
 * with SKEIN_APPLICATION_ID, KAFKA_BROKERS, DATABASE_URL, SINK_INPUT_TOPIC and
 * SINK_TABLE in the environment. Prints "ready" once its run has started.
 */
import { PgClient } from "@effect/sql-pg"
import { Config, Effect, Schema } from "effect"
import { DatabaseSink, Runner, SkeinConfig, Topic } from "../../../src/index.ts"

const program = Effect.gen(function*() {
  const input = yield* Config.string("SINK_INPUT_TOPIC")
  const table = yield* Config.string("SINK_TABLE")
  const Input = Topic.make({ name: input, key: Schema.String, value: Schema.String })
  const sink = DatabaseSink.batch({
    name: "sink-app",
    inputs: [Input],
    handler: (records, sql) =>
      sql`INSERT INTO ${sql(table)} ${sql.insert(records.map((r) => ({ id: r.value, src: `${r.partition}@${r.offset}` })))}`
  })
  return yield* Runner.run(sink)
})

program.pipe(
  Effect.provide(PgClient.layerConfig({ url: Config.redacted("DATABASE_URL") })),
  Effect.provide(SkeinConfig.layerConfig()),
  Runner.runMain
)
