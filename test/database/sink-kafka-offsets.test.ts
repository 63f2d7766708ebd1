/**
 * `DatabaseSink`'s Kafka offsets (lag monitoring only: positions come from
 * the database): once the input goes quiet, the group's Kafka offsets reach
 * the database's within `kafkaCommitInterval`, not only at the next record or
 * rebalance. A 100,000-record chaos run (test/chaos, `--app postgres`) ended
 * with them 12,236 records behind a sink that had written every row.
 */
import { describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { DatabaseSink, Topic } from "../../src/index.ts"
import { createTopics, eventually, groupOffsets, offsets, produce, unique } from "../helpers/kafka.ts"
import { positions, startSink, withSql } from "./helpers.ts"

const Order = Schema.Struct({ id: Schema.String, amount: Schema.Number })

describe("DatabaseSink's Kafka offsets", () => {
  it.scopedLive("follow the database's within kafkaCommitInterval once the input is idle", () =>
    Effect.gen(function*() {
      const input = unique("db-idle-in")
      const group = unique("db-idle-app")
      const table = unique("idle_rows").replace(/-/g, "_")
      yield* createTopics([{ name: input, partitions: 1 }])
      yield* withSql((sql) => sql`CREATE TABLE ${sql(table)} (id TEXT NOT NULL, amount INTEGER NOT NULL)`)
      const In = Topic.make({ name: input, key: Schema.String, value: Topic.json(Order) })
      const sink = DatabaseSink.batch({
        name: "orders",
        inputs: [In],
        handler: (records, sql) =>
          sql`INSERT INTO ${sql(table)} ${sql.insert(records.map((r) => ({ id: r.value.id, amount: r.value.amount })))}`,
        kafkaCommitInterval: "3 seconds"
      })
      yield* startSink(sink, { applicationId: group, maxPollRecords: 10 })
      yield* produce(input, Array.from({ length: 100 }, (_, i) => ({ key: `o${i}`, value: JSON.stringify({ id: `o${i}`, amount: i }), partition: 0 })))
      const [end] = yield* offsets(input)
      const last = end?.lastStable ?? -1
      yield* eventually(Effect.map(withSql((sql) => positions(sql, group)), (stored) => stored.get(`${input}/0`) === last), {
        what: `the offsets table at ${last}`
      })
      // The input is idle from here: nothing but the interval moves the Kafka offsets.
      yield* eventually(Effect.map(groupOffsets(group, input), (kafka) => kafka.get(0) === last), {
        timeout: 20_000,
        what: `the group's Kafka offset of ${input}/0 at ${last}, the database's`
      })
    }), { timeout: 120_000 })
})
