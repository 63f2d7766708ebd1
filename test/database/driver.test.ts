/**
 * `DatabaseSink` under `TestDriver`, on the run's Postgres (no broker): a
 * batch handler gets a piped poll's records in one call, in one transaction;
 * a per-record handler's failed write rolls back to its savepoint before its
 * rule dead-letters it; dead letters land in the driver's dead letter topic.
 */
import { assert, describe, it } from "@effect/vitest"
import { Data, Effect, Schema } from "effect"
import { DatabaseSink, ErrorRule, Topic } from "../../src/index.ts"
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
