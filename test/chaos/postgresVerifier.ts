/**
 * The check of the Postgres app (`test/apps/postgres.ts`, a `DatabaseSink` bulk-inserting the
 * driver's records into a table without a unique constraint). The input topic, read raw, is the
 * record of truth; the table, the sink's offsets table and the dead letter topic (read raw,
 * transactions resolved from the log) are checked against it:
 *
 * - every input record that decodes has exactly one row, at its own position (`partition_id`,
 *   `source_offset`) with its `id`: a second row is a duplicate, none is a loss (both reported
 *   by id); a row at no input record's position is a mismatch;
 * - every poison record (its `v` not a number) is on the dead letter topic exactly once (by its
 *   id, read from the copied value) and has no row; nothing else is on the dead letter topic,
 *   and no transaction is open there;
 * - the offsets table holds, for every input partition, the input's end offset (its high
 *   watermark: the driver's writes are not transactional) as the group's next offset.
 *
 * Pure: the harness (`postgres.ts`) reads the table and the topics; unit tests:
 * `postgresVerifier.test.ts`.
 */
import type { Check } from "./verifier.ts"
import type { PartitionLog } from "./wire.ts"

/** A row of the app's table. */
export interface Row {
  readonly id: number
  readonly partition: number
  readonly offset: number
  /** `instance/runtime/pid` of the process that wrote it. */
  readonly writer: string
}

/** A row of the sink's offsets table for the app's group. */
export interface OffsetRow {
  readonly topic: string
  readonly partition: number
  /** Null: the partition was claimed but nothing committed yet. */
  readonly next: number | null
}

export interface PostgresTruth {
  readonly inputTopic: string
  readonly input: ReadonlyArray<PartitionLog>
  readonly rows: ReadonlyArray<Row>
  readonly offsets: ReadonlyArray<OffsetRow>
  readonly deadLetters: ReadonlyArray<PartitionLog>
}

export interface PostgresCheck extends Check {
  /** Figures for the report: rows, poison records, dead letters, rows per runtime. */
  readonly summary: ReadonlyArray<string>
}

