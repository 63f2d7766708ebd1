/**
 * `DatabaseSink`'s fencing with two real instances: instance A holds a
 * batch's transaction open (its rows inserted) and is paused with SIGSTOP past
 * its session timeout; instance B takes the partition (a newer owner epoch)
 * and writes every record; A is resumed, its transaction commits its offsets
 * conditional on its old epoch, matches no row and rolls back: A logs that
 * rejection for the held batch's records, after their release. Every record is
 * in the table exactly once (A's inserted rows of that batch are gone).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { spawnApp } from "../helpers/appProcess.ts"
import { brokers, createTopics, eventually, offsets, produceRaw, unique } from "../helpers/kafka.ts"
import { epochRejected } from "../../src/internal/database/DatabaseTask.ts"
import { databaseUrl, positions, withSql } from "./helpers.ts"

const app = Path.join(import.meta.dirname, "apps", "sink-app.ts")
const records = 200

describe("DatabaseSink with a zombie", () => {
  it.scopedLive("a paused old owner's late transaction fails its epoch check and rolls back; every record once", () =>
    Effect.gen(function*() {
      const input = unique("db-zombie-in")
      const group = unique("db-zombie-app")
      const table = unique("zombie_rows").replace(/-/g, "_")
      const release = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-zombie-")), "release")
      yield* createTopics([{ name: input, partitions: 1 }])
      yield* withSql((sql) => sql`CREATE TABLE ${sql(table)} (id TEXT NOT NULL, src TEXT NOT NULL)`)
      yield* produceRaw(input, Array.from({ length: records }, (_, i) => ({ key: `k${i}`, value: `r${i}` })))
      const env = {
        SKEIN_APPLICATION_ID: group,
        KAFKA_BROKERS: brokers().join(","),
        DATABASE_URL: databaseUrl(),
        SINK_INPUT_TOPIC: input,
        SINK_TABLE: table,
        SINK_HOLD_VALUE: "r100",
        SINK_RELEASE_FILE: release,
        SKEIN_MAX_POLL_RECORDS: "50",
        SKEIN_SESSION_TIMEOUT: "6 seconds",
        SKEIN_HEARTBEAT_INTERVAL: "1 second"
      }
      const zombie = yield* spawnApp(app, env)
      yield* eventually(Effect.sync(() => zombie.output().includes("holding r100")), {
        timeout: 90_000,
        what: `the first instance to hold r100's batch open (output: ${zombie.output().slice(-2000)})`
      })
      yield* zombie.signal("SIGSTOP")
      // The new owner never holds: the release file is there before it starts.
      Fs.writeFileSync(release, "")
      const owner = yield* spawnApp(app, env)
      const ends = yield* offsets(input)
      const atEnd = Effect.map(withSql((sql) => positions(sql, group)), (stored) =>
        ends.every((e) => stored.get(`${input}/${e.partition}`) === e.lastStable))
      yield* eventually(atEnd, { timeout: 90_000, what: `the new owner to write every record (output: ${owner.output().slice(-2000)})` })
      yield* zombie.signal("SIGCONT")
      // The late transaction itself is the one rejected: the zombie's log names the batch whose
      // offsets' update its epoch check refused (the batch holding r100, offset 100), after its release.
      const topic = input.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
      const rejection = new RegExp(`${epochRejected} \\(records ${topic}/0@(\\d+)\\.\\.(\\d+)`)
      yield* eventually(Effect.sync(() => rejection.test(zombie.output())), {
        timeout: 60_000,
        what: `the old owner's transaction to be rejected by its epoch check (output: ${zombie.output().slice(-3000)})`
      })
      const output = zombie.output()
      const [, first, last] = rejection.exec(output) ?? []
      assert.isAtMost(Number(first), 100, output.slice(-3000))
      assert.isAtLeast(Number(last), 100, output.slice(-3000))
      assert.isBelow(output.indexOf("released r100"), output.search(rejection))
      assert.isAbove(output.indexOf("released r100"), -1)
      const [count] = yield* withSql((sql) =>
        sql<{ rows: string; ids: string }>`SELECT count(*) AS rows, count(DISTINCT id) AS ids FROM ${sql(table)}`
      )
      assert.deepStrictEqual({ rows: Number(count?.rows), ids: Number(count?.ids) }, { rows: records, ids: records })
      yield* eventually(atEnd)
      yield* zombie.signal("SIGTERM")
      yield* owner.signal("SIGTERM")
      yield* zombie.exited
      yield* owner.exited
    }), { timeout: 240_000 })
})
