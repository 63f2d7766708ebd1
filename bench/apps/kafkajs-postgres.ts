/**
 * The Postgres job's baseline (`kafkajs-pg-loop`, bench/contenders/postgres.ts): the at-least-once
 * loop a user writes with kafkajs and the plain `pg` package. kafkajs `eachBatch` (six partitions
 * at a time) -> one multi-row INSERT per 5,000 records of the batch (autocommit, a pooled
 * connection) -> commit the batch's offsets to the group after the insert. A crash between the
 * insert and the commit inserts the batch again on restart (duplicates); a clean run has each
 * record once.
 *
 *   node --import tsx bench/apps/kafkajs-postgres.ts --brokers B --input T --group G --table TABLE
 *
 * The database: DATABASE_URL (the harness sets it; never on the command line). Each row is
 * (k, v, p, o): the record's key, value, partition and offset; the harness creates the table.
 * Connects to Kafka with the SKEIN_* security settings of its environment. Runs kafkajs 2.2.4 as
 * published (a private copy without Skein's patch), as bench/apps/kafkajs-count.ts does.
 */
import { parseArgs } from "node:util"
import { makePool } from "../lib/pg.ts"
import { emit, loadKafkajs } from "../lib/kafkajsApp.ts"
import { kafkajsSecurity, securityFromEnv } from "../lib/security.ts"

const { Kafka, logLevel } = loadKafkajs("original")

const { values } = parseArgs({
  options: {
    brokers: { type: "string" },
    input: { type: "string" },
    group: { type: "string" },
    table: { type: "string" },
  },
})
const { brokers, input, group, table } = values
const url = process.env["DATABASE_URL"]
if (brokers === undefined || input === undefined || group === undefined || table === undefined || url === undefined) {
  console.error("usage: DATABASE_URL=... kafkajs-postgres --brokers B --input T --group G --table TABLE")
  process.exit(2)
}
if (!/^[a-z_][a-z0-9_]*$/.test(table)) {
  console.error(`kafkajs-postgres: --table ${table} is not a plain lower-case SQL name`)
  process.exit(2)
}

/** Rows per INSERT: 4 parameters a row, Postgres binds at most 65,535. */
const CHUNK = 5000


const pool = makePool(url, 10)
const kafka = new Kafka({
  clientId: "bench-kafkajs-postgres",
  brokers: brokers.split(","),
  logLevel: logLevel.WARN,
  ...kafkajsSecurity(securityFromEnv()),
})
const consumer = kafka.consumer({ groupId: group, maxBytes: 10 * 1024 * 1024 })
let first = true

/** One multi-row INSERT of `rows` (each [k, v, p, o]). */
const insert = (rows: ReadonlyArray<readonly [string, string, number, string]>): Promise<unknown> => {
  const placeholders: string[] = new Array(rows.length)
  const params: unknown[] = new Array(rows.length * 4)
  for (let i = 0; i < rows.length; i++) {
    const n = i * 4
    placeholders[i] = `($${n + 1},$${n + 2},$${n + 3},$${n + 4})`
    const row = rows[i]!
    params[n] = row[0]
    params[n + 1] = row[1]
    params[n + 2] = row[2]
    params[n + 3] = row[3]
  }
  return pool.query(`INSERT INTO ${table} (k, v, p, o) VALUES ${placeholders.join(",")}`, params)
}

const main = async (): Promise<void> => {
  await consumer.connect()
  await consumer.subscribe({ topic: input, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    partitionsConsumedConcurrently: 6,
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      if (batch.messages.length === 0) return
      if (first) {
        first = false
        emit("first-read")
      }
      for (let start = 0; start < batch.messages.length; start += CHUNK) {
        const rows = batch.messages
          .slice(start, start + CHUNK)
          .map((m) => [m.key?.toString() ?? "", m.value?.toString() ?? "", batch.partition, m.offset] as const)
        await insert(rows)
      }
      const lastOffset = batch.lastOffset()
      await consumer.commitOffsets([
        { topic: batch.topic, partition: batch.partition, offset: (BigInt(lastOffset) + 1n).toString() },
      ])
      resolveOffset(lastOffset)
      await heartbeat()
    },
  })
}

const shutdown = (): void => {
  void consumer
    .disconnect()
    .then(() => pool.end())
    .finally(() => process.exit(0))
}
process.on("SIGTERM", shutdown)
process.on("SIGINT", shutdown)
main().catch((e: unknown) => {
  console.error(e)
  process.exit(1)
})
