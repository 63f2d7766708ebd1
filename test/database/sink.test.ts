/**
 * `DatabaseSink` against the run's real Postgres and broker: rows and offsets
 * commit in one database transaction, dead letters are published exactly
 * once, positions come from the database (Kafka's committed offsets are
 * ignored), and an old owner's late transaction is fenced by the epoch.
 */
import { assert, describe, it } from "@effect/vitest"
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Cause, Data, Deferred, Effect, Fiber, Redacted, Schema } from "effect"
import { DatabaseSink, ErrorRule, Runner, SkeinConfig, Topic } from "../../src/index.ts"
import * as SinkStore from "../../src/internal/database/SinkStore.ts"
import { brokers, createTopics, eventually, groupOffsets, offsets, produce, readCommitted, setGroupOffsets, unique } from "../helpers/kafka.ts"
import { databaseUrl, positions, startSink, withSql } from "./helpers.ts"

const Order = Schema.Struct({ id: Schema.String, amount: Schema.Number })

class Rejected extends Data.TaggedError("Rejected")<{ readonly id: string }> {}

/** A topic, its dead letter topic, and a table without a unique constraint (a duplicate would show). */
const setup = (partitions = 2) =>
  Effect.gen(function*() {
    const input = unique("db-in")
    const dlq = unique("db-dlq")
    const table = unique("orders").replace(/-/g, "_")
    yield* createTopics([{ name: input, partitions }, { name: dlq, partitions: 1 }])
    yield* withSql((sql) => sql`CREATE TABLE ${sql(table)} (id TEXT NOT NULL, amount INTEGER NOT NULL)`)
    const In = Topic.make({ name: input, key: Schema.String, value: Topic.json(Order) })
    return { input, dlq, table, In, group: unique("db-app") }
  })

const order = (id: string, amount: number, partition: number) => ({ key: id, value: JSON.stringify({ id, amount }), partition })

/** The table's ids, sorted (a duplicate appears twice). */
const ids = (table: string) =>
  withSql((sql) => Effect.map(sql<{ id: string }>`SELECT id FROM ${sql(table)}`, (rows) => rows.map((r) => r.id).sort()))

/** Waits until the sink's offsets rows of `group` reach the end of every partition of `topic`. */
const reachedEnd = (group: string, topic: string) =>
  eventually(
    Effect.gen(function*() {
      const ends = yield* offsets(topic)
      const stored = yield* withSql((sql) => positions(sql, group))
      return ends.every((e) => stored.get(`${topic}/${e.partition}`) === e.lastStable)
    }),
    { what: `the offsets table of ${group} to reach the end of ${topic}` }
  )

const insert = (sql: SqlClient.SqlClient, table: string, record: { readonly value: typeof Order.Type }) =>
  sql`INSERT INTO ${sql(table)} (id, amount) VALUES (${record.value.id}, ${record.value.amount})`

