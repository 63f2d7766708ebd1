/**
 * App under test: a `DatabaseSink` with a batch handler that bulk-inserts every
 * record of its input topic into a table without a unique constraint (a
 * duplicate would show), for the SIGKILL test (test/database/sink-kill.test.ts).
 *
 *   node --import tsx test/database/apps/sink-app.ts
 *
 * with SKEIN_APPLICATION_ID, KAFKA_BROKERS, DATABASE_URL, SINK_INPUT_TOPIC and
 * SINK_TABLE in the environment. With SINK_HOLD_VALUE and SINK_RELEASE_FILE (the
 * zombie test), a batch holding that value inserts its rows, prints "holding
 * <value>" and keeps its transaction open until the file exists.
 */
import { PgClient } from "@effect/sql-pg"
import { Config, Effect, Option, Schema } from "effect"
import * as Fs from "node:fs"
import { DatabaseSink, Runner, SkeinConfig, Topic } from "../../../src/index.ts"

const program = Effect.gen(function*() {
  const input = yield* Config.string("SINK_INPUT_TOPIC")
  const table = yield* Config.string("SINK_TABLE")
  const hold = yield* Config.option(Config.all({ value: Config.string("SINK_HOLD_VALUE"), release: Config.string("SINK_RELEASE_FILE") }))
  const Input = Topic.make({ name: input, key: Schema.String, value: Schema.String })
  const held = (values: ReadonlyArray<string>) =>
    Option.match(hold, {
      onNone: () => Effect.void,
      onSome: ({ release, value }) =>
        !values.includes(value) || Fs.existsSync(release) ? Effect.void : Effect.gen(function*() {
          yield* Effect.sync(() => console.log(`holding ${value}`))
          while (!Fs.existsSync(release)) yield* Effect.sleep("50 millis")
          yield* Effect.sync(() => console.log(`released ${value}`))
        })
    })
  const sink = DatabaseSink.batch({
    name: "sink-app",
    inputs: [Input],
    handler: (records, sql) =>
      Effect.zipRight(
        sql`INSERT INTO ${sql(table)} ${sql.insert(records.map((r) => ({ id: r.value, src: `${r.partition}@${r.offset}` })))}`,
        held(records.map((r) => r.value))
      )
  })
  return yield* Runner.run(sink)
})

program.pipe(
  Effect.provide(PgClient.layerConfig({ url: Config.redacted("DATABASE_URL") })),
  Effect.provide(SkeinConfig.layerConfig()),
  Runner.runMain
)
