/**
 * The one boundary to `@effect/sql` for a `DatabaseSink`: Skein's two tables
 * in the user's database and every statement on them.
 *
 * - The offsets table: `(group_id, topic, partition_id) -> next_offset,
 *   epoch`. `next_offset` is where the partition resumes (NULL: never
 *   committed); `epoch` is the owner's: a task bumps it when it takes the
 *   partition (`claim`), and every batch's offset update is conditional on it
 *   (`commit`), so a zombie's late transaction updates no row and rolls back.
 * - The dead letter outbox: the copies of the records a batch dead-lettered,
 *   written in the batch's transaction with its rows and offsets (so a
 *   rollback drops them with the rest, a commit keeps each exactly once).
 *   The task publishes them to the dead letter topic after the commit, in a
 *   Kafka transaction that also commits the group's Kafka offsets to the same
 *   positions; the Kafka offsets are thereby the outbox's "published up to"
 *   mark. A new owner republishes the rows at or past that mark (the
 *   transaction that would have published them never committed), then
 *   deletes what is published.
 *
 * SQL errors are mapped to `DatabaseError` here, and only here.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option, Schema } from "effect"
import type { ParseResult } from "effect"
import { DatabaseError, TaskMigrated } from "../../SkeinError.ts"
import type * as Topic from "../../Topic.ts"
import type { PartitionOffset } from "../../TopicPartition.ts"

/** The names of Skein's tables in the user's database. */
export interface Tables {
  readonly offsets: string
  readonly deadLetters: string
}

/** What a task learns when it takes a partition. */
export interface Claim {
  /** The task's owner epoch: its commits are conditional on it. */
  readonly epoch: number
  /** The next offset of each input topic's partition; absent: never committed. */
  readonly positions: ReadonlyMap<string, number>
  /** Dead letters committed to the outbox but not published (at or past the Kafka offsets given). */
  readonly pending: ReadonlyArray<Topic.EncodedRecord>
}

export interface SinkStore {
  readonly tables: Tables
  /** Creates the tables when missing (and checks they can be read and written). */
  readonly ensure: Effect.Effect<void, DatabaseError>
  /** Runs `body` in one database transaction (a savepoint when one is open), mapping SQL errors. */
  readonly transaction: <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<A, E | DatabaseError, R>
  /**
   * Takes task `partition` of `groupId`: bumps the epoch of its rows (one per
   * input topic, created when missing), reads their positions and the outbox
   * rows at or past `published` (the group's Kafka offsets, read after the
   * task's producer fenced the previous owner's). One transaction.
   */
  readonly claim: (
    groupId: string,
    partition: number,
    topics: ReadonlyArray<string>,
    published: ReadonlyMap<string, number>
  ) => Effect.Effect<Claim, DatabaseError>
  /**
   * In the batch's transaction: the dead letters into the outbox, then the
   * offsets, each update conditional on `epoch` (`TaskMigrated` when a newer
   * owner bumped it: the transaction must roll back).
   */
  readonly commit: (
    groupId: string,
    partition: number,
    epoch: number,
    offsets: ReadonlyArray<PartitionOffset>,
    deadLetters: ReadonlyArray<Topic.EncodedRecord>
  ) => Effect.Effect<void, DatabaseError | TaskMigrated>
  /** Deletes the outbox rows below `offsets` (published: the Kafka offsets reached them). */
  readonly published: (groupId: string, offsets: ReadonlyArray<PartitionOffset>) => Effect.Effect<void, DatabaseError>
  /** The offsets table's rows of `groupId`, by topic and partition. */
  readonly positions: (groupId: string) => Effect.Effect<ReadonlyArray<Position>, DatabaseError>
}

/** A row of the offsets table: where an input partition resumes, and its owner's epoch. */
export interface Position {
  readonly topic: string
  readonly partition: number
  /** The next offset to process; none while no batch of it committed. */
  readonly nextOffset: Option.Option<number>
  /** The epoch of the partition's latest owner. */
  readonly epoch: number
}

