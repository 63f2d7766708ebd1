/**
 * A task of a `DatabaseSink`: where it starts and how it commits, when its
 * offsets live in the database rather than in Kafka.
 *
 * Start (`claim`, after the task's producer fenced the previous owner's):
 * the group's Kafka offsets are read (the outbox's published mark), then one
 * database transaction bumps the partition's owner epoch and reads its
 * positions and unpublished dead letters; the consumer seeks to the
 * positions; the dead letters are published in one Kafka transaction that
 * also moves the group's Kafka offsets to the positions; the published rows
 * are deleted.
 *
 * Each batch (`processSlices`): one database transaction holds the batch's
 * records (a per-record handler runs each in a savepoint, so a failed
 * attempt's writes roll back before its rule retries, skips or dead-letters
 * it; a batch handler runs once for the kept records), the dead letters
 * (outbox) and the offsets, conditional on the epoch. After it commits, the
 * dead letters (if any, else every `kafkaCommitInterval`) go out in a Kafka
 * transaction with the group's offsets (lag monitoring, and the outbox mark).
 *
 * @internal
 */
import { Cause, Clock, Duration, Effect, Either, Option } from "effect"
import type { RunnerError, TaskMigrated } from "../../SkeinError.ts"
import { ConfigurationError, DatabaseError, KafkaError, OffsetOutOfRange } from "../../SkeinError.ts"
import type * as Topic from "../../Topic.ts"
import type { PartitionOffset } from "../../TopicPartition.ts"
import type { Transformer } from "../../Transformer.ts"
import * as Batch from "../runtime/batch.ts"
import { deadLetter } from "../runtime/deadLetter.ts"
import { describe } from "../util/errorText.ts"
import type { FetchedRecord } from "../kafka/consumer.ts"
import * as PartitionsAdded from "../runtime/partitionsAdded.ts"
import * as Rules from "../runtime/rules.ts"
import type { Committed, Delivery, Outcome, Task, TaskContext } from "../runtime/Task.ts"
import * as SinkStoreModule from "./SinkStore.ts"
import type { SinkStore, Tables } from "./SinkStore.ts"

/**
 * What a `DatabaseSink` adds to its transformer: its tables, and for a batch
 * handler, a fresh collector per batch.
 */
export interface SinkHooks<E> {
  readonly tables: Tables
  /** How often the group's Kafka offsets follow the database's when no dead letter moves them. */
  readonly kafkaCommitInterval: Duration.Duration
  /** A batch handler's run over one batch (unset: a per-record handler, run by the transform). */
  readonly batch?: Effect.Effect<BatchRun<E>> | undefined
  /** The sink's input topics declared with `keyConcurrency`, which a sink refuses (`keyConcurrencyRefused`). */
  readonly keyConcurrent: ReadonlyArray<string>
}

/**
 * Key concurrency in a sink: refused, with why and what to do instead. A
 * sink runs a partition's records in one database transaction on one
 * connection, which runs one statement at a time; a per-record handler's
 * savepoints nest, so records begun beside each other could not roll back
 * alone (rolling one back undoes every record begun after it).
 */
export const keyConcurrencyRefused = (hooks: SinkHooks<unknown>, name: string): Option.Option<ConfigurationError> =>
  hooks.keyConcurrent.length === 0 ? Option.none() : Option.some(
    new ConfigurationError({
      problem: `The database sink "${name}" reads ${hooks.keyConcurrent.join(", ")} with keyConcurrency, which a sink does not offer: ` +
        "it runs a partition's records in one database transaction on one connection, which runs one statement at a time, " +
        "and each record's savepoint must end before the next one begins (savepoints nest: rolling one back would undo the " +
        "records begun after it)",
      fix: "Declare the sink's input topic without keyConcurrency (a Topic.make of the same name for the sink), or use " +
        "DatabaseSink.batch and run the records' slow work concurrently inside its handler " +
        "(Effect.forEach(records, ..., { concurrency })) before one bulk insert"
    })
  )

/**
 * One batch of a batch handler: the transform collects its records (and the
 * services it runs with), `handle` runs the handler on them with those
 * services: no requirement of its own, so a transformer whose services are
 * provided (`Effect.provide` around its transform) keeps working.
 */
