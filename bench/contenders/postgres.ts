/**
 * The Postgres job's contenders (`npm run bench -- --job postgres`, bench/README.md "Postgres
 * job"): the same input into a Postgres table, one row per input record.
 *
 *  - `skein-postgres`: bench/apps/skein-postgres.ts, Skein's `DatabaseSink.batch` (exactly-once:
 *    rows and offsets in one database transaction per task batch), from the build `dist/`.
 *  - `kafkajs-pg-loop`: bench/apps/kafkajs-postgres.ts, the at-least-once loop a user writes with
 *    kafkajs and `pg` (insert the batch, then commit its offsets to the group).
 *
 * `skein-eos` (bench/contenders/skein.ts) runs beside them in that job with its count job's
 * throughput run: Skein's Kafka-to-Kafka exactly-once on the same input, for reference.
 */
import { join } from "node:path"
import { buildOnce } from "./skein.ts"
import type { Command } from "../lib/proc.ts"
import type { PostgresAppSpec, ProcessContender } from "./types.ts"

/** The app's arguments (DATABASE_URL goes in the environment, never on the command line). */
const args = (s: PostgresAppSpec, stateful: boolean): ReadonlyArray<string> => [
  "--brokers",
  s.brokers,
  "--input",
  s.input,
  "--group",
  s.group,
  "--table",
  s.table,
  ...(stateful ? ["--state-dir", s.stateDir] : []),
]

/** Node's flags of a profiled or diagnosed Skein run (as bench/contenders/skein.ts gives skein-eos). */
const nodeFlags = (): ReadonlyArray<string> => [
  ...(process.env["SKEIN_BENCH_CPU_PROF"] ? ["--cpu-prof", `--cpu-prof-dir=${process.env["SKEIN_BENCH_CPU_PROF"]}`] : []),
  ...(process.env["SKEIN_BENCH_NODE_FLAGS"] ?? "").split(" ").filter((f) => f !== ""),
]

const notCountJob = (name: string) => (): Command => {
  throw new Error(`${name} runs in the Postgres job only (--job postgres)`)
}

export const skeinPostgres: ProcessContender = {
  kind: "process",
  name: "skein-postgres",
  description:
    "Skein exactly-once into Postgres: DatabaseSink.batch, one database transaction per task batch (multi-row INSERTs of " +
    `5,000 rows, then the offsets in skein_offsets conditional on the owner epoch), @effect/sql-pg (10 connections); Node ${process.version.replace(/^v/, "")}, 1 thread`,
  hasState: false,
  setup: async (ctx) => {
    try {
      await buildOnce(ctx.root)
      return { ok: true }
    } catch (e) {
      return { ok: false, reason: String(e).slice(0, 400) }
    }
  },
  command: notCountJob("skein-postgres"),
  postgres: (s) => ({
    cmd: process.execPath,
    args: [...nodeFlags(), "--import", "tsx", join("bench", "apps", "skein-postgres.ts"), ...args(s, true)],
  }),
}

export const kafkajsPgLoop: ProcessContender = {
  kind: "process",
  name: "kafkajs-pg-loop",
  description:
    "kafkajs 2.2.4 as published eachBatch loop (6 partitions at a time) + pg 8 Pool (10 connections): multi-row INSERTs of " +
    "5,000 rows (autocommit), then commit the batch's offsets to the group (at-least-once); Node, 1 thread",
  hasState: false,
  setup: async () => ({ ok: true }),
  command: notCountJob("kafkajs-pg-loop"),
  postgres: (s) => ({
    cmd: process.execPath,
    args: ["--import", "tsx", join("bench", "apps", "kafkajs-postgres.ts"), ...args(s, false)],
  }),
}
