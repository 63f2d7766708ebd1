/**
 * Exactly-once into a database: a sink whose handler writes the records of
 * typed topics through an `@effect/sql` `SqlClient` (Postgres with
 * `@effect/sql-pg`; any `@effect/sql` driver with `ON CONFLICT` and
 * `RETURNING`), in one database transaction per batch that also holds the
 * input offsets. A crash, a rebalance or a zombie instance never loses or
 * doubles a row.
 *
 * - **Offsets in the database.** Skein keeps `(consumer group, topic,
 *   partition) -> next offset, owner epoch` in a table of its own
 *   (`skein_offsets`), written in the batch's transaction. When a partition is
 *   assigned, its position is read from there (Kafka's committed offsets are
 *   not used for it) and the consumer seeks to it.
 * - **Zombies fenced.** Taking a partition bumps its owner epoch; every
 *   batch's offset update is conditional on the epoch its task took, so a
 *   paused old owner's late transaction updates no row and rolls back with
 *   its rows (`TaskMigrated`: the instance rejoins).
 * - **Error rules.** A per-record handler runs each record in a savepoint:
 *   a failed attempt's writes roll back before its rule retries it, skips it
 *   or dead-letters it, and the batch's other records stay. A batch handler
 *   that fails rolls the whole batch back; its rule retries the batch, skips
 *   it, or dead-letters all of its records. A fatal error commits the
 *   records before it (per-record) or nothing (batch), then fails the
 *   partition or the run (`failureIsolation`). A handler's SQL failures are
 *   `SqlError`s for its rules; Skein's own (its tables, the transaction) and
 *   a lost connection are `SkeinError.DatabaseError`s, which no rule sees:
 *   the batch rolls back and the partition rewinds to the database's
 *   positions after a backoff (a `Refused` one ends the run with its fix).
 * - **Dead letters, exactly once.** A dead letter's copy is written to an
 *   outbox table (`skein_dead_letters`) in the batch's transaction, so a
 *   rollback drops it with the batch and a commit keeps it once. After the
 *   commit, the copies are produced to the dead letter topic in a Kafka
 *   transaction that also commits the group's Kafka offsets to the batch's
 *   end: those offsets are the outbox's "published up to" mark. A task that
 *   takes the partition publishes the rows at or past the mark (a crash or a
 *   zombie left them unpublished) before its first record; published rows
 *   are deleted.
 * - **Kafka offsets** follow the database's (for lag monitoring: every
 *   `kafkaCommitInterval`, with each dead letter, and an interval after the
 *   last batch once the input is idle), and are never read for a position.
 *
 * A sink is a `Transformer`: `Runner.run`, `Runner.runAll`, `Runner.runMain`,
 * health, metrics, tracing, grace periods and failure isolation work as for
 * any transformer. Its records run one after the other per partition (one
 * transaction per task); an input topic with `keyConcurrency` is refused at
 * startup (docs/database-sink.md, "Key concurrency").
 *
 * @example
 * ```ts
 * import { PgClient } from "@effect/sql-pg"
 * import { Effect, Redacted, Schema } from "effect"
 * import { DatabaseSink, Runner, SkeinConfig, Topic } from "skein"
 *
 * const Orders = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Schema.Struct({ total: Schema.Number })) })
 *
 * const Sink = DatabaseSink.make({
 *   name: "orders-to-postgres",
 *   inputs: [Orders],
 *   handler: (record, sql) => sql`INSERT INTO orders (id, total) VALUES (${record.key}, ${record.value.total})`
 * })
 *
 * Runner.run(Sink).pipe(
 *   Effect.provide(DatabaseSink.connect(PgClient.layer({ url: Redacted.make(process.env["DATABASE_URL"]!) }))),
 *   Effect.provide(SkeinConfig.layerConfig()),
 *   Runner.runMain
 * )
 * ```
 *
 * @since 0.6.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Duration, Effect, FiberRef, Layer, Option } from "effect"
import type { BatchRun, SinkHooks } from "./internal/database/DatabaseTask.ts"
import { commitFailures, isSqlError, toDatabaseError, toStartupError } from "./internal/database/SinkStore.ts"
import { defaultStateKey } from "./internal/runtime/StateKeyCheck.ts"
import type { DatabaseError } from "./SkeinError.ts"
import type * as Topic from "./Topic.ts"
import type { RecordOf, Result, Rule, Transformer } from "./Transformer.ts"

/**
 * The names of Skein's tables in the database (created when missing, in the
 * connection's default schema).
 *
 * @since 0.6.0
 * @category models
 */
export interface Tables {
  /** `(group_id, topic, partition_id) -> next_offset, epoch`. Default `skein_offsets`. */
  readonly offsets?: string | undefined
  /** The dead letter outbox. Default `skein_dead_letters`. */
  readonly deadLetters?: string | undefined
}

