/**
 * App under test: a `DatabaseSink` with a batch handler that bulk-inserts every record of the
 * driver's input into a Postgres table without a unique constraint (a duplicate would show as a
 * second row), one row per record: its `id`, where it came from (`partition_id`,
 * `source_offset`) and who wrote it (`writer`: instance, runtime, pid). Poison records (a `v`
 * that is not a number) do not decode: they go to the dead letter topic, through the sink's
 * outbox.
 *
 *   tsx test/apps/postgres.ts | bun test/apps/postgres.ts | deno run -A test/apps/postgres.ts
 *
 * with SKEIN_APPLICATION_ID, KAFKA_BROKERS, SKEIN_DEAD_LETTER_TOPIC, DATABASE_URL,
 * CHAOS_INPUT_TOPIC, CHAOS_OUTPUT_TOPIC (the dead letter topic: the sink writes no other),
 * CHAOS_TABLE and SKEIN_CLIENT_ID (and any other SKEIN_* setting) in the environment. The chaos
 * harness (`npm run chaos -- --app postgres`) creates the table and checks it.
 */
import { PgClient } from "@effect/sql-pg"
import { Config, Context, Effect, Layer, Schema } from "effect"
import { DatabaseSink, Topic } from "../../src/index.ts"
import { currentRuntime, runAppWith } from "./main.ts"
import { InputValue } from "./model.ts"

/** The table the sink writes, and this process's name in its `writer` column. */
class Rows extends Context.Tag("chaos/Rows")<Rows, { readonly table: string; readonly writer: string }>() {}

const rows = Layer.effect(
  Rows,
  Effect.map(
    Config.all({ table: Config.string("CHAOS_TABLE"), client: Config.withDefault(Config.string("SKEIN_CLIENT_ID"), "postgres") }),
    ({ client, table }) => ({ table, writer: `${client}/${currentRuntime()}/${process.pid}` })
  )
)

// A database that cannot be reached at startup ends the process ("let it crash": the harness restarts it).
// Its connections carry the instance's name (application_name): the harness finds its open transactions by it.
const database = DatabaseSink.connect(PgClient.layerConfig({
  url: Config.redacted("DATABASE_URL"),
  maxConnections: Config.succeed(4),
  applicationName: Config.withDefault(Config.string("SKEIN_CLIENT_ID"), "postgres")
}))

runAppWith(
  ({ input }) =>
    DatabaseSink.batch({
      name: "postgres",
      inputs: [Topic.make({ name: input, key: Schema.String, value: Topic.json(InputValue) })],
      handler: (records, sql) =>
        Effect.flatMap(Rows, ({ table, writer }) =>
          sql`INSERT INTO ${sql(table)} ${
            sql.insert(records.map((r) => ({ id: r.value.id, partition_id: r.partition, source_offset: r.offset, writer })))
          }`)
    }),
  Layer.orDie(Layer.merge(database, rows))
)