export interface BatchRun<E> {
  /** Runs the batch's transforms with this run's collector. */
  readonly collecting: <A, E2, R2>(effect: Effect.Effect<A, E2, R2>) => Effect.Effect<A, E2, R2>
  /** The records collected, in order. */
  readonly records: () => ReadonlyArray<{ readonly topic: string; readonly offset: number }>
  /** The handler over the collected records, in a savepoint of the batch's transaction. */
  readonly handle: Effect.Effect<void, E>
}

/** A task's hold on its partition in the database. */
export interface TaskDatabase {
  readonly store: SinkStore
  /** The owner epoch this task claimed: its commits are conditional on it. */
  readonly epoch: number
  /** When the group's Kafka offsets last followed the database's (ms). */
  kafkaCommittedAt: number
  /**
   * Offsets committed in the database and not yet in Kafka, per topic (a batch that was not due
   * for the Kafka commit): `followKafka` commits them once the interval is over, if no batch did.
   */
  readonly kafkaBehind: Map<string, PartitionOffset>
  readonly kafkaCommitInterval: Duration.Duration
  /** Dead letters this task committed to the outbox and has not published yet. */
  outboxPending: number
  /** Reports the epoch and `outboxPending` (health, metrics). */
  readonly report: () => void
}

/**
 * A `DatabaseSink`'s tables, at the start of its run: the run's `SqlClient`
 * (a `ConfigurationError` naming the fix without one), the tables created
 * when missing. `undefined` for any other transformer.
 */
export const setup = <E>(
  hooks: SinkHooks<E> | undefined,
  name: string
): Effect.Effect<{ readonly store: SinkStore; readonly kafkaCommitInterval: Duration.Duration } | undefined, RunnerError> =>
  hooks === undefined ? Effect.succeed(undefined) : Effect.gen(function*() {
    const refused = keyConcurrencyRefused(hooks, name)
    if (Option.isSome(refused)) return yield* refused.value
    const client = yield* SinkStoreModule.currentClient
    if (Option.isNone(client)) {
      return yield* new ConfigurationError({
        problem: `The database sink "${name}" has no database: the run's context holds no SqlClient`,
        fix: "Provide one to the run, e.g. Effect.provide(DatabaseSink.connect(PgClient.layerConfig({ url: Config.redacted(\"DATABASE_URL\") }))) with @effect/sql-pg"
      })
    }
    const store = SinkStoreModule.make(client.value, hooks.tables)
    yield* store.ensure
    return { store, kafkaCommitInterval: hooks.kafkaCommitInterval }
  })

/** A claimed partition: where its inputs start, and the task's hold on it. */
export interface Claimed {
  readonly startOffsets: ReadonlyArray<PartitionOffset>
  readonly database: TaskDatabase
}

/**
 * Takes `partition` in the database (after fencing): its start offsets are
 * the database's positions (the earliest offset where it has none), its
 * unpublished dead letters are published.
 */
export const claim = <P extends number>(
  context: TaskContext,
  sink: NonNullable<TaskContext["database"]>,
  delivery: Delivery<P>,
  partition: P
): Effect.Effect<Claimed, RunnerError> =>
  Effect.gen(function*() {
    const { kafkaCommitInterval, store } = sink
    const published = yield* context.admin.committedOffsets(context.applicationId, context.inputTopics, partition)
    const claimed = yield* store.claim(context.applicationId, partition, context.inputTopics, published)
    const startOffsets = yield* Effect.forEach(context.inputTopics, (topic) =>
      Effect.gen(function*() {
        const range = yield* context.admin.offsetRange(topic, partition)
        if (partition >= range.partitions) {
          return yield* PartitionsAdded.inputMissing(context.admin, context.inputTopics, topic, partition, range.partitions)
        }
        const position = claimed.positions.get(topic)
        if (position === undefined) return { topic, partition, offset: range.low }
        if (position < range.low || position > range.end) {
          return yield* new OffsetOutOfRange({ topic, partition, committed: position, earliest: range.low, end: range.end })
        }
        return { topic, partition, offset: position }
      }))
    sink.onPartition(partition, { epoch: claimed.epoch, outboxPending: claimed.pending.length })
    // The dead letters a previous owner committed and never published; the group's Kafka offsets follow.
    const send = delivery._tag === "ExactlyOnce"
      ? delivery.producer.commit(claimed.pending, { groupId: context.applicationId, offsets: startOffsets })
      : delivery.producer.deliver(claimed.pending)
    // Fenced this early, another instance took the partition: retried like any failed task start.
    yield* Effect.catchTag(
      send,
      "TaskMigrated",
      (error) => Effect.fail(new KafkaError({ reason: "Fenced", operation: "publishing the outbox's dead letters", cause: error }))
    )
    yield* store.published(context.applicationId, startOffsets)
    if (claimed.pending.length > 0) {
      yield* Effect.logInfo(`task ${partition}: published ${claimed.pending.length} dead letters a previous owner committed`)
    }
    yield* Effect.logInfo(
      `task ${partition}: owner epoch ${claimed.epoch} in ${store.tables.offsets}, starting at ` +
        startOffsets.map((o) => `${o.topic}@${o.offset}`).join(", ")
    )
    const database: TaskDatabase = {
      store,
      epoch: claimed.epoch,
      kafkaCommittedAt: yield* Clock.currentTimeMillis,
      kafkaBehind: new Map(),
      kafkaCommitInterval,
      outboxPending: 0,
      report: () => sink.onPartition(partition, { epoch: claimed.epoch, outboxPending: database.outboxPending })
    }
    database.report()
    return { startOffsets, database }
  })

