/**
 * One throughput run of the Postgres job (bench/README.md, "Postgres job"): a fresh table
 * without a unique constraint (a duplicate shows), the input preloaded, the contender's Postgres
 * app started with DATABASE_URL. Done = the contender's committed input positions at the input's
 * end: Skein's in its `skein_offsets` table (committed in the rows' transaction), the
 * at-least-once loop's as the group's Kafka offsets (committed after its inserts). Throughput =
 * input records / (the poll that saw it done − the contender's first read). Then the contender is
 * killed and the table checked: every input record's (partition, offset) once, each key with as
 * many distinct records as the input has (`exact`), or with duplicates (`complete (+d dup)`).
 */
import { mkdirSync, readFileSync, rmSync } from "node:fs"
import { cpus, loadavg } from "node:os"
import { join } from "node:path"
import type { Admin, Kafka } from "kafkajs"
import type { ProcessContender } from "../contenders/types.ts"
import { createTopics, groupCaughtUp, keyName, preload, topicEnds, type Workload } from "./kafka.ts"
import { numberOf, type Pool } from "./pg.ts"
import type { AppProcess, Command } from "./proc.ts"
import type { RunResult } from "./report.ts"
import type { ClientConfigFiles } from "./security.ts"
import { fmtInt, sleep } from "./stats.ts"

export interface PostgresRunCtx {
  readonly kafka: Kafka
  readonly admin: Admin
  readonly brokers: string
  readonly clientConfig: ClientConfigFiles | undefined
  readonly w: Workload
  readonly seq: Uint32Array
  /** Records per key index of the input (`expectedCounts`). */
  readonly expected: Int32Array
  readonly workDir: string
  readonly commitIntervalMs: number
  readonly timeoutMs: number
  /** The database the apps write to (given to them as DATABASE_URL). */
  readonly databaseUrl: string
  /** The harness's own connections to it (tables, progress, the check). */
  readonly pool: Pool
  /** Ends the app after the run: a kill, or a graceful stop when profiling (so node writes its profile). */
  readonly endPhase: (app: AppProcess) => Promise<unknown>
  readonly log: (m: string) => void
}

/** A table name from the run's topic prefix (lower case, letters, digits and `_`). */
export const tableOf = (prefix: string): string => prefix.toLowerCase().replace(/[^a-z0-9_]/g, "_").slice(0, 60)

/** Skein's positions of `group` in its offsets table sum to `total` (the table may not exist yet). */
const sinkCaughtUp = async (pool: Pool, group: string, total: number): Promise<boolean> =>
  pool
    .query("SELECT coalesce(sum(next_offset), 0) AS n FROM skein_offsets WHERE group_id = $1", [group])
    .then((r) => numberOf(r, "n") >= total)
    .catch(() => false)

/**
 * CPU seconds (user + system) process `pid` has used since it started, from /proc (Linux, 100
 * ticks a second); undefined where there is none. On a shared machine the throughput follows the
 * load; the CPU a contender's process spends on the same input hardly does.
 */
const cpuSeconds = (pid: number | undefined): number | undefined => {
  if (pid === undefined) return undefined
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    const ticks = Number(fields[11]) + Number(fields[12])
    return Number.isFinite(ticks) ? ticks / 100 : undefined
  } catch {
    return undefined
  }
}

/** Transactions committed in the database so far (Postgres's statistics, flushed within about a second). */
const commits = (pool: Pool): Promise<number | undefined> =>
  pool
    .query("SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()")
    .then((r) => numberOf(r, "n"))
    .catch(() => undefined)

export interface TableCheck {
  readonly exact: boolean
  readonly complete: boolean
  readonly rows: number
  readonly duplicates: number
  readonly summary: string
}

/** Every input record once (by partition and offset), and each key's records as the input has them. */
export const checkTable = async (
  pool: Pool,
  table: string,
  inputEnds: ReadonlyMap<number, number>,
  expected: Int32Array,
): Promise<TableCheck> => {
  const parts = await pool.query(
    `SELECT p, count(*) AS n, count(DISTINCT o) AS d, min(o) AS lo, max(o) AS hi FROM ${table} GROUP BY p`,
  )
  let rows = 0
  let distinct = 0
  const problems: string[] = []
  const seen = new Set<number>()
  for (const row of parts.rows) {
    const p = Number(row["p"])
    const n = Number(row["n"])
    const d = Number(row["d"])
    seen.add(p)
    rows += n
    distinct += d
    const end = inputEnds.get(p)
    if (end === undefined) problems.push(`rows of partition ${p}, which the input does not have`)
    else if (d !== end || Number(row["lo"]) !== 0 || Number(row["hi"]) !== end - 1) {
      problems.push(`partition ${p}: ${fmtInt(d)} distinct offsets ${String(row["lo"])}..${String(row["hi"])} of ${fmtInt(end)}`)
    }
  }
  for (const [p, end] of inputEnds) if (end > 0 && !seen.has(p)) problems.push(`partition ${p}: no rows of ${fmtInt(end)}`)
  // Each key's distinct records against the input's count of that key.
  const keys = await pool.query(`SELECT k, count(DISTINCT (p, o)) AS d FROM ${table} GROUP BY k`)
  const byKey = new Map<string, number>()
  for (const row of keys.rows) byKey.set(String(row["k"]), Number(row["d"]))
  let keysWrong = 0
  for (let i = 0; i < expected.length; i++) {
    const want = expected[i] ?? 0
    if ((byKey.get(keyName(i)) ?? 0) !== want) keysWrong++
    byKey.delete(keyName(i))
  }
  keysWrong += byKey.size
  if (keysWrong > 0) problems.push(`${fmtInt(keysWrong)} keys with another number of records than the input`)
  const duplicates = rows - distinct
  const complete = problems.length === 0
  return {
    exact: complete && duplicates === 0,
    complete,
    rows,
    duplicates,
    summary: !complete
      ? `WRONG: ${problems.slice(0, 3).join("; ")} (${fmtInt(rows)} rows)`
      : duplicates === 0
        ? "exact"
        : `complete (+${fmtInt(duplicates)} dup)`,
  }
}

