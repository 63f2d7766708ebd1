/**
 * The Postgres job's Skein app (`skein-postgres`, bench/contenders/postgres.ts): exactly-once
 * into Postgres with `DatabaseSink.batch`. Each task's batch is one database transaction: the
 * rows (one multi-row INSERT per 5,000 records, as the at-least-once loop inserts them) and the
 * batch's input offsets in Skein's `skein_offsets` table, conditional on the task's owner epoch.
 *
 *   node --import tsx bench/apps/skein-postgres.ts --brokers B --input T --group G --state-dir D --table TABLE
 *
 * The database: DATABASE_URL (the harness sets it; never on the command line), through
 * `@effect/sql-pg` (`PgClient`, at most 10 connections, as node-postgres's pool). Each row is
 * (k, v, p, o): the record's key, value, partition and offset; the harness creates the table.
 * Prints {"event":"first-read"} when the handler first runs. Skein is loaded from its build,
 * `dist/` (or SKEIN_BENCH_BUILD), as bench/apps/skein-count.ts loads it.
 */
import { resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { parseArgs } from "node:util"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted, Schema } from "effect"
import type * as Skein from "../../src/index.ts"
import { runUntilSignalled } from "../lib/runApp.ts"
import { securityFromEnv, skeinSecurity } from "../lib/security.ts"

const { values } = parseArgs({
  options: {
    brokers: { type: "string" },
    input: { type: "string" },
    group: { type: "string" },
    "state-dir": { type: "string" },
    table: { type: "string" },
  },
})
const { brokers, input, group, table } = values
const stateDir = values["state-dir"]
const url = process.env["DATABASE_URL"]
if (brokers === undefined || input === undefined || group === undefined || stateDir === undefined || table === undefined || url === undefined) {
  console.error("usage: DATABASE_URL=... skein-postgres --brokers B --input T --group G --state-dir D --table TABLE")
  process.exit(2)
}

const build = process.env["SKEIN_BENCH_BUILD"] ?? new URL("../../dist/index.js", import.meta.url).href
const { DatabaseSink, Runner, SkeinConfig, Topic }: typeof Skein = await import(
  build.startsWith("file:") ? build : pathToFileURL(resolve(build)).href
)

/** Rows per INSERT: 4 parameters a row, Postgres binds at most 65,535. */
const CHUNK = 5000

const emit = (event: string): void => {
  process.stdout.write(`${JSON.stringify({ event, ts: Date.now() })}\n`)
}

const Input = Topic.make({ name: input, key: Schema.String, value: Schema.String })

let firstRead = false
const ToPostgres = DatabaseSink.batch({
  name: "to-postgres",
  inputs: [Input],
  handler: (records, sql) => {
    if (!firstRead) {
      firstRead = true
      emit("first-read")
    }
    const chunks: Array<typeof records> = []
    for (let start = 0; start < records.length; start += CHUNK) chunks.push(records.slice(start, start + CHUNK))
    return Effect.forEach(
      chunks,
      (chunk) => sql`INSERT INTO ${sql(table)} ${sql.insert(chunk.map((r) => ({ k: r.key ?? "", v: r.value, p: r.partition, o: r.offset })))}`,
      { discard: true },
    )
  },
})

const program = Runner.run(ToPostgres).pipe(
  Effect.provide(DatabaseSink.connect(PgClient.layer({ url: Redacted.make(url), maxConnections: 10 }))),
  Effect.provide(SkeinConfig.layer({
    applicationId: group,
    brokers: brokers.split(","),
    stateDir,
    processingGuarantee: "exactly-once",
    // An experiment's knob, unset in the benchmark: SKEIN_MAX_POLL_RECORDS, as Skein's own env config reads it.
    ...(process.env["SKEIN_MAX_POLL_RECORDS"] === undefined ? {} : { maxPollRecords: Number(process.env["SKEIN_MAX_POLL_RECORDS"]) }),
    ...skeinSecurity(securityFromEnv()),
  })),
)
runUntilSignalled(program)
