/**
 * Helpers of the `DatabaseSink` tests: the run's Postgres (test/postgresSetup.ts),
 * a sink run in this process, and the sink's tables read back with SQL.
 */
import { PgClient } from "@effect/sql-pg"
import { SqlClient } from "@effect/sql"
import { Effect, Fiber, Layer, Redacted } from "effect"
import type { Scope } from "effect"
import { inject } from "vitest"
import { Runner, SkeinConfig } from "../../src/index.ts"
import type { Topic, Transformer } from "../../src/index.ts"
import { brokers } from "../helpers/kafka.ts"

/** The run's Postgres URL: `DATABASE_URL`, else the one the global setup started. */
export const databaseUrl = (): string => process.env["DATABASE_URL"] ?? inject("databaseUrl")

/** A client of the run's Postgres. */
export const pg = (): Layer.Layer<SqlClient.SqlClient> =>
  Layer.orDie(PgClient.layer({ url: Redacted.make(databaseUrl()), maxConnections: 5 }))

/** Runs `effect` with a fresh client of the run's Postgres. */
export const withSql = <A, E>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.provide(Effect.flatMap(SqlClient.SqlClient, f), pg())

/**
 * The sink's offsets rows of `group`, as `topic/partition -> next offset`
 * (none while the sink has not created its table yet).
 */
export const positions = (sql: SqlClient.SqlClient, group: string, table = "skein_offsets") =>
  Effect.map(
    sql<{ topic: string; partition_id: number; next_offset: string | null; epoch: string }>`
      SELECT topic, partition_id, next_offset, epoch FROM ${sql(table)} WHERE group_id = ${group}`,
    (rows) => new Map(rows.map((r) => [`${r.topic}/${r.partition_id}`, r.next_offset === null ? -1 : Number(r.next_offset)]))
  ).pipe(Effect.orElseSucceed(() => new Map<string, number>()))

/** Starts a sink in this process with its own Postgres client; interrupted when the scope closes. */
export const startSink = <Inputs extends ReadonlyArray<Topic.Any>, E>(
  sink: Transformer.Transformer<Inputs, never, E, SqlClient.SqlClient>,
  options: Omit<SkeinConfig.Options, "brokers">
): Effect.Effect<{ readonly stats: Runner.Stats; readonly fiber: Fiber.RuntimeFiber<never, unknown> }, never, Scope.Scope> =>
  Effect.gen(function*() {
    const stats = Runner.makeStats()
    const fiber = yield* Effect.forkDaemon(
      Runner.runWithStats(sink, stats).pipe(
        Effect.provide(pg()),
        Effect.provide(SkeinConfig.layer({ brokers: brokers(), ...options }))
      )
    )
    yield* Effect.addFinalizer(() => Fiber.interrupt(fiber))
    return { stats, fiber }
  })
