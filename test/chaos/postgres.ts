/**
 * The chaos harness's Postgres app (`--app postgres`, `test/apps/postgres.ts`): the database it
 * writes, how far it is behind, and what the verifier reads back.
 *
 * - `start`: the database (`DATABASE_URL`, else an embedded server from `skein/testing`'s
 *   `PostgresServer`, stopped with the run's scope), a client of the harness's own, and the
 *   app's table: `id, partition_id, source_offset, writer`, no key and no unique constraint, so
 *   a record written twice shows as two rows.
 * - `lag`: the records of the input past the group's next offsets in the sink's offsets table.
 *   The group's Kafka offsets follow the database's only every `kafkaCommitInterval` after a
 *   batch (lag monitoring, never a position), so they are not the measure of progress here.
 * - `read`: the table, the group's rows of the offsets table, and the checks of
 *   `postgresVerifier.ts`.
 */
import { PgClient } from "@effect/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer, Redacted } from "effect"
import type { Scope } from "effect"
import * as PostgresServer from "../../src/testing/PostgresServer.ts"
import type { OffsetRow, PostgresCheck, Row } from "./postgresVerifier.ts"
import { checkPostgres } from "./postgresVerifier.ts"
import type { PauseHook } from "./faults.ts"
import type { PartitionLog, WireClient } from "./wire.ts"

/** Every how many ids the driver writes a poison record (at `id % POISON_EVERY === POISON_AT`). */
export const POISON_EVERY = 2500
const POISON_AT = 1234

/** The ids the driver writes as poison records for the Postgres app: 40 in 100,000. */
export const isPoison = (id: number): boolean => id % POISON_EVERY === POISON_AT

/** The sink's offsets table (the default `DatabaseSink` tables). */
const OFFSETS_TABLE = "skein_offsets"

export interface PostgresRun {
  /** The database URL the apps get (`DATABASE_URL`). */
  readonly url: Redacted.Redacted<string>
  readonly kind: PostgresServer.Kind
  /** The app's table. */
  readonly table: string
  readonly sql: SqlClient.SqlClient
}

/** The run's database, a client of it and the app's table `<runId>_rows`. */
export const start = (runId: string): Effect.Effect<PostgresRun, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const server = yield* PostgresServer.make()
    const context = yield* Layer.build(PgClient.layer({ url: server.url, maxConnections: 2 }))
    const sql = Context.get(context, SqlClient.SqlClient)
    const table = `${runId.replace(/[^a-zA-Z0-9]/g, "_")}_rows`
    yield* sql`CREATE TABLE ${sql(table)} (
      id BIGINT NOT NULL,
      partition_id INTEGER NOT NULL,
      source_offset BIGINT NOT NULL,
      writer TEXT NOT NULL
    )`
    return { url: server.url, kind: server.kind, table, sql }
  })

const toNumber = (u: unknown): number => (typeof u === "number" ? u : Number(u))

const offsetRows = (run: PostgresRun, groupId: string): Effect.Effect<ReadonlyArray<OffsetRow>, unknown> =>
  Effect.map(
    run.sql<{ topic: string; partition_id: number; next_offset: string | null }>`
      SELECT topic, partition_id, next_offset FROM ${run.sql(OFFSETS_TABLE)} WHERE group_id = ${groupId}`,
    (rows) =>
      rows.map((r) => ({ topic: r.topic, partition: toNumber(r.partition_id), next: r.next_offset === null ? null : toNumber(r.next_offset) }))
  )

/**
 * The input records past the group's next offsets in the offsets table (from the start of a
 * partition without a row yet); fails while the sink has not created its table.
 */
export const lag = (run: PostgresRun, wire: WireClient, groupId: string, topic: string): Effect.Effect<number, unknown> =>
  Effect.gen(function*() {
    const ends = yield* wire.ends(topic)
    const next = new Map((yield* offsetRows(run, groupId)).filter((o) => o.topic === topic).map((o) => [o.partition, o.next ?? 0]))
    return ends.reduce((n, e) => n + Math.max(0, e.highWatermark - (next.get(e.partition) ?? 0)), 0)
  })

/**
 * The Postgres app's pauses (`Faults.PauseHook`): an instance holds a transaction open that its
 * epoch check will reject when one of its connections (named by the instance's id) is in a
 * transaction that wrote to the app's table and not yet to the offsets table (the offsets'
 * update comes last, conditional on the epoch). Its partitions (its last status line's) are taken
 * over once each one's epoch in the offsets table is above the one it had when it froze.
 */
export const pauseHook = (run: PostgresRun, groupId: string, topic: string): PauseHook => {
  const epochs = Effect.map(
    run.sql<{ partition_id: number; epoch: string }>`
      SELECT partition_id, epoch FROM ${run.sql(OFFSETS_TABLE)} WHERE group_id = ${groupId} AND topic = ${topic}`,
    (rows) => new Map(rows.map((r) => [toNumber(r.partition_id), toNumber(r.epoch)]))
  )
  return {
    holdsTransaction: (instance) =>
      Effect.map(
        run.sql<{ n: string }>`SELECT count(*) AS n FROM pg_stat_activity a
          WHERE a.application_name = ${instance.id} AND a.xact_start IS NOT NULL
          AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.relation = ${run.table}::regclass)
          AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.relation = ${OFFSETS_TABLE}::regclass)`,
        (rows) => toNumber(rows[0]?.n ?? 0) > 0
      ).pipe(Effect.orElseSucceed(() => false)),
    takenOver: (instance) =>
      Effect.gen(function*() {
        const assigned = instance.lastStatus?.["assigned"]
        const held = Array.isArray(assigned) ? assigned.filter((p): p is number => typeof p === "number") : []
        const before = yield* Effect.orElseSucceed(epochs, () => new Map<number, number>())
        return Effect.map(epochs, (now) => held.every((p) => (now.get(p) ?? 0) > (before.get(p) ?? 0))).pipe(
          Effect.orElseSucceed(() => false)
        )
      })
  }
}

/** Reads the table and the offsets table back and checks them against the input and the dead letters. */
export const verify = (
  run: PostgresRun,
  params: {
    readonly name: string
    readonly groupId: string
    readonly inputTopic: string
    readonly input: ReadonlyArray<PartitionLog>
    readonly deadLetters: ReadonlyArray<PartitionLog>
  }
): Effect.Effect<PostgresCheck, unknown> =>
  Effect.gen(function*() {
    const rows = yield* run.sql<{ id: string; partition_id: number; source_offset: string; writer: string }>`
      SELECT id, partition_id, source_offset, writer FROM ${run.sql(run.table)}`
    return checkPostgres(params.name, {
      inputTopic: params.inputTopic,
      input: params.input,
      rows: rows.map((r): Row => ({
        id: toNumber(r.id),
        partition: toNumber(r.partition_id),
        offset: toNumber(r.source_offset),
        writer: r.writer
      })),
      offsets: yield* offsetRows(run, params.groupId),
      deadLetters: params.deadLetters
    })
  })

/** The URL as the apps' environment takes it (the run's own database: no secret to keep). */
export const urlForApps = (run: PostgresRun): string => Redacted.value(run.url)
