/**
 * `DatabaseSink` under `TestDriver`, on the run's Postgres (no broker): a
 * batch handler gets a piped poll's records in one call, in one transaction;
 * a per-record handler's failed write rolls back to its savepoint before its
 * rule dead-letters it; dead letters land in the driver's dead letter topic.
 * The driver keeps the sink's offsets table as a runner does: positions
 * committed with the rows, an owner epoch per partition, a batch of an old
 * owner rejected and rolled back after `takeOver`, its records run again by
 * the next batch.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Data, Effect, Exit, Option, Schema } from "effect"
import type { SqlClient } from "@effect/sql"
import { DatabaseSink, ErrorRule, SkeinError, Topic } from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"
import { unique } from "../helpers/kafka.ts"
import { pg, withSql } from "./helpers.ts"

const Order = Schema.Struct({ id: Schema.String, amount: Schema.Number })
const Orders = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Order) })

class Rejected extends Data.TaggedError("Rejected")<{ readonly id: string }> {}

const table = () =>
  Effect.gen(function*() {
    const name = unique("driver_orders").replace(/-/g, "_")
    yield* withSql((sql) => sql`CREATE TABLE ${sql(name)} (id TEXT NOT NULL, amount INTEGER NOT NULL)`)
    return name
  })

const ids = (name: string) =>
  withSql((sql) => Effect.map(sql<{ id: string }>`SELECT id FROM ${sql(name)}`, (rows) => rows.map((r) => r.id).sort()))

describe("DatabaseSink under TestDriver", () => {
  it.scoped("a batch handler gets a poll's records in one call; a poison record is dead-lettered", () =>
    Effect.gen(function*() {
      const name = yield* table()
      const calls: Array<number> = []
      const sink = DatabaseSink.batch({
        name: "orders",
        inputs: [Orders],
        handler: (records, sql) =>
          Effect.zipRight(
            Effect.sync(() => calls.push(records.length)),
            sql`INSERT INTO ${sql(name)} ${sql.insert(records.map((r) => ({ id: r.value.id, amount: r.value.amount })))}`
          )
      })
      const driver = yield* TestDriver.make(sink, { deadLetterTopic: "dlq" })
      yield* driver.pipeAll(Orders, [{ key: "a", value: { id: "a", amount: 1 } }, { key: "b", value: { id: "b", amount: 2 } }]).pipe(
        Effect.provide(pg())
      )
      yield* driver.pipeRaw(Orders, { key: Buffer.from("c"), value: Buffer.from("{not json") }).pipe(Effect.provide(pg()))
      assert.deepStrictEqual(calls, [2])
      assert.deepStrictEqual(yield* ids(name), ["a", "b"])
      assert.deepStrictEqual((yield* driver.deadLetters).map((r) => r.key?.toString()), ["c"])
    }))

  it.scoped("a per-record handler's failed write rolls back to its savepoint before its rule dead-letters it", () =>
    Effect.gen(function*() {
      const name = yield* table()
      const sink = DatabaseSink.make({
        name: "orders",
        inputs: [Orders],
        handler: (record, sql) =>
          Effect.zipRight(
            sql`INSERT INTO ${sql(name)} (id, amount) VALUES (${record.value.id}, ${record.value.amount})`,
            record.value.amount < 0 ? Effect.fail(new Rejected({ id: record.value.id })) : Effect.void
          ),
        rules: [ErrorRule.tagged("Rejected", { then: "dlq" })]
      })
      const driver = yield* TestDriver.make(sink, { deadLetterTopic: "dlq" })
      yield* driver.pipeAll(Orders, [
        { key: "a", value: { id: "a", amount: 1 } },
        { key: "x", value: { id: "x", amount: -1 } },
        { key: "b", value: { id: "b", amount: 2 } }
      ]).pipe(Effect.provide(pg()))
      assert.deepStrictEqual(yield* ids(name), ["a", "b"])
      const dead = yield* driver.deadLetters
      assert.deepStrictEqual(dead.map((r) => r.key?.toString()), ["x"])
    }))
})

describe("TestDriver: a DatabaseSink's offsets and owner epochs", () => {
  const insertBatch = (name: string) =>
    DatabaseSink.batch({
      name: "orders",
      inputs: [Orders],
      handler: (records, sql) =>
        sql`INSERT INTO ${sql(name)} ${sql.insert(records.map((r) => ({ id: r.value.id, amount: r.value.amount })))}`
    })
  const order = (id: string, amount = 1) => ({ key: id, value: { id, amount } })
  /** The driver's offsets table as [partition, next offset (null: none), epoch] rows. */
  const at = (driver: { readonly positions: Effect.Effect<ReadonlyArray<TestDriver.SinkPosition>, SkeinError.DatabaseError, SqlClient.SqlClient> }) =>
    Effect.map(driver.positions, (rows) => rows.map((p) => [p.partition, Option.getOrNull(p.nextOffset), p.epoch]))

  it.scoped("positions commit with the rows; after takeOver the old owner's batch is rejected and rolled back, and runs again once reclaimed", () =>
    Effect.gen(function*() {
      const name = yield* table()
      const driver = yield* TestDriver.make(insertBatch(name))
      yield* driver.pipeAll(Orders, [order("a"), order("b")])
      yield* driver.pipeAll(Orders, [order("c", 1), order("d", 1)].map((o) => ({ ...o, partition: 1 })))
      assert.deepStrictEqual((yield* driver.positions).map((p) => p.topic), ["orders", "orders"])
      assert.deepStrictEqual(yield* at(driver), [[0, 2, 1], [1, 2, 1]])

      assert.strictEqual(yield* driver.takeOver(0), 2)
      const rejected = yield* Effect.flip(driver.pipe(Orders, "e", { id: "e", amount: 1 }))
      assert.strictEqual(rejected._tag, "TaskMigrated")
      // Rolled back: no row e, partition 0 still at 2, under the new owner's epoch.
      assert.deepStrictEqual(yield* ids(name), ["a", "b", "c", "d"])
      assert.deepStrictEqual(yield* at(driver), [[0, 2, 2], [1, 2, 1]])

      // Partition 1's owner is unaffected; partition 0 is claimed again (epoch 3) and runs e before f.
      yield* driver.pipe(Orders, "f", { id: "f", amount: 1 })
      assert.deepStrictEqual(yield* ids(name), ["a", "b", "c", "d", "e", "f"])
      assert.deepStrictEqual(yield* at(driver), [[0, 4, 3], [1, 2, 1]])
    }).pipe(Effect.provide(pg())))

  it.scoped("a dead letter of a rejected batch is neither published nor lost: the batch that runs it again publishes it once", () =>
    Effect.gen(function*() {
      const name = yield* table()
      const sink = DatabaseSink.make({
        name: "orders",
        inputs: [Orders],
        handler: (record, sql) =>
          Effect.zipRight(
            sql`INSERT INTO ${sql(name)} (id, amount) VALUES (${record.value.id}, ${record.value.amount})`,
            record.value.amount < 0 ? Effect.fail(new Rejected({ id: record.value.id })) : Effect.void
          ),
        rules: [ErrorRule.tagged("Rejected", { then: "dlq" })]
      })
      const driver = yield* TestDriver.make(sink, { deadLetterTopic: "dlq" })
      yield* driver.pipe(Orders, "a", { id: "a", amount: 1 })
      yield* driver.takeOver()
      const rejected = yield* Effect.flip(driver.pipeAll(Orders, [order("x", -1), order("b")]))
      assert.strictEqual(rejected._tag, "TaskMigrated")
      assert.deepStrictEqual(yield* driver.deadLetters, [])
      assert.deepStrictEqual(yield* ids(name), ["a"])

      yield* driver.pipe(Orders, "c", { id: "c", amount: 1 })
      assert.deepStrictEqual((yield* driver.deadLetters).map((r) => r.key?.toString()), ["x"])
      assert.deepStrictEqual(yield* ids(name), ["a", "b", "c"])
      assert.deepStrictEqual(yield* at(driver), [[0, 4, 3]])
      // Out of the outbox once published: a later owner's claim publishes it no more.
      yield* driver.takeOver()
      yield* Effect.flip(driver.pipe(Orders, "d", { id: "d", amount: 1 }))
      yield* driver.pipe(Orders, "e", { id: "e", amount: 1 })
      assert.deepStrictEqual((yield* driver.deadLetters).map((r) => r.key?.toString()), ["x"])
      assert.deepStrictEqual(yield* ids(name), ["a", "b", "c", "d", "e"])
    }).pipe(Effect.provide(pg())))

  it.scoped("a fatal error commits the records before it with their offsets; the failed record runs first in the next batch", () =>
    Effect.gen(function*() {
      const name = yield* table()
      const sink = DatabaseSink.make({
        name: "orders",
        inputs: [Orders],
        handler: (record, sql) =>
          Effect.if(record.value.amount < 0, {
            onTrue: () => Effect.fail(new Rejected({ id: record.value.id })),
            onFalse: () => sql`INSERT INTO ${sql(name)} (id, amount) VALUES (${record.value.id}, ${record.value.amount})`
          })
      })
      const driver = yield* TestDriver.make(sink)
      const failed = yield* Effect.flip(driver.pipeAll(Orders, [order("a"), order("x", -1), order("b")]))
      assert.strictEqual(failed._tag, "Rejected")
      assert.deepStrictEqual(yield* ids(name), ["a"])
      assert.deepStrictEqual(yield* at(driver), [[0, 1, 1]])
      // Claimed again: x (offset 1) runs first and fails again; nothing after it commits.
      const again = yield* Effect.flip(driver.pipe(Orders, "c", { id: "c", amount: 1 }))
      assert.strictEqual(again._tag, "Rejected")
      assert.deepStrictEqual(yield* ids(name), ["a"])
      assert.deepStrictEqual(yield* at(driver), [[0, 1, 2]])
    }).pipe(Effect.provide(pg())))

  it.scoped("a sink reading a topic with keyConcurrency is refused (a defect: the program is misconfigured)", () =>
    Effect.gen(function*() {
      const ByKey = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Order), keyConcurrency: true })
      const driver = yield* TestDriver.make(DatabaseSink.batch({ name: "orders", inputs: [ByKey], handler: () => Effect.void }))
      const exit = yield* Effect.exit(driver.pipe(ByKey, "a", { id: "a", amount: 1 }))
      const defect = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.dieOption(exit.cause)) : undefined
      assert.instanceOf(defect, SkeinError.ConfigurationError)
      assert.include(defect instanceof Error ? defect.message : "", "keyConcurrency")
    }).pipe(Effect.provide(pg())))
})