/**
 * The default table names.
 *
 * @since 0.6.0
 * @category constants
 */
export const defaultTables = { offsets: "skein_offsets", deadLetters: "skein_dead_letters" } as const

/**
 * What `make` and `batch` share.
 *
 * @since 0.6.0
 * @category models
 */
export interface Options<Inputs extends ReadonlyArray<Topic.Any>, E> {
  /** The sink's name (its transformer's: metrics, logs, `runAll`'s group suffix). */
  readonly name: string
  readonly inputs: Inputs
  /**
   * What happens when the handler fails (`ErrorRule`): retry, then `dlq`,
   * `skip` or `fail`; its SQL failures are `SqlError`s
   * (`ErrorRule.tagged("SqlError", ...)`). Unmatched errors are fatal.
   */
  readonly rules?: ReadonlyArray<Rule<NoInfer<E>>> | undefined
  readonly tables?: Tables | undefined
  /** How often the group's Kafka offsets follow the database's without a dead letter, busy or idle (default 5 s). */
  readonly kafkaCommitInterval?: Duration.DurationInput | undefined
}

const nothing: Result<never> = {}

/**
 * The sink's database client layer (`PgClient.layer`, `PgClient.layerConfig`,
 * any `@effect/sql` driver's), with its connection failures as
 * `SkeinError.DatabaseError`s that say what to fix. `@effect/sql-pg`
 * connects while its layer is built, before the run starts: a wrong host or
 * port (`Unavailable`, "check the host and port"), a host that does not
 * resolve (`Unavailable`), a wrong password (`Refused`, "check the user and
 * password") or a missing database (`Refused`, "create the database") end
 * the run at once with this error instead of the driver's
 * `SqlError: PgClient: Failed to connect`. Its message never holds the URL's
 * password (the driver's messages name the user, host and database only).
 *
 * @example
 * ```ts
 * import { PgClient } from "@effect/sql-pg"
 * import { Config, Effect } from "effect"
 * import { DatabaseSink, Runner, SkeinConfig } from "skein"
 * import { Sink } from "./sink.ts"
 *
 * Runner.run(Sink).pipe(
 *   Effect.provide(DatabaseSink.connect(PgClient.layerConfig({ url: Config.redacted("DATABASE_URL") }))),
 *   Effect.provide(SkeinConfig.layerConfig()),
 *   Runner.runMain
 * )
 * ```
 *
 * @since 0.6.0
 * @category layers
 */
export const connect = <ROut, E, RIn>(client: Layer.Layer<ROut, E, RIn>): Layer.Layer<ROut, E | DatabaseError, RIn> =>
  Layer.catchAll(client, (error) => Layer.fail(isSqlError(error) ? toStartupError("connection")(error) : error))


/**
 * A handler's `SqlError` that says the connection is gone is the runtime's
 * (a `DatabaseError`: the batch rolls back and the partition rewinds after a
 * backoff), never a record's for its rules; other `SqlError`s stay the
 * handler's.
 */
const connectionLost = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | DatabaseError, R> =>
  Effect.catchIf(
    effect,
    (error) => isSqlError(error) && toDatabaseError("handler")(error).reason === "Unavailable",
    (error) => Effect.fail(toDatabaseError("handler")(error))
  ).pipe(commitFailures("savepoint"))

const hooksOf = <E>(
  options: {
    readonly inputs: ReadonlyArray<Topic.Any>
    readonly tables?: Tables | undefined
    readonly kafkaCommitInterval?: Duration.DurationInput | undefined
  },
  batch: Effect.Effect<BatchRun<E>> | undefined
): SinkHooks<E> => ({
  tables: {
    offsets: options.tables?.offsets ?? defaultTables.offsets,
    deadLetters: options.tables?.deadLetters ?? defaultTables.deadLetters
  },
  kafkaCommitInterval: Duration.decode(options.kafkaCommitInterval ?? "5 seconds"),
  batch,
  // Refused at startup (DatabaseTask.keyConcurrencyRefused): see "Key concurrency" in docs/database-sink.md.
  keyConcurrent: options.inputs.filter((topic) => topic.keyConcurrency).map((topic) => topic.name)
})