/** Error codes of Postgres (SQLSTATE) that a fix, not a retry, gets past. */
const refusedCodes: ReadonlyMap<string, string> = new Map([
  ["28P01", "The server refused the password: check the user and password of the database URL (DATABASE_URL)"],
  ["28000", "The server refused the user: check the user of the database URL (DATABASE_URL) and the server's pg_hba.conf"],
  ["3D000", "Create the database (CREATE DATABASE), or fix its name in the database URL (DATABASE_URL)"],
  ["42501", "Grant the sink's user CREATE on the schema, or SELECT, INSERT, UPDATE, DELETE on Skein's tables"]
])
/** Connection errors of Node and Postgres's own shutdown codes: the server is not there (now). */
const unavailableCodes: ReadonlySet<string> = new Set([
  "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN", "EPIPE",
  "57P01", "57P02", "57P03", "08000", "08001", "08003", "08006"
])
/** What to check when the database is not there at startup, by code. */
const connectFixes: ReadonlyMap<string, string> = new Map([
  ["ECONNREFUSED", "Nothing accepts connections there: check the host and port of the database URL (DATABASE_URL), and that the server runs"],
  ["ENOTFOUND", "The host does not resolve: check the host name of the database URL (DATABASE_URL)"],
  ["EAI_AGAIN", "The host does not resolve (now): check the host name of the database URL (DATABASE_URL) and the DNS"],
  ["ETIMEDOUT", "The server does not answer: check the host and port of the database URL (DATABASE_URL), the network and any firewall"],
  ["EHOSTUNREACH", "The host is unreachable: check the host of the database URL (DATABASE_URL) and the network"],
  ["ENETUNREACH", "The network is unreachable: check the host of the database URL (DATABASE_URL) and the network"],
  ["57P03", "The server is starting or shutting down: retry once it accepts connections"]
])
const invalidUrlFix = "The database URL (DATABASE_URL) is not a URL: postgres://user:password@host:port/database, " +
  "with any of @ : / # ? % in the user or password percent-encoded"
const timeoutFix = "The server did not answer in time: check the host and port of the database URL (DATABASE_URL), the network and any firewall"

const codeOf = (cause: unknown): Option.Option<string> => {
  let current: unknown = cause
  for (let depth = 0; depth < 4 && typeof current === "object" && current !== null; depth++) {
    if ("code" in current && typeof current.code === "string") return Option.some(current.code)
    current = "cause" in current ? current.cause : undefined
  }
  return Option.none()
}

/**
 * The driver's error to keep as the cause: Node's `AggregateError` of a
 * refused connection (each address of a name tried) has an empty message,
 * its first error says where it went.
 */
const describedCause = (cause: unknown): unknown =>
  cause instanceof AggregateError && cause.message === "" && cause.errors[0] instanceof Error ? cause.errors[0] : cause

/** An `SqlError` (or any failure of the driver) as a `DatabaseError`, by its code. */
export const toDatabaseError = (operation: string) => (error: SqlError | unknown): DatabaseError => {
  const cause = describedCause(
    typeof error === "object" && error !== null && "cause" in error && error.cause !== undefined ? error.cause : error
  )
  const code = codeOf(error)
  if (Option.isSome(code)) {
    const fix = refusedCodes.get(code.value)
    if (fix !== undefined) return new DatabaseError({ reason: "Refused", operation, fix, cause })
    if (unavailableCodes.has(code.value)) return new DatabaseError({ reason: "Unavailable", operation, cause })
  }
  const text = cause instanceof Error ? cause.message : String(cause)
  if (/connect|terminat|closed|timed out|ECONNREFUSED/i.test(text)) return new DatabaseError({ reason: "Unavailable", operation, cause })
  return new DatabaseError({ reason: "Failed", operation, cause })
}

/**
 * A failure to reach the database at startup as a `DatabaseError`: as
 * `toDatabaseError`, with what to check when it is `Unavailable` (the host,
 * the port, the name).
 */
export const toStartupError = (operation: string) => (error: SqlError | unknown): DatabaseError => {
  const mapped = toDatabaseError(operation)(error)
  if (mapped.reason === "Failed" && mapped.cause instanceof TypeError && /invalid url/i.test(mapped.cause.message)) {
    return new DatabaseError({ reason: "Refused", operation, fix: invalidUrlFix, cause: mapped.cause.message })
  }
  if (mapped.reason !== "Unavailable" || mapped.fix !== undefined) return mapped
  const code = codeOf(error)
  const fix = Option.isSome(code) ? connectFixes.get(code.value) : undefined
  const text = mapped.cause instanceof Error ? mapped.cause.message : String(mapped.cause)
  const chosen = fix ?? (/timed out/i.test(text) ? timeoutFix : undefined)
  return chosen === undefined ? mapped : new DatabaseError({ reason: mapped.reason, operation, fix: chosen, cause: mapped.cause })
}