describe("DatabaseSink", () => {
  it.scopedLive("commits rows with their offsets; a poison and a rejected record reach the dead letter topic once; the rejected record's write rolls back", () =>
    Effect.gen(function*() {
      const { dlq, group, In, input, table } = yield* setup()
      yield* produce(input, [
        order("a", 10, 0),
        { key: "b", value: "{not json", partition: 0 },
        order("c", -1, 0),
        order("d", 40, 1),
        order("e", 50, 1)
      ])
      const sink = DatabaseSink.make({
        name: "orders",
        inputs: [In],
        // The write happens before the check: the savepoint must undo it.
        handler: (record, sql) =>
          Effect.zipRight(insert(sql, table, record), record.value.amount < 0 ? Effect.fail(new Rejected({ id: record.value.id })) : Effect.void),
        rules: [ErrorRule.tagged("Rejected", { then: "dlq" })],
        kafkaCommitInterval: "0 millis"
      })
      yield* startSink(sink, { applicationId: group, deadLetterTopic: dlq })
      yield* reachedEnd(group, input)
      assert.deepStrictEqual(yield* ids(table), ["a", "d", "e"])
      // Dead letters are published from the outbox after the database commit: once it is emptied, they are on the
      // topic (the offsets table can reach the end before that).
      yield* eventually(withSql((sql) =>
        Effect.map(sql<{ n: string }>`SELECT count(*) AS n FROM skein_dead_letters WHERE group_id = ${group}`, ([row]) => Number(row?.n) === 0)
      ), { what: "the outbox to be emptied" })
      const dead = yield* readCommitted(dlq)
      assert.deepStrictEqual(dead.map((r) => r.key).sort(), ["b", "c"])
      assert.include(dead.find((r) => r.key === "c")?.headers["skein.error"] ?? "", "Rejected")
      // The group's Kafka offsets follow the database's (lag monitoring).
      const kafkaOffsets = yield* groupOffsets(group, input)
      const ends = yield* offsets(input)
      for (const end of ends) assert.strictEqual(kafkaOffsets.get(end.partition), end.lastStable)
    }))

  it.scopedLive("resumes from the database's positions, whatever Kafka's committed offsets say", () =>
    Effect.gen(function*() {
      const { group, In, input, table } = yield* setup()
      yield* produce(input, [order("a", 1, 0), order("b", 2, 0), order("c", 3, 1), order("d", 4, 1)])
      const sink = DatabaseSink.batch({
        name: "orders",
        inputs: [In],
        handler: (records, sql) =>
          sql`INSERT INTO ${sql(table)} ${sql.insert(records.map((r) => ({ id: r.value.id, amount: r.value.amount })))}`,
        kafkaCommitInterval: "0 millis"
      })
      yield* Effect.scoped(Effect.gen(function*() {
        yield* startSink(sink, { applicationId: group })
        yield* reachedEnd(group, input)
      }))
      yield* produce(input, [order("e", 5, 0), order("f", 6, 1)])
      // Kafka's offsets moved past "e" on partition 0 and back to the start on partition 1.
      yield* setGroupOffsets(group, input, [{ partition: 0, offset: 3 }, { partition: 1, offset: 0 }])
      yield* startSink(sink, { applicationId: group })
      yield* reachedEnd(group, input)
      assert.deepStrictEqual(yield* ids(table), ["a", "b", "c", "d", "e", "f"])
    }))

  it.scopedLive("fences an old owner: its late transaction fails the epoch check and rolls back", () =>
    Effect.gen(function*() {
      const { group, In, input, table } = yield* setup(1)
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      let holdCalls = 0
      const sink = DatabaseSink.make({
        name: "orders",
        inputs: [In],
        handler: (record, sql) =>
          Effect.gen(function*() {
            yield* insert(sql, table, record)
            if (record.value.id !== "hold") return
            holdCalls++
            // The first attempt's transaction stays open until a newer owner took the partition.
            yield* Deferred.succeed(entered, undefined)
            yield* Deferred.await(release)
          })
      })
      yield* produce(input, [order("a", 1, 0)])
      const instance = yield* startSink(sink, { applicationId: group })
      yield* reachedEnd(group, input)
      yield* produce(input, [order("hold", 2, 0), order("b", 3, 0)])
      yield* Deferred.await(entered)
      // A newer owner takes partition 0 in the database (what a task's start does after fencing).
      const claim = yield* withSql((sql) =>
        SinkStore.make(sql, DatabaseSink.defaultTables).claim(group, 0, [input], new Map())
      )
      assert.strictEqual(claim.positions.get(input), 1)
      yield* Deferred.succeed(release, undefined)
      // The old owner's commit updates no row: its transaction rolls back, the task migrates, and the
      // instance takes the partition again (a newer epoch) and processes "hold" and "b" once.
      yield* eventually(Effect.sync(() => instance.stats.migrations >= 1), { what: "the old owner to be fenced" })
      yield* reachedEnd(group, input)
      assert.deepStrictEqual(yield* ids(table), ["a", "b", "hold"])
      assert.strictEqual(holdCalls, 2, "the fenced attempt ran and was rolled back; the new owner's ran once")
      assert.isUndefined(yield* Fiber.poll(instance.fiber).pipe(Effect.map((exit) => exit._tag === "Some" ? exit : undefined)))
    }))

  it.scopedLive("a user without permission on Skein's tables fails the run at startup with the fix, and its password is in no message", () =>
    Effect.gen(function*() {
      const { group, In } = yield* setup(1)
      const role = unique("limited").replace(/-/g, "_")
      const password = "hunter2-secret"
      yield* withSql((sql) => sql`CREATE ROLE ${sql(role)} LOGIN PASSWORD ${sql.unsafe(`'${password}'`)}`)
      const url = new URL(databaseUrl())
      url.username = role
      url.password = password
      const sink = DatabaseSink.make({
        name: "orders",
        inputs: [In],
        handler: () => Effect.void,
        // Fresh names: the user may not create them (no CREATE on the schema since Postgres 15).
        tables: { offsets: unique("offsets").replace(/-/g, "_"), deadLetters: unique("letters").replace(/-/g, "_") }
      })
      const error = yield* Runner.run(sink).pipe(
        Effect.provide(PgClient.layer({ url: Redacted.make(url.toString()) })),
        Effect.provide(SkeinConfig.layer({ brokers: brokers(), applicationId: group })),
        Effect.flip
      )
      assert.strictEqual(error._tag, "DatabaseError")
      if (error._tag === "DatabaseError") {
        assert.strictEqual(error.reason, "Refused")
        assert.include(error.message, "Grant the sink's user CREATE on the schema")
      }
      assert.notInclude(String(error.message), password)
      assert.notInclude(JSON.stringify(error), password)
    }))

  it.scopedLive("the database going away mid-transaction rewinds the partition, which resumes from the database: every record once", () =>
    Effect.gen(function*() {
      const { group, In, input, table } = yield* setup(1)
      const applicationName = unique("db-gone")
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const sink = DatabaseSink.batch({
        name: "orders",
        inputs: [In],
        handler: (records, sql) =>
          Effect.gen(function*() {
            yield* sql`INSERT INTO ${sql(table)} ${sql.insert(records.map((r) => ({ id: r.value.id, amount: r.value.amount })))}`
            if (!records.some((r) => r.value.id === "hold") || (yield* Deferred.isDone(release))) return
            // The batch's transaction is open, its rows inserted, when its connection is cut.
            yield* Deferred.succeed(entered, undefined)
            yield* Deferred.await(release)
          })
      })
      yield* produce(input, [order("a", 1, 0), order("hold", 2, 0), order("b", 3, 0)])
      const stats = Runner.makeStats()
      const fiber = yield* Effect.forkScoped(
        Runner.runWithStats(sink, stats).pipe(
          Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl()), applicationName })),
          Effect.provide(SkeinConfig.layer({ brokers: brokers(), applicationId: group }))
        )
      )
      yield* Deferred.await(entered)
      yield* withSql((sql) =>
        sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ${applicationName}`
      )
      yield* Deferred.succeed(release, undefined)
      yield* reachedEnd(group, input).pipe(
        Effect.tapError(() =>
          Effect.flatMap(Fiber.poll(fiber), (exit) =>
            Effect.logError(`the run ended: ${exit._tag === "Some" && exit.value._tag === "Failure" ? Cause.pretty(exit.value.cause) : "no"}`))
        )
      )
      assert.deepStrictEqual(yield* ids(table), ["a", "b", "hold"])
      assert.isAtLeast(stats.aborts, 1, "the batch whose connection was cut was rolled back and retried")
    }))
})