const transformerOf = <Inputs extends ReadonlyArray<Topic.Any>, E, R>(
  options: Options<Inputs, E>,
  transform: (record: RecordOf<Inputs>) => Effect.Effect<Result<never>, E | SqlError | DatabaseError, R>,
  batch: Effect.Effect<BatchRun<E | SqlError | DatabaseError>> | undefined
): Transformer<Inputs, never, E | SqlError | DatabaseError, R> => ({
  name: options.name,
  inputs: options.inputs,
  state: Option.none(),
  stateKey: defaultStateKey,
  transform,
  // One database transaction per task and batch: its records run one after the other.
  sharedState: true,
  // Widened to the transaction's own SqlError (a failed BEGIN or SAVEPOINT): a tagged rule matches by
  // tag, and a predicate is only asked about errors its handler can fail with when it uses `sql`, as
  // every handler does (its E then has SqlError already).
  // (A `DatabaseError` never reaches a rule: the runtime's own, like a `KafkaError`.)
  rules: (options.rules ?? []) as ReadonlyArray<Rule<E | SqlError | DatabaseError>>,
  database: hooksOf(options, batch)
})

/**
 * A sink with a per-record handler: `handler` runs for each record, in a
 * savepoint of its batch's transaction, with the `SqlClient` to write
 * through. Its errors go through `rules`.
 *
 * @example
 * ```ts
 * import { DatabaseSink } from "skein"
 *
 * const Sink = DatabaseSink.make({
 *   name: "orders-to-postgres",
 *   inputs: [Orders],
 *   handler: (record, sql) => sql`INSERT INTO orders (id, total) VALUES (${record.key}, ${record.value.total})`
 * })
 * ```
 *
 * @since 0.6.0
 * @category constructors
 */
export const make = <const Inputs extends ReadonlyArray<Topic.Any>, A, E = never, R = never>(
  options: Options<Inputs, E> & {
    readonly handler: (record: RecordOf<Inputs>, sql: SqlClient.SqlClient) => Effect.Effect<A, E, R>
  }
): Transformer<Inputs, never, E | SqlError | DatabaseError, R | SqlClient.SqlClient> =>
  transformerOf(
    options,
    (record) =>
      Effect.flatMap(SqlClient.SqlClient, (sql) => Effect.as(connectionLost(sql.withTransaction(options.handler(record, sql))), nothing)),
    undefined
  )

/** The records of the batch in flight and the services its transforms ran with. */
interface Collector<Inputs extends ReadonlyArray<Topic.Any>, R> {
  readonly records: Array<RecordOf<Inputs>>
  context: Context.Context<R> | undefined
}

/**
 * A sink with a batch handler: `handler` runs once per batch with its
 * records (in offset order per partition; records a decoding rule skipped or
 * dead-lettered are not there), in the batch's transaction, for a bulk
 * insert. A failure rolls the whole batch back; its rule retries the batch,
 * skips it or dead-letters all of its records.
 *
 * @example
 * ```ts
 * import { DatabaseSink } from "skein"
 *
 * const Sink = DatabaseSink.batch({
 *   name: "orders-to-postgres",
 *   inputs: [Orders],
 *   handler: (records, sql) =>
 *     sql`INSERT INTO orders ${sql.insert(records.map((r) => ({ id: r.key, total: r.value.total })))}`
 * })
 * ```
 *
 * @since 0.6.0
 * @category constructors
 */
export const batch = <const Inputs extends ReadonlyArray<Topic.Any>, A, E = never, R = never>(
  options: Options<Inputs, E> & {
    readonly handler: (records: ReadonlyArray<RecordOf<Inputs>>, sql: SqlClient.SqlClient) => Effect.Effect<A, E, R>
  }
): Transformer<Inputs, never, E | SqlError | DatabaseError, R | SqlClient.SqlClient> => {
  const current = FiberRef.unsafeMake<Collector<Inputs, R | SqlClient.SqlClient> | undefined>(undefined)
  const runAlone = (records: ReadonlyArray<RecordOf<Inputs>>) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) => connectionLost(sql.withTransaction(options.handler(records, sql))))
  const run: Effect.Effect<BatchRun<E | SqlError | DatabaseError>> = Effect.sync(() => {
    const collector: Collector<Inputs, R | SqlClient.SqlClient> = { records: [], context: undefined }
    return {
      collecting: (effect) => Effect.locally(effect, current, collector),
      records: () => collector.records,
      handle: Effect.suspend(() =>
        collector.context === undefined || collector.records.length === 0
          ? Effect.void
          : Effect.asVoid(Effect.provide(
            Effect.flatMap(SqlClient.SqlClient, (sql) => connectionLost(sql.withTransaction(options.handler(collector.records, sql)))),
            collector.context
          ))
      )
    }
  })
  return transformerOf(
    options,
    (record) =>
      Effect.flatMap(FiberRef.get(current), (collector) =>
        collector === undefined
          // Outside a sink's batch (a test driver): the record is a batch of its own.
          ? Effect.as(runAlone([record]), nothing)
          : Effect.map(Effect.context<R | SqlClient.SqlClient>(), (context) => {
            collector.records.push(record)
            collector.context = context
            return nothing
          })),
    run
  )
}