export const runPostgres = async (
  c: ProcessContender,
  run: number,
  prefix: string,
  x: PostgresRunCtx,
  spawn: (cmd: Command, logFile: string) => AppProcess,
): Promise<RunResult> => {
  const notes: string[] = []
  const out: { -readonly [K in keyof RunResult]: RunResult[K] } = { run, notes }
  if (c.postgres === undefined) return { run, notes: [`${c.name} has no Postgres app`] }
  const input = `${prefix}.in`
  const table = tableOf(prefix)
  const dir = join(x.workDir, `${c.name}-r${run}`)
  const stateDir = join(dir, "state")
  const logFile = join(x.workDir, `${c.name}-r${run}.log`)
  mkdirSync(stateDir, { recursive: true })
  try {
    await x.pool.query(`DROP TABLE IF EXISTS ${table}`)
    await x.pool.query(`CREATE TABLE ${table} (k TEXT NOT NULL, v TEXT NOT NULL, p INTEGER NOT NULL, o BIGINT NOT NULL)`)
    await createTopics(x.admin, [input], x.w.partitions)
    const preloadSec = await preload(x.kafka, input, x.w, x.seq)
    x.log(`   preloaded ${fmtInt(x.w.records)} records in ${preloadSec.toFixed(1)} s`)
    const inputEnds = await topicEnds(x.admin, input)
    const total = [...inputEnds.values()].reduce((a, b) => a + b, 0)

    const commits0 = await commits(x.pool)
    let polls = 0
    const load0 = loadavg()[0] ?? 0
    const command = c.postgres({
      brokers: x.brokers,
      input,
      output: `${prefix}.out`,
      group: prefix,
      stateDir,
      commitIntervalMs: x.commitIntervalMs,
      clientConfig: x.clientConfig,
      table,
    })
    // The database in the app's environment (the URL may hold a password: never on a command line).
    const app = spawn({ ...command, env: { ...command.env, DATABASE_URL: x.databaseUrl } }, logFile)
    const deadline = Date.now() + x.timeoutMs
    let doneAt: number | undefined
    while (Date.now() < deadline && app.alive()) {
      polls++
      const done =
        (await sinkCaughtUp(x.pool, prefix, total)) || (await groupCaughtUp(x.admin, prefix, input, inputEnds).catch(() => false))
      if (done) {
        doneAt = Date.now()
        break
      }
      await sleep(100)
    }
    const cpu = cpuSeconds(app.child.pid)
    out.peakRssMiB = app.peakRssMiB()
    const firstRead = app.event("first-read")?.ts
    if (firstRead === undefined) notes.push("no first-read event: throughput measured from process spawn")
    const start = firstRead ?? app.spawnedAt
    if (doneAt === undefined) {
      notes.push(app.alive() ? `did not finish within ${x.timeoutMs / 1000} s` : `process exited early (see ${logFile})`)
    } else if (doneAt > start) {
      out.throughput = x.w.records / ((doneAt - start) / 1000)
    }
    const load1 = loadavg()[0] ?? 0
    if (cpu !== undefined && doneAt !== undefined) {
      notes.push(`process CPU ${cpu.toFixed(1)} s (user + system, spawn to done: ${fmtInt((cpu * 1e6) / x.w.records)} µs per record)`)
    }
    notes.push(`1-min load ${load0.toFixed(2)} at the start, ${load1.toFixed(2)} at the end (${cpus().length} cores)`)
    await x.endPhase(app)
    // The contender's transactions (each autocommit INSERT is one; a Skein batch is one), without the harness's polls.
    await sleep(1500)
    const commits1 = await commits(x.pool)
    if (commits0 !== undefined && commits1 !== undefined) {
      const theirs = commits1 - commits0 - polls - 1
      notes.push(`${fmtInt(theirs)} database transactions committed (${fmtInt(x.w.records / Math.max(1, theirs))} records each)`)
    }
    const check = await checkTable(x.pool, table, inputEnds, x.expected)
    out.verified = check.summary
    if (!check.complete) {
      notes.push(`table check failed: ${check.summary}`)
      delete out.throughput
    }
    return out
  } finally {
    await x.pool.query(`DROP TABLE IF EXISTS ${table}`).catch(() => undefined)
    await x.pool.query("DELETE FROM skein_offsets WHERE group_id = $1", [prefix]).catch(() => undefined)
    rmSync(dir, { recursive: true, force: true })
  }
}
