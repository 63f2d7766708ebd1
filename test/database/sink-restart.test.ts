/**
 * `DatabaseSink` across a restart of its Postgres server: a server of the
 * test's own (not the run's shared one) is stopped while the sink runs, records
 * arrive while it is down (their transactions fail: the partition rewinds,
 * with backoff), and it starts again on the same data folder and port. The
 * sink resumes from the database's positions: each record's row once, none
 * lost, and the offsets table at the input's end offsets. Down for longer than
 * the run retries, the run ends with the `DatabaseError` (`Unavailable`), or
 * `DeliveryFailed` caused by it.
 */
import { PgClient } from "@effect/sql-pg"
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Schema } from "effect"
import { DatabaseSink, Health, Runner, SkeinConfig, Topic } from "../../src/index.ts"
import { PostgresServer } from "../../src/testing/index.ts"
import { brokers, createTopics, eventually, offsets, produceRaw, unique } from "../helpers/kafka.ts"
import { positions } from "./helpers.ts"

const perPhase = 1_000

describe("DatabaseSink across a database restart", () => {
  it.scopedLive("the server stopped mid-run and started again: every record's row once, the offsets at the end", () =>
    Effect.gen(function*() {
      const server = yield* PostgresServer.make({ embedded: true })
      const client = Layer.orDie(PgClient.layer({ url: server.url, maxConnections: 2 }))
      const withSql = <A, E>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>) =>
        Effect.provide(Effect.flatMap(SqlClient.SqlClient, f), client)
      const input = unique("db-restart-in")
      const group = unique("db-restart-app")
      yield* createTopics([{ name: input, partitions: 2 }])
      yield* withSql((sql) => sql`CREATE TABLE rows (id TEXT NOT NULL)`)
      const counts = withSql((sql) =>
        Effect.map(
          sql<{ rows: string; ids: string }>`SELECT count(*) AS rows, count(DISTINCT id) AS ids FROM rows`,
          ([row]) => ({ rows: Number(row?.rows ?? 0), ids: Number(row?.ids ?? 0) })
        ))
      const phase = (n: number) => Array.from({ length: perPhase }, (_, i) => ({ key: `k${i % 31}`, value: `p${n}-${i}` }))

      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const sink = DatabaseSink.batch({
        name: "rows",
        inputs: [In],
        handler: (records, sql) => sql`INSERT INTO rows ${sql.insert(records.map((r) => ({ id: r.value })))}`
      })
      const stats = Runner.makeStats()
      const fiber = yield* Effect.forkScoped(
        Runner.runWithStats(sink, stats).pipe(
          Effect.provide(DatabaseSink.connect(PgClient.layer({ url: server.url, maxConnections: 3 }))),
          Effect.provide(SkeinConfig.layer({ brokers: brokers(), applicationId: group, deliveryBackoff: Duration.millis(100) }))
        )
      )

      yield* produceRaw(input, phase(1))
      yield* eventually(Effect.map(counts, (c) => c.rows > 0), { what: "the sink's first rows" })
      // Down while the sink runs (and, likely, while phase 1's batches commit).
      yield* server.stop
      yield* produceRaw(input, phase(2))
      yield* eventually(Effect.sync(() => stats.aborts > 0), { what: "a rewind while the database is down" })
      yield* server.start

      yield* eventually(Effect.map(counts, (c) => c.rows >= 2 * perPhase), { what: "every row" })
      const ends = yield* offsets(input)
      yield* eventually(
        Effect.map(withSql((sql) => positions(sql, group)), (at) =>
          ends.every((end) => at.get(`${input}/${end.partition}`) === end.lastStable)),
        { what: "the offsets table at the end offsets" }
      )
      assert.deepStrictEqual(yield* counts, { rows: 2 * perPhase, ids: 2 * perPhase })
      assert.isTrue(stats.aborts > 0)
      // Health and metrics: each running task's owner epoch (a rewound one claimed again: 2), no dead letter pending.
      const epochs = yield* withSql((sql) =>
        sql<{ partition_id: number; epoch: string }>`SELECT partition_id, epoch FROM skein_offsets WHERE group_id = ${group}`)
      const health = yield* Health.snapshot(stats)
      assert.deepStrictEqual(
        health.sinkPartitions,
        [...epochs].sort((a, b) => a.partition_id - b.partition_id)
          .map((row) => ({ partition: row.partition_id, epoch: Number(row.epoch), outboxPending: 0 }))
      )
      assert.isTrue(health.sinkPartitions.some((p) => p.epoch >= 2), JSON.stringify(health.sinkPartitions))
      const text = Health.prometheus(stats)
      for (const { epoch, partition } of health.sinkPartitions) {
        assert.include(text, `skein_sink_owner_epoch{partition="${partition}"} ${epoch}`)
        assert.include(text, `skein_sink_outbox_pending_records{partition="${partition}"} 0`)
      }
      assert.isNull(fiber.unsafePoll(), "the run is still going")
      yield* Fiber.interrupt(fiber)

      // Down for longer than the run retries (maxDeliveryFailures 2): it ends with the DatabaseError.
      const second = yield* Effect.forkScoped(
        Runner.run(sink).pipe(
          Effect.provide(DatabaseSink.connect(PgClient.layer({ url: server.url, maxConnections: 3 }))),
          Effect.provide(SkeinConfig.layer({
            brokers: brokers(),
            applicationId: unique("db-restart-short"),
            deliveryBackoff: Duration.millis(50),
            maxDeliveryFailures: 2
          })),
          Effect.flip
        )
      )
      yield* eventually(Effect.map(counts, (c) => c.rows >= 4 * perPhase), { what: "the second run's rows" })
      yield* server.stop
      yield* produceRaw(input, phase(3))
      const error = yield* Fiber.join(second)
      // The last failure a batch's (DeliveryFailed) or a task start's, claiming the partition (the DatabaseError itself).
      const last = error._tag === "DeliveryFailed" ? error.cause : error
      assert.strictEqual(last._tag, "DatabaseError", error.message)
      if (last._tag === "DatabaseError") assert.strictEqual(last.reason, "Unavailable", error.message)
      yield* server.start
    }), 60_000)
})