/** The batch's fatal failure: the database transaction rolls back, the partition fails. */
export class BatchFailed<E> {
  readonly _tag = "BatchFailed"
  constructor(readonly cause: Cause.Cause<Batch.RecordError<E>>) {}
}

/** Dead letter copies of a batch handler's records that a rule dead-lettered (all the batch's kept records). */
const batchDeadLetters = (
  slices: ReadonlyArray<Batch.Slice>,
  records: ReadonlyArray<{ readonly topic: string; readonly offset: number }>,
  topic: string,
  error: unknown,
  limit: number
): ReadonlyArray<Topic.EncodedRecord> => {
  const raw = new Map<string, FetchedRecord>()
  for (const slice of slices) for (const record of slice.records) raw.set(`${record.topic}\u0000${record.offset}`, record)
  const letters: Array<Topic.EncodedRecord> = []
  for (const { offset, topic: source } of records) {
    const record = raw.get(`${source}\u0000${offset}`)
    if (record !== undefined) letters.push(deadLetter(topic, record, { message: describe(error), part: "batch" }, limit))
  }
  return letters
}

/**
 * A sink's batch, inside its database transaction: `run` (the batch's
 * records through the transform: a per-record handler in a savepoint each, a
 * batch handler's collector), then a batch handler under the rules. Its
 * outputs are the dead letters (a sink's transform emits nothing else).
 * Shared by the runner and `TestDriver`.
 */
export const runBatch = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R, E2>(
  transformer: Transformer<Inputs, S, E, R>,
  slices: ReadonlyArray<Batch.Slice>,
  run: Effect.Effect<Batch.TaskBatchResult<E>, E2, R>,
  options: Pick<Batch.Options, "deadLetterTopic" | "messageLimits"> & { readonly onRetry: () => void }
): Effect.Effect<
  { readonly result: Batch.TaskBatchResult<E>; readonly deadLetters: ReadonlyArray<Topic.EncodedRecord> },
  E2 | BatchFailed<E> | DatabaseError | KafkaError,
  R
> =>
  Effect.gen(function*() {
    const batchRun = transformer.database?.batch === undefined ? undefined : yield* transformer.database.batch
    const result = yield* (batchRun === undefined ? run : batchRun.collecting(run))
    let deadLetters: ReadonlyArray<Topic.EncodedRecord> = result.outputs
    if (batchRun !== undefined && batchRun.records().length > 0) {
      const ruled = yield* Effect.either(Rules.apply(transformer.rules, () => batchRun.handle, {
        hasDeadLetterTopic: Option.isSome(options.deadLetterTopic),
        onRetry: options.onRetry
      }))
      if (Either.isLeft(ruled)) {
        // The database went away under the handler: the batch rolls back and the partition rewinds.
        if (ruled.left instanceof DatabaseError) return yield* Effect.fail(ruled.left)
        // The rules rethrow only what the attempt failed with: the handler's `E`.
        return yield* Effect.fail(new BatchFailed(Cause.fail(ruled.left as Batch.RecordError<E>)))
      }
      if (ruled.right._tag === "Skipped") {
        yield* Effect.logWarning(`skipped a batch of ${batchRun.records().length} records: ${describe(ruled.right.error)}`)
      } else if (ruled.right._tag === "DeadLettered" && Option.isSome(options.deadLetterTopic)) {
        const limit = yield* options.messageLimits.lookup(options.deadLetterTopic.value)
        deadLetters = [
          ...deadLetters,
          ...batchDeadLetters(slices, batchRun.records(), options.deadLetterTopic.value, ruled.right.error, limit)
        ]
      }
    }
    return { result, deadLetters }
  })