/** Whether `u` is an `@effect/sql` `SqlError`. */
export const isSqlError = (u: unknown): u is SqlError =>
  typeof u === "object" && u !== null && "_tag" in u && u._tag === "SqlError"

/**
 * `@effect/sql` makes a failed COMMIT or ROLLBACK (a connection lost under an
 * open transaction) a defect: here it is a `DatabaseError`, and the task
 * rewinds to the database's positions (which say whether the commit landed).
 */
export const commitFailures = (operation: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | DatabaseError, R> =>
  Effect.catchSomeDefect(effect, (defect) =>
    isSqlError(defect) ? Option.some(Effect.fail(toDatabaseError(operation)(defect))) : Option.none())

/** A count or offset as the driver returns it (Postgres's BIGINT comes back as text). */
const toNumber = (value: unknown): Option.Option<number> => {
  if (typeof value === "number" && Number.isSafeInteger(value)) return Option.some(value)
  if (typeof value === "bigint") return Option.some(Number(value))
  if (typeof value === "string" && /^-?\d+$/.test(value)) return Option.some(Number(value))
  return Option.none()
}

const numberField = (row: Record<string, unknown>, field: string, operation: string) =>
  Option.match(toNumber(row[field]), {
    onSome: Effect.succeed,
    onNone: () => Effect.fail(new DatabaseError({ reason: "Failed", operation, cause: `column ${field} holds ${String(row[field])}` }))
  })

/** A header value's bytes, as base64 text. */
const b64 = (value: string | Buffer): string => (typeof value === "string" ? Buffer.from(value, "utf8") : value).toString("base64")

/** A dead letter as the outbox keeps it: bytes as base64 text. */
const StoredRecord = Schema.Struct({
  topic: Schema.String,
  key: Schema.NullOr(Schema.String),
  value: Schema.NullOr(Schema.String),
  headers: Schema.Array(Schema.Tuple(Schema.String, Schema.String)),
  partition: Schema.optionalWith(Schema.Number, { exact: true }),
  timestamp: Schema.optionalWith(Schema.Number, { exact: true })
})
type StoredRecord = typeof StoredRecord.Type
const StoredRecordJson = Schema.parseJson(StoredRecord)

/** A dead letter as outbox text (bytes as base64): it comes back byte for byte. */
export const encodeRecord = (record: Topic.EncodedRecord): string => {
  const headers: Array<readonly [string, string]> = []
  for (const [name, value] of Object.entries(record.headers ?? {})) {
    if (value === undefined) continue
    for (const one of Array.isArray(value) ? value : [value]) headers.push([name, b64(one)])
  }
  const stored: StoredRecord = {
    topic: record.topic,
    key: record.key === null ? null : b64(record.key),
    value: record.value === null ? null : b64(record.value),
    headers,
    ...(record.partition === undefined ? {} : { partition: record.partition }),
    ...(record.timestamp === undefined ? {} : { timestamp: record.timestamp })
  }
  return Schema.encodeSync(StoredRecordJson)(stored)
}

/** An outbox row's text back as the record to produce. */
export const decodeRecord = (text: string): Effect.Effect<Topic.EncodedRecord, ParseResult.ParseError> =>
  Effect.map(Schema.decode(StoredRecordJson)(text), (stored): Topic.EncodedRecord => {
  const headers: Record<string, Array<Buffer>> = {}
  for (const [name, value] of stored.headers) (headers[name] ??= []).push(Buffer.from(value, "base64"))
  return {
    topic: stored.topic,
    key: stored.key === null ? null : Buffer.from(stored.key, "base64"),
    value: stored.value === null ? null : Buffer.from(stored.value, "base64"),
    headers,
    ...(stored.partition === undefined ? {} : { partition: stored.partition }),
    ...(stored.timestamp === undefined ? {} : { timestamp: stored.timestamp })
  }
  })

/** The last value of header `name` as text (Skein's own headers follow the original ones). */
const lastHeader = (record: Topic.EncodedRecord, name: string): string | undefined => {
  const value = record.headers?.[name]
  if (value === undefined) return undefined
  const last = Array.isArray(value) ? value[value.length - 1] : value
  return last === undefined ? undefined : typeof last === "string" ? last : last.toString("utf8")
}

/** The input record a dead letter copies (its `skein.source.*` headers). */
export const sourceOf = (record: Topic.EncodedRecord): Option.Option<PartitionOffset> => {
  const topic = lastHeader(record, "skein.source.topic")
  const partition = Option.getOrUndefined(toNumber(lastHeader(record, "skein.source.partition")))
  const offset = Option.getOrUndefined(toNumber(lastHeader(record, "skein.source.offset")))
  return topic === undefined || partition === undefined || offset === undefined
    ? Option.none()
    : Option.some({ topic, partition, offset })
}

export const make = (sql: SqlClient.SqlClient, tables: Tables): SinkStore => {
  const offsets = sql(tables.offsets)
  const deadLetters = sql(tables.deadLetters)
  const forUpdate = sql.onDialectOrElse({ pg: () => sql.unsafe(" FOR UPDATE"), orElse: () => sql.unsafe("") })

  const createTables = Effect.zipRight(
    sql`CREATE TABLE IF NOT EXISTS ${offsets} (
      group_id TEXT NOT NULL,
      topic TEXT NOT NULL,
      partition_id INTEGER NOT NULL,
      next_offset BIGINT,
      epoch BIGINT NOT NULL,
      PRIMARY KEY (group_id, topic, partition_id)
    )`,
    sql`CREATE TABLE IF NOT EXISTS ${deadLetters} (
      group_id TEXT NOT NULL,
      topic TEXT NOT NULL,
      partition_id INTEGER NOT NULL,
      source_offset BIGINT NOT NULL,
      seq INTEGER NOT NULL,
      record TEXT NOT NULL,
      PRIMARY KEY (group_id, topic, partition_id, source_offset, seq)
    )`
  )
  // Two instances creating the tables at once: Postgres may fail one (a unique violation on its
  // catalog); the tables are there on the second try.
  // First a probe: a client that connects lazily (a pool, another driver) fails here, named as a
  // connection failure with what to check, before any table is touched.
  const probe = sql`SELECT 1`.pipe(Effect.mapError(toStartupError("connection")))
  const ensure = createTables.pipe(
    Effect.retry({ times: 1 }),
    Effect.zipRight(sql`SELECT count(*) AS n FROM ${offsets} WHERE group_id = ${""}`),
    Effect.zipRight(sql`SELECT count(*) AS n FROM ${deadLetters} WHERE group_id = ${""}`),
    Effect.asVoid,
    Effect.mapError(toStartupError(`creating or reading the tables ${tables.offsets} and ${tables.deadLetters}`)),
    (tablesReady) => Effect.zipRight(probe, tablesReady)
  )

  const transaction = <A, E, R>(body: Effect.Effect<A, E, R>): Effect.Effect<A, E | DatabaseError, R> =>
    sql.withTransaction(body).pipe(
      Effect.catchIf(isSqlError, (error) => Effect.fail(toDatabaseError("transaction")(error))),
      commitFailures("transaction")
    )

  const claim: SinkStore["claim"] = (groupId, partition, topics, published) => {
    const operation = `claiming partition ${partition} of ${topics.join(", ")} in ${tables.offsets}`
    return sql.withTransaction(Effect.gen(function*() {
      for (const topic of topics) {
        yield* sql`INSERT INTO ${offsets} (group_id, topic, partition_id, next_offset, epoch)
          VALUES (${groupId}, ${topic}, ${partition}, NULL, 0) ON CONFLICT DO NOTHING`
      }
      const rows = yield* sql`SELECT topic, next_offset, epoch FROM ${offsets}
        WHERE group_id = ${groupId} AND partition_id = ${partition} AND ${sql.in("topic", topics)}
        ORDER BY topic${forUpdate}`
      let epoch = 0
      const positions = new Map<string, number>()
      for (const row of rows) {
        epoch = Math.max(epoch, yield* numberField(row, "epoch", operation))
        const next = toNumber(row["next_offset"])
        if (Option.isSome(next) && typeof row["topic"] === "string") positions.set(row["topic"], next.value)
      }
      epoch += 1
      yield* sql`UPDATE ${offsets} SET epoch = ${epoch}
        WHERE group_id = ${groupId} AND partition_id = ${partition} AND ${sql.in("topic", topics)}`
      const outbox = yield* sql`SELECT topic, source_offset, record FROM ${deadLetters}
        WHERE group_id = ${groupId} AND partition_id = ${partition} ORDER BY topic, source_offset, seq`
      const pending: Array<Topic.EncodedRecord> = []
      for (const row of outbox) {
        const topic = typeof row["topic"] === "string" ? row["topic"] : ""
        const offset = yield* numberField(row, "source_offset", operation)
        if (offset >= (published.get(topic) ?? 0) && typeof row["record"] === "string") pending.push(yield* decodeRecord(row["record"]))
      }
      return { epoch, positions, pending }
    })).pipe(Effect.mapError(toDatabaseError(operation)), commitFailures(operation))
  }

  const commit: SinkStore["commit"] = (groupId, partition, epoch, positions, letters) =>
    Effect.gen(function*() {
      const seqs = new Map<string, number>()
      for (const record of letters) {
        const source = Option.getOrElse(sourceOf(record), () => ({ topic: "", partition, offset: -1 }))
        const key = `${source.topic}\u0000${source.offset}`
        const seq = seqs.get(key) ?? 0
        seqs.set(key, seq + 1)
        yield* sql`INSERT INTO ${deadLetters} (group_id, topic, partition_id, source_offset, seq, record)
          VALUES (${groupId}, ${source.topic}, ${partition}, ${source.offset}, ${seq}, ${encodeRecord(record)})`.pipe(
          Effect.mapError(toDatabaseError(`writing a dead letter to ${tables.deadLetters}`))
        )
      }
      for (const position of positions) {
        const updated = yield* sql`UPDATE ${offsets} SET next_offset = ${position.offset}
          WHERE group_id = ${groupId} AND topic = ${position.topic} AND partition_id = ${position.partition}
          AND epoch = ${epoch} RETURNING epoch`.pipe(
          Effect.mapError(toDatabaseError(`updating the offsets in ${tables.offsets}`))
        )
        if (updated.length === 0) {
          return yield* new TaskMigrated({
            partition,
            cause: `the owner epoch of ${position.topic}/${position.partition} in ${tables.offsets} is no longer ${epoch}: ` +
              "a newer owner took the partition, this transaction rolls back"
          })
        }
      }
    })

  const published: SinkStore["published"] = (groupId, positions) =>
    Effect.forEach(positions, (position) =>
      sql`DELETE FROM ${deadLetters} WHERE group_id = ${groupId} AND topic = ${position.topic}
        AND partition_id = ${position.partition} AND source_offset < ${position.offset}`, { discard: true }).pipe(
      Effect.mapError(toDatabaseError(`deleting published dead letters from ${tables.deadLetters}`))
    )

  const positions: SinkStore["positions"] = (groupId) => {
    const operation = `reading the positions in ${tables.offsets}`
    return Effect.flatMap(
      sql`SELECT topic, partition_id, next_offset, epoch FROM ${offsets} WHERE group_id = ${groupId} ORDER BY topic, partition_id`.pipe(
        Effect.mapError(toDatabaseError(operation))
      ),
      (rows) =>
        Effect.forEach(rows, (row) =>
          Effect.gen(function*() {
            const partition = yield* numberField(row, "partition_id", operation)
            const epoch = yield* numberField(row, "epoch", operation)
            return { topic: String(row["topic"]), partition, nextOffset: toNumber(row["next_offset"]), epoch }
          }))
    )
  }

  return { tables, ensure, transaction, claim, commit, published, positions }
}

/** The `SqlClient` of the run's context, if the program provides one. */
export const currentClient: Effect.Effect<Option.Option<SqlClient.SqlClient>> = Effect.serviceOption(SqlClient.SqlClient)