const parse = (text: string | null): unknown => {
  if (text === null) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

/** What an input record is: a record the app writes as a row, a poison record (by id), or unreadable. */
export const classify = (value: string | null): { readonly kind: "row" | "poison"; readonly id: number } | undefined => {
  const u = parse(value)
  if (!isObject(u) || typeof u["id"] !== "number" || typeof u["seq"] !== "number") return undefined
  return { kind: typeof u["v"] === "number" ? "row" : "poison", id: u["id"] }
}

/** The ids of the poison records of `logs`. */
export const poisonIds = (logs: ReadonlyArray<PartitionLog>): ReadonlySet<number> =>
  new Set(logs.flatMap((log) => log.records.flatMap((r) => {
    const found = classify(r.value)
    return found?.kind === "poison" ? [found.id] : []
  })))

/** `logs` without their poison records (the input as the apps of the shared input check it). */
export const withoutPoison = (logs: ReadonlyArray<PartitionLog>): ReadonlyArray<PartitionLog> =>
  logs.map((log) => ({ ...log, records: log.records.filter((r) => classify(r.value)?.kind !== "poison") }))

/** Details listed per kind of problem at most. */
const LIMIT = 20

const listed = (what: string, items: ReadonlyArray<string>): ReadonlyArray<string> =>
  items.length === 0 ? [] : [`${what} (${items.length}): ${items.slice(0, LIMIT).join(", ")}${items.length > LIMIT ? ", ..." : ""}`]

/** Checks the table, the offsets table and the dead letter topic against the input. */
export const checkPostgres = (name: string, truth: PostgresTruth): PostgresCheck => {
  // -- the input: what each position should have
  const expected = new Map<string, number>()
  const poison = new Map<number, number>()
  const poisonAt = new Set<string>()
  const unreadable: Array<string> = []
  let records = 0
  for (const log of truth.input) {
    for (const r of log.records) {
      records++
      const at = `${log.partition}@${r.offset}`
      const found = classify(r.value)
      if (found === undefined) unreadable.push(at)
      else if (found.kind === "row") expected.set(at, found.id)
      else {
        poison.set(found.id, (poison.get(found.id) ?? 0) + 1)
        poisonAt.add(at)
      }
    }
  }

  // -- the rows, by position
  const byPosition = new Map<string, Array<Row>>()
  for (const row of truth.rows) {
    const at = `${row.partition}@${row.offset}`
    const list = byPosition.get(at)
    if (list === undefined) byPosition.set(at, [row])
    else list.push(row)
  }
  const duplicated: Array<string> = []
  const missing: Array<string> = []
  const wrongIds: Array<string> = []
  let duplicates = 0
  let lost = 0
  for (const [at, id] of expected) {
    const found = byPosition.get(at) ?? []
    if (found.length === 0) {
      lost++
      missing.push(`id ${id} (${at})`)
    } else if (found.length > 1) {
      duplicates += found.length - 1
      duplicated.push(`id ${id} (${at}) ${found.length} rows by ${found.map((r) => r.writer).join(" and ")}`)
    }
    for (const row of found) if (row.id !== id) wrongIds.push(`${at}: id ${row.id}, the input's is ${id}`)
  }
  const poisonRows: Array<string> = []
  const strayRows: Array<string> = []
  for (const [at, found] of byPosition) {
    if (expected.has(at)) continue
    for (const row of found) (poisonAt.has(at) ? poisonRows : strayRows).push(`id ${row.id} (${at}) by ${row.writer}`)
  }

  // -- the dead letters: each poison record once, nothing else
  const lettered = new Map<number, number>()
  const strayLetters: Array<string> = []
  let letters = 0
  const openTransactions: Array<string> = []
  for (const log of truth.deadLetters) {
    if (log.openTransactions > 0 || log.lastStableOffset < log.highWatermark) {
      openTransactions.push(`dead letters ${log.partition}: ${log.openTransactions} open, LSO ${log.lastStableOffset} < HW ${log.highWatermark}`)
    }
    for (const r of log.records) {
      letters++
      const found = classify(r.value)
      if (found === undefined || found.kind !== "poison") {
        strayLetters.push(`${log.partition}@${r.offset}${found === undefined ? "" : ` (id ${found.id})`}`)
        continue
      }
      lettered.set(found.id, (lettered.get(found.id) ?? 0) + 1)
    }
  }
  const letterTwice: Array<string> = []
  const letterMissing: Array<string> = []
  let letterDuplicates = 0
  let letterLost = 0
  for (const [id, count] of poison) {
    const got = lettered.get(id) ?? 0
    if (got > count) {
      letterDuplicates += got - count
      letterTwice.push(`id ${id} ${got} times`)
    } else if (got < count) {
      letterLost += count - got
      letterMissing.push(`id ${id}`)
    }
  }
  for (const [id] of lettered) if (!poison.has(id)) strayLetters.push(`id ${id}: not a poison record of the input`)

  // -- the offsets table: the input's end offsets
  const offsetProblems: Array<string> = []
  const stored = new Map(truth.offsets.filter((o) => o.topic === truth.inputTopic).map((o) => [o.partition, o.next]))
  for (const log of truth.input) {
    const next = stored.get(log.partition)
    if (next === undefined) offsetProblems.push(`${truth.inputTopic}/${log.partition}: no row in the offsets table`)
    else if (next !== log.highWatermark) {
      offsetProblems.push(`${truth.inputTopic}/${log.partition}: next offset ${next ?? "NULL"}, the input ends at ${log.highWatermark}`)
    }
  }
  for (const [partition] of stored) {
    if (!truth.input.some((log) => log.partition === partition)) offsetProblems.push(`${truth.inputTopic}/${partition}: a row for no input partition`)
  }

  // -- figures
  const byRuntime = new Map<string, number>()
  for (const row of truth.rows) {
    const runtime = row.writer.split("/")[1] ?? "?"
    byRuntime.set(runtime, (byRuntime.get(runtime) ?? 0) + 1)
  }
  const poisonRecords = [...poison.values()].reduce((a, b) => a + b, 0)
  const summary = [
    `${name}: ${truth.rows.length} rows for ${expected.size} records (${records} input records, ${poisonRecords} poison); ` +
    `rows by runtime: ${[...byRuntime].sort().map(([runtime, n]) => `${runtime} ${n}`).join(", ") || "none"}`,
    `${name}: ${letters} dead letters for ${poisonRecords} poison records; offsets table: ` +
    `${truth.input.map((log) => `${log.partition}:${stored.get(log.partition) ?? "-"}/${log.highWatermark}`).join(" ")} (next/end)`
  ]
  const details = [
    ...listed("duplicated rows", duplicated),
    ...listed("missing rows", missing),
    ...listed("rows with another id than their input record's", wrongIds),
    ...listed("rows of poison records", poisonRows),
    ...listed("rows at no input record", strayRows),
    ...listed("unreadable input records", unreadable),
    ...listed("poison records dead-lettered more than once", letterTwice),
    ...listed("poison records not dead-lettered", letterMissing),
    ...listed("dead letters of no poison record", strayLetters),
    ...openTransactions,
    ...offsetProblems
  ]
  return {
    name,
    records,
    duplicates: duplicates + letterDuplicates,
    lost: lost + letterLost,
    stateMismatches: wrongIds.length + poisonRows.length + strayRows.length + unreadable.length + strayLetters.length +
      openTransactions.length + offsetProblems.length,
    details,
    summary
  }
}