/**
 * A sink's batch as `TestDriver` runs it: `runBatch` in one transaction of
 * the program's `SqlClient` (when it provides one), without offsets, epochs
 * or an outbox; the result's outputs are its dead letters.
 */
export const driverBatch = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R, E2>(
  transformer: Transformer<Inputs, S, E, R>,
  slices: ReadonlyArray<Batch.Slice>,
  run: Effect.Effect<Batch.TaskBatchResult<E>, E2, R>,
  options: Pick<Batch.Options, "deadLetterTopic" | "messageLimits">
): Effect.Effect<Batch.TaskBatchResult<E>, E2 | BatchFailed<E> | DatabaseError | KafkaError, R> =>
  Effect.flatMap(SinkStoreModule.currentClient, (client) => {
    const batch = Effect.map(
      runBatch(transformer, slices, run, { ...options, onRetry: () => undefined }),
      ({ deadLetters, result }) => ({ ...result, outputs: deadLetters })
    )
    return Option.match(client, {
      onNone: () => batch,
      onSome: (sql) =>
        SinkStoreModule.make(sql, transformer.database?.tables ?? { offsets: "", deadLetters: "" }).transaction(batch)
    })
  })

/**
 * What a task logs when its batch's transaction failed the owner epoch check
 * (a zombie's late transaction) and rolled back.
 */
export const epochRejected = "batch transaction rejected by the owner epoch check and rolled back"

/**
 * An idle task's Kafka offsets follow the database's: when a batch committed offsets to the
 * database that no Kafka commit followed (not due then) and `kafkaCommitInterval` is over, they
 * are committed to Kafka in a transaction of the task's producer (exactly-once; at-least-once
 * commits acknowledged offsets on its own). Lag monitoring only: a failure is logged, and the
 * next batch or start commits them. The caller holds the task's batch lock.
 */
export const followKafka = <P extends number>(task: Task<P>, database: TaskDatabase, groupId: string): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (database.kafkaBehind.size === 0 || task.delivery._tag !== "ExactlyOnce") return
    const now = yield* Clock.currentTimeMillis
    if (now - database.kafkaCommittedAt < Duration.toMillis(database.kafkaCommitInterval)) return
    const offsets = [...database.kafkaBehind.values()]
    const sent = yield* Effect.either(Effect.uninterruptible(task.delivery.producer.commit([], { groupId, offsets })))
    if (Either.isLeft(sent)) {
      return yield* Effect.logWarning(`task ${task.partition}: its Kafka offsets stay behind the database's until its next batch: ${sent.left.message}`)
    }
    database.kafkaCommittedAt = now
    database.kafkaBehind.clear()
  })

/** The slices' records as `topic/partition@first..last` (for a log line). */
const rangesOf = (slices: ReadonlyArray<Batch.Slice>): string =>
  slices.filter((slice) => slice.records.length > 0).map((slice) =>
    `${slice.topic}/${slice.partition}@${slice.records[0]!.offset}..${slice.records[slice.records.length - 1]!.offset}`
  ).join(", ")

/**
 * Runs the task's slices in one database transaction and commits them with
 * their offsets there (see the module's comment); the outcome as
 * `Task.processSlices` gives it.
 */
