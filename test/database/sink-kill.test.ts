/**
 * `DatabaseSink` exactly once under SIGKILL: a child process bulk-inserts
 * every record of a 3-partition topic into a table without a unique
 * constraint; it is killed mid-run (once some of its rows are there, before
 * the last) and started again; at the end the table has each input record once
 * and the offsets table is at the topic's end offsets.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Path from "node:path"
import { spawnApp } from "../helpers/appProcess.ts"
import { brokers, createTopics, eventually, offsets, produceRaw, unique } from "../helpers/kafka.ts"
import { databaseUrl, positions, withSql } from "./helpers.ts"

const app = Path.join(import.meta.dirname, "apps", "sink-app.ts")
const records = 6_000

const counts = (table: string) =>
  withSql((sql) =>
    Effect.map(
      sql<{ rows: string; ids: string }>`SELECT count(*) AS rows, count(DISTINCT id) AS ids FROM ${sql(table)}`,
      ([row]) => ({ rows: Number(row?.rows ?? 0), ids: Number(row?.ids ?? 0) })
    )
  )

describe("DatabaseSink under SIGKILL", () => {
  it.scopedLive("writes each record exactly once across a kill mid-run; the offsets table ends at the end offsets", () =>
    Effect.gen(function*() {
      const input = unique("db-kill-in")
      const group = unique("db-kill-app")
      const table = unique("kill_rows").replace(/-/g, "_")
      yield* createTopics([{ name: input, partitions: 3 }])
      yield* withSql((sql) => sql`CREATE TABLE ${sql(table)} (id TEXT NOT NULL, src TEXT NOT NULL)`)
      yield* produceRaw(input, Array.from({ length: records }, (_, i) => ({ key: `k${i % 97}`, value: `r${i}` })), 5000)
      const env = {
        SKEIN_APPLICATION_ID: group,
        KAFKA_BROKERS: brokers().join(","),
        DATABASE_URL: databaseUrl(),
        SINK_INPUT_TOPIC: input,
        SINK_TABLE: table,
        // Small batches: many transactions, so each kill lands between and inside them.
        SKEIN_MAX_POLL_RECORDS: "100",
        SKEIN_SESSION_TIMEOUT: "6 seconds",
        SKEIN_HEARTBEAT_INTERVAL: "1 second"
      }
      const killedAt: Array<number> = []
      for (const threshold of [2_000]) {
        const child = yield* spawnApp(app, env)
        yield* eventually(Effect.map(counts(table), (c) => c.rows >= threshold), {
          timeout: 90_000,
          what: `${threshold} rows (app output: ${child.output().slice(-2000)})`
        })
        yield* child.signal("SIGKILL")
        yield* child.exited
        killedAt.push((yield* counts(table)).rows)
      }
      // The kill landed before the last record: the restart had work left.
      console.log(`killed at ${killedAt.join(" and ")} of ${records} rows`)
      for (const rows of killedAt) assert.isBelow(rows, records)
      const last = yield* spawnApp(app, env)
      const ends = yield* offsets(input)
      yield* eventually(
        Effect.map(withSql((sql) => positions(sql, group)), (stored) =>
          ends.every((e) => stored.get(`${input}/${e.partition}`) === e.lastStable)),
        { timeout: 90_000, what: `the offsets table at the end offsets (app output: ${last.output().slice(-2000)})` }
      )
      const final = yield* counts(table)
      assert.deepStrictEqual(final, { rows: records, ids: records }, `killed at ${killedAt.join(", ")} rows`)
      yield* last.signal("SIGTERM")
      assert.strictEqual(yield* last.exited, 0)
    }), { timeout: 240_000 })
})