export const processSlices = <P extends number, Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  task: Task<P>,
  database: TaskDatabase,
  transformer: Transformer<Inputs, S, E, R>,
  slices: ReadonlyArray<Batch.Slice>,
  options: Batch.Options & {
    readonly groupId: string
    readonly onRetries: (retries: number) => void
    readonly inTransaction: <A, E2, R2>(commit: Effect.Effect<A, E2, R2>) => Effect.Effect<A, E2, R2>
    readonly onCommitted: (committed: Committed) => Effect.Effect<void>
  }
): Effect.Effect<Outcome<E>, never, R> => {
  const processed: Effect.Effect<Outcome<E>, never, R> = Effect.gen(function*() {
    const partition = task.partition
    const { store } = database
    let retries = 0
    const body = Effect.gen(function*() {
      const run = Batch.run(transformer, task.store, slices, { ...options, cache: task.cache, partition, timers: task.timers })
      const { deadLetters, result } = yield* runBatch(transformer, slices, run, {
        ...options,
        onRetry: () => {
          retries++
        }
      })
      retries += result.retries
      const offsets = slices.map((slice, i) => ({ topic: slice.topic, partition: slice.partition, offset: result.cuts[i]!.offset }))
      const moved = result.cuts.some((cut) => cut.kept > 0) || result.processed > 0
      if (moved) yield* store.commit(options.groupId, partition, database.epoch, offsets, deadLetters)
      return { result, deadLetters, offsets, moved }
    })
    const committed = yield* Effect.either(options.inTransaction(store.transaction(body)))
    options.onRetries(retries)
    if (Either.isLeft(committed)) {
      const error: BatchFailed<E> | DatabaseError | TaskMigrated | KafkaError = committed.left
      switch (error._tag) {
        case "BatchFailed":
          return { _tag: "Failed", partition, cause: error.cause }
        case "TaskMigrated":
          // Only the offsets' update fails so: a newer owner bumped the epoch, the batch's rows rolled back with it.
          yield* Effect.logWarning(`task ${partition}: ${epochRejected} (records ${rangesOf(slices)}; ${String(error.cause)})`)
          return { _tag: "Migrated", partition, error }
        case "KafkaError":
        case "DatabaseError":
          // Rolled back: the task restarts from the database's positions after a backoff (a refusal ends the run).
          return { _tag: "DeliveryFailed", partition, error }
      }
    }
    const { deadLetters, moved, offsets, result } = committed.right
    yield* Effect.annotateCurrentSpan({
      "skein.processed": result.processed,
      "skein.skipped": result.skipped,
      "skein.dead_lettered": deadLetters.length,
      "skein.database.epoch": database.epoch
    })
    if (moved) {
      if (deadLetters.length > 0) {
        database.outboxPending += deadLetters.length
        database.report()
      }
      yield* options.onCommitted({ result, offsets })
      const now = yield* Clock.currentTimeMillis
      const due = now - database.kafkaCommittedAt >= Duration.toMillis(database.kafkaCommitInterval)
      for (const offset of offsets) database.kafkaBehind.set(offset.topic, offset)
      if (deadLetters.length > 0 || due) {
        const send = task.delivery._tag === "ExactlyOnce"
          ? task.delivery.producer.commit(deadLetters, { groupId: options.groupId, offsets })
          : task.delivery.producer.deliver(deadLetters)
        const sent = yield* Effect.either(Effect.uninterruptible(send))
        if (Either.isLeft(sent)) {
          // Committed in the database: the next owner of the partition (this task, restarted) publishes them.
          return sent.left._tag === "TaskMigrated"
            ? { _tag: "Migrated", partition, error: sent.left }
            : { _tag: "DeliveryFailed", partition, error: sent.left }
        }
        database.kafkaCommittedAt = now
        database.kafkaBehind.clear()
        // Published: the Kafka transaction moved the outbox's mark past them.
        if (database.outboxPending > 0) {
          database.outboxPending = 0
          database.report()
        }
        yield* Effect.catchAll(
          store.published(options.groupId, offsets),
          (error) => Effect.logWarning(`task ${partition}: published dead letters stay in the outbox until the next start: ${error.message}`)
        )
      }
    }
    if (Option.isSome(result.failure)) {
      const failed: unknown = Option.getOrUndefined(Cause.failureOption(result.failure.value))
      // A record's handler lost the database (what finished before it is committed): the partition rewinds.
      if (failed instanceof DatabaseError) return { _tag: "DeliveryFailed", partition, error: failed }
      return { _tag: "Failed", partition, cause: result.failure.value }
    }
    return { _tag: "Committed", partition }
  })
  return processed.pipe(
    Effect.withSpan("skein.batch", {
      kind: "consumer",
      captureStackTrace: false,
      attributes: {
        "skein.application_id": options.groupId,
        "skein.transformer": transformer.name,
        "skein.sink": "database",
        "messaging.system": "kafka",
        "messaging.operation.type": "process",
        "messaging.destination.partition.id": String(task.partition),
        "messaging.batch.message_count": slices.reduce((n, slice) => n + slice.records.length, 0)
      }
    })
  )
}
