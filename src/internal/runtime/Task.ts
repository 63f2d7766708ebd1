/**
 * A task: partition N of every input topic, with its fenced transactional
 * producer (or, at-least-once, its plain producer) and its state store.
 *
 * Startup, in its scope, in an order the types enforce: producer -> fence (a
 * `FencedProducer` for this partition) -> committed offsets and changelog
 * end are final -> open the task's store (kept on disk across restarts) and
 * restore it from its changelog partition, from the store's checkpoint when
 * that is still valid, else in full (a store whose changelog is an input
 * topic: from that topic up to the committed offset, `SourceChangelog.ts`)
 * -> seek and resume fetching (one step with
 * its pause finalizer). Closing the scope releases them in reverse order:
 * pause, close the store (kept), release the producer.
 *
 * Each poll, `processSlices` runs the task's records and commits what finished in
 * one uninterruptible step: the transaction (outputs, changelog writes,
 * offsets), then the store with its new checkpoint, the state cache and the
 * caller's cursors.
 *
 * @internal
 */
import { Cause, Duration, Effect, Option } from "effect"
import type { Scope } from "effect"
import { randomUUID } from "node:crypto"
import * as path from "node:path"
import type { ProcessingGuarantee } from "../../SkeinConfig.ts"
import type { DatabaseError, RunnerError, StateStoreError } from "../../SkeinError.ts"
import { KafkaError, OffsetOutOfRange, TaskMigrated } from "../../SkeinError.ts"
import type * as Topic from "../../Topic.ts"
import type { PartitionOffset, TopicPartition } from "../../TopicPartition.ts"
import type { Transformer } from "../../Transformer.ts"
import * as Batch from "./batch.ts"
import type { KafkaAdmin } from "../kafka/admin.ts"
import type { ChangelogReader } from "../kafka/changelogReader.ts"
import type { Kafka } from "../kafka/client.ts"
import type { GroupConsumer } from "../kafka/consumer.ts"
import * as Producer from "../kafka/producer.ts"
import type { AtLeastOnceProducer, FencedProducer, RestorePermit } from "../kafka/producer.ts"
import * as ChangelogReplay from "../stores/ChangelogReplay.ts"
import * as DatabaseTask from "../database/DatabaseTask.ts"
import type { SinkStore } from "../database/SinkStore.ts"
import { describe } from "../util/errorText.ts"
import * as Faults from "./faults.ts"
import * as PartitionsAdded from "./partitionsAdded.ts"
import * as SourceChangelog from "../stores/SourceChangelog.ts"
import type { LocalStores } from "./LocalStores.ts"
import { makeStateCache } from "../stores/StateCache.ts"
import type { StateCache } from "../stores/StateCache.ts"
import * as StateStore from "../stores/StateStore.ts"
import * as Timers from "./timers.ts"
import * as RunStore from "../workflow/RunStore.ts"

/** Decoded states a task keeps in memory, on top of its store. */
const stateCacheCapacity = 100_000

/** How a task delivers its work: one transaction per batch, or acknowledged sends. */
export type Delivery<P extends number = number> =
  | { readonly _tag: "ExactlyOnce"; readonly producer: FencedProducer<P> }
  | { readonly _tag: "AtLeastOnce"; readonly producer: AtLeastOnceProducer<P> }

export interface Task<P extends number = number> {
  readonly partition: P
  /** Where each input partition starts: its committed offset, read after fencing. */
  readonly startOffsets: ReadonlyArray<PartitionOffset>
  readonly delivery: Delivery<P>
  readonly store: Option.Option<StateStore.StateStore<P>>
  /** The store's committed states, decoded. */
  readonly cache: StateCache
  /** The task's committed timers and stream time (a transformer with `onTimer`), read at its first batch. */
  readonly timers: Timers.TimerTable
  /** How the store was restored (`None`: a stateless transformer). */
  readonly restore: Option.Option<Restore>
  /** The task's run store (a durable workflow), restored before its first record. */
  readonly runs: Option.Option<RunStore.RunStore>
  /**
   * After a commit's store write: the changelog offset the store now
   * reflects (announced to the group when the store is the kept one) and its
   * checkpoint lag.
   */
  readonly stored: (position: number, checkpointLag: number) => void
  /** A `DatabaseSink`'s task: its offsets and owner epoch live in the database. */
  readonly database: Option.Option<DatabaseTask.TaskDatabase>
  /** The input topic that is the store's changelog (`SourceChangelog.ts`), if one is. */
  readonly source: Option.Option<string>
}

/** How a task's store was restored at its start. */
export interface Restore {
  /** `tail`: from the kept store's checkpoint; `full`: the whole changelog into an empty store. */
  readonly mode: "tail" | "full"
  /** Why a full restore (no local state, or why the kept one was not trusted). */
  readonly reason: string
  /** The changelog offsets read: from, until (exclusive). */
  readonly from: number
  readonly until: number
  /** Changelog records read. */
  readonly records: number
}

/** What every task of a runner shares. */
export interface TaskContext {
  readonly kafka: Kafka
  readonly admin: KafkaAdmin
  readonly consumer: GroupConsumer
  readonly applicationId: string
  /** The transformer's name (for span attributes). */
  readonly transformer: string
  readonly inputTopics: ReadonlyArray<string>
  readonly changelog: Option.Option<{ readonly topic: string; readonly reader: Effect.Effect<ChangelogReader, RunnerError> }>
  /**
   * Set instead of `changelog` when the store's changelog is one of the
   * inputs (`SourceChangelog.ts`): restored from that topic up to the
   * task's committed offset there; no changelog is written.
   */
  readonly source?: SourceRestore | undefined
  /** The run store topic and its reader, for a durable workflow. */
  readonly runs: Option.Option<{
    readonly topic: string
    readonly reader: Effect.Effect<ChangelogReader, RunnerError>
    readonly retention: Duration.Duration
  }>
  readonly storeDir: string
  readonly transactionTimeout: Duration.Duration
  readonly processingGuarantee: ProcessingGuarantee
  readonly maxMessageBytes: number
  /** An output topic's size limit once known (the producer splits its sends by it). */
  readonly limitOf: (topic: string) => number | undefined
  /** Restore progress of a partition's store: records read so far of `total`. */
  readonly onRestoreProgress: (partition: number, restored: number, total: number) => void
  /** The runner's kept stores as announced to the group: a task updates its own after its restore and each commit. */
  readonly localStores: LocalStores
  /**
   * A running task's checkpoint lag: changelog records written at or after
   * its store's checkpoint (what a restart of the task would read again).
   */
  readonly onCheckpointLag: (partition: number, records: number) => void
  /** A `DatabaseSink`'s tables: positions come from there, and commits go there (see `DatabaseTask`). */
  readonly database?: {
    readonly store: SinkStore
    readonly kafkaCommitInterval: Duration.Duration
    /** A task's owner epoch and its outbox rows not yet published, whenever either changes. */
    readonly onPartition: (partition: number, state: { readonly epoch: number; readonly outboxPending: number }) => void
  } | undefined
}

/** A store restored from one of the task's inputs (`TaskContext.source`). */
export interface SourceRestore {
  readonly topic: string
  readonly reader: Effect.Effect<ChangelogReader, RunnerError>
  readonly toWrite: SourceChangelog.ToWrite
}

/** The transactional id of task `partition`: static, so a new owner fences the old one. */
export const transactionalId = (applicationId: string, partition: number): string => `${applicationId}-${partition}`

/** Dies unless `permit` is the producer this module's `make` obtained for `partition`. */
const checkPermit = (permit: RestorePermit, partition: number): Effect.Effect<void> =>
  Producer.isPermit(permit, partition)
    ? Effect.void
    : Effect.dieMessage(`Skein invariant broken: task ${partition} used a restore permit it was not given`)

/** The attributes of a task's spans. */
const spanAttributes = (context: TaskContext, partition: number) => ({
  "skein.application_id": context.applicationId,
  "skein.transformer": context.transformer,
  "messaging.destination.partition.id": String(partition)
})

/**
 * The next offset to read of each input partition, read after fencing: only
 * then are they final (kafkajs's own reading at group sync may predate it).
 */
const committedOffsets = (context: TaskContext, permit: RestorePermit, partition: number) =>
  Effect.gen(function*() {
    yield* checkPermit(permit, partition)
    const committed = yield* context.admin.committedOffsets(context.applicationId, context.inputTopics, partition)
    return yield* Effect.forEach(context.inputTopics, (topic) =>
      Effect.gen(function*() {
        const range = yield* context.admin.offsetRange(topic, partition)
        if (partition >= range.partitions) {
          return yield* PartitionsAdded.inputMissing(context.admin, context.inputTopics, topic, partition, range.partitions)
        }
        const offset = committed.get(topic) ?? -1
        if (offset < 0) return { topic, partition, offset: range.low }
        if (offset < range.low) {
          return yield* Effect.fail(new OffsetOutOfRange({ topic, partition, committed: offset, earliest: range.low }))
        }
        if (offset > range.end) {
          // A fetch there fails and kafkajs resets it: never restarted in a loop, never a skip.
          return yield* Effect.fail(
            new OffsetOutOfRange({ topic, partition, committed: offset, earliest: range.low, end: range.end })
          )
        }
        return { topic, partition, offset }
      }))
  })

/**
 * Restores `store` from the task's changelog partition up to its end offset
 * (stable once fenced): from its checkpoint when valid, else in full after
 * clearing it. The checkpoint moves to the end only once every record is in.
 */
const restore = (
  context: TaskContext,
  permit: RestorePermit,
  store: StateStore.StateStore,
  changelog: { readonly topic: string; readonly reader: Effect.Effect<ChangelogReader, RunnerError> },
  partition: number,
  what: "changelog" | "run store" = "changelog",
  announce: LocalStores | undefined = undefined
): Effect.Effect<Restore, RunnerError> =>
  Effect.gen(function*() {
    yield* checkPermit(permit, partition)
    const range = yield* context.admin.offsetRange(changelog.topic, partition)
    if (partition >= range.partitions) {
      // The inputs gained partitions while running: never a missing changelog partition restored as empty.
      return yield* PartitionsAdded.storeMissing(context.admin, context.inputTopics, changelog.topic, partition, range.partitions)
    }
    const checkpoint = yield* store.checkpoint
    let start = ChangelogReplay.start(checkpoint, { topic: changelog.topic, partition }, range)
    // A kept store is kept only if the changelog holds the commit that wrote it last.
    const lastCommit = start.mode === "tail" && typeof checkpoint === "object"
      ? ChangelogReplay.checkLastCommit(checkpoint)
      : undefined
    if (lastCommit !== undefined && range.end < lastCommit.until) {
      start = { mode: "full", reason: ChangelogReplay.lostReason(lastCommit) }
    }
    let restored = 0
    let from = range.low
    /** Reads the changelog from `from` to its end into the store. */
    const readTail = Effect.gen(function*() {
      const total = range.end - from
      restored = 0
      context.onRestoreProgress(partition, 0, total)
      if (total <= 0) return
      const reader = yield* changelog.reader
      yield* reader.read(permit, partition, { from, until: range.end }, (records) =>
        ChangelogReplay.apply(store, records).pipe(Effect.tap(() => {
          lastCommit?.feed(records, records.length === 0 ? from : records[records.length - 1]!.offset + 1)
          restored += records.length
          context.onRestoreProgress(partition, restored, total)
        })))
    })
    if (start.mode === "tail") {
      from = start.from
      yield* readTail
      if (lastCommit !== undefined && lastCommit.end(range.end) === "lost") {
        // What the tail wrote is committed, but the store beneath it is not: start again from nothing.
        start = { mode: "full", reason: ChangelogReplay.lostReason(lastCommit) }
        yield* Effect.logWarning(`task ${partition}: ${start.reason}; restoring in full`)
      }
    }
    if (start.mode === "full") {
      announce?.remove(partition)
      yield* store.clear
      from = range.low
      yield* readTail
    }
    yield* store.replay([], { topic: changelog.topic, partition, offset: range.end })
    announce?.set(partition, range.end)
    const summary: Restore = start.mode === "tail"
      ? { mode: "tail", reason: "local state kept", from, until: range.end, records: restored }
      : { mode: "full", reason: start.reason, from, until: range.end, records: restored }
    yield* Effect.logInfo(
      `task ${partition}: restored ${restored} ${what} records (${summary.mode}: ${summary.reason}), ` +
        `offsets ${from} to ${range.end}`
    )
    yield* Effect.annotateCurrentSpan({
      "skein.restore.mode": summary.mode,
      "skein.restore.reason": summary.reason,
      "skein.restore.from": from,
      "skein.restore.until": range.end,
      "skein.restore.records": restored
    })
    return summary
  }).pipe(
    Effect.withSpan("skein.restore", {
      captureStackTrace: false,
      attributes: {
        ...spanAttributes(context, partition),
        "skein.changelog": changelog.topic
      }
    })
  )

/**
 * Restores `store` from its source topic (`SourceChangelog.ts`) up to the
 * task's committed offset there, `committed` (read after fencing): from its
 * checkpoint when valid, else in full after clearing it. The records after
 * the committed offset are the task's to process, not the restore's.
 */
const restoreFromSource = (
  context: TaskContext,
  permit: RestorePermit,
  store: StateStore.StateStore,
  source: SourceRestore,
  partition: number,
  committed: number,
  announce: LocalStores | undefined
): Effect.Effect<Restore, RunnerError> =>
  Effect.gen(function*() {
    yield* checkPermit(permit, partition)
    const range = yield* context.admin.offsetRange(source.topic, partition)
    const start = SourceChangelog.start(yield* store.checkpoint, { topic: source.topic, partition }, range.low, committed)
    let from = range.low
    if (start.mode === "tail") {
      from = start.from
    } else {
      announce?.remove(partition)
      yield* store.clear
    }
    const total = Math.max(0, committed - from)
    let restored = 0
    context.onRestoreProgress(partition, 0, total)
    if (total > 0) {
      const reader = yield* source.reader
      yield* reader.read(permit, partition, { from, until: committed }, (records) =>
        store.replay(SourceChangelog.writes(records, source.toWrite)).pipe(Effect.tap(() => {
          restored += records.length
          context.onRestoreProgress(partition, restored, total)
        })))
    }
    yield* store.replay([], { topic: source.topic, partition, offset: committed })
    announce?.set(partition, committed)
    const summary: Restore = start.mode === "tail"
      ? { mode: "tail", reason: "local state kept", from, until: committed, records: restored }
      : { mode: "full", reason: start.reason, from, until: committed, records: restored }
    yield* Effect.logInfo(
      `task ${partition}: restored ${restored} records of its source topic ${source.topic} (${summary.mode}: ` +
        `${summary.reason}), offsets ${from} to ${committed} (its committed offset)`
    )
    yield* Effect.annotateCurrentSpan({
      "skein.restore.mode": summary.mode,
      "skein.restore.reason": summary.reason,
      "skein.restore.from": from,
      "skein.restore.until": committed,
      "skein.restore.records": restored
    })
    return summary
  }).pipe(
    Effect.withSpan("skein.restore", {
      captureStackTrace: false,
      attributes: { ...spanAttributes(context, partition), "skein.changelog": source.topic }
    })
  )

/**
 * Opens the store of task `partition`, kept under the runner's store folder;
 * when another process holds it open (two instances share `stateDir`), a
 * temporary folder of this task's own instead, deleted when it closes.
 */
const openStore = <P extends number>(
  context: TaskContext,
  partition: P,
  name: string = String(partition)
): Effect.Effect<StateStore.StateStore<P>, StateStoreError, Scope.Scope> => {
  const kept = path.join(context.storeDir, name)
  return StateStore.open(kept, partition).pipe(
    Effect.catchIf(StateStore.isLocked, () => {
      const own = path.join(context.storeDir, `${name}.${randomUUID()}.tmp`)
      return Effect.logWarning(
        `task ${partition}: the store at ${kept} is open in another process (two instances share stateDir); ` +
          `this task uses ${own} and restores in full. Give each instance its own stateDir to keep state across restarts`
      ).pipe(
        Effect.zipRight(Effect.acquireRelease(Effect.void, () => StateStore.remove(own))),
        Effect.zipRight(StateStore.open(own, partition))
      )
    })
  )
}

/** Starts task `partition` in the current scope; closing the scope tears it down. */
export const make = <P extends number>(context: TaskContext, partition: P): Effect.Effect<Task<P>, RunnerError, Scope.Scope> =>
  Effect.gen(function*() {
    const delivery: Delivery<P> = context.processingGuarantee === "exactly-once"
      ? {
        _tag: "ExactlyOnce",
        producer: yield* Effect.flatMap(
          Producer.make(context.kafka, {
            partition,
            transactionalId: transactionalId(context.applicationId, partition),
            transactionTimeout: context.transactionTimeout,
            maxMessageBytes: context.maxMessageBytes,
            limitOf: context.limitOf
          }),
          (producer) => producer.fence
        )
      }
      : {
        _tag: "AtLeastOnce",
        producer: yield* Producer.atLeastOnce(context.kafka, {
          partition,
          maxMessageBytes: context.maxMessageBytes,
          limitOf: context.limitOf
        })
      }
    const permit: RestorePermit = delivery.producer
    const claimed = context.database === undefined
      ? Option.none<DatabaseTask.Claimed>()
      : Option.some(yield* DatabaseTask.claim(context, context.database, delivery, partition))
    const startOffsets = Option.isSome(claimed) ? claimed.value.startOffsets : yield* committedOffsets(context, permit, partition)
    const source = context.source
    const stateful = yield* Option.match(context.changelog, {
      onNone: () =>
        source === undefined
          ? Effect.succeed(
            Option.none<{ store: StateStore.StateStore<P>; restore: Restore; announce: LocalStores | undefined }>()
          )
          : Effect.gen(function*() {
            const store = yield* openStore(context, partition)
            const kept = store.path === path.join(context.storeDir, String(partition))
            const announce = kept ? context.localStores : undefined
            const committed = startOffsets.find((o) => o.topic === source.topic)
            if (committed === undefined) {
              return yield* Effect.dieMessage(`Skein invariant broken: the source changelog ${source.topic} is not an input of its task`)
            }
            const restored = yield* restoreFromSource(context, permit, store, source, partition, committed.offset, announce)
            context.onCheckpointLag(partition, 0)
            return Option.some({ store, restore: restored, announce })
          }),
      onSome: (changelog) =>
        Effect.gen(function*() {
          const store = yield* openStore(context, partition)
          // Only the kept store is announced: a temporary one is gone when the task ends.
          const kept = store.path === path.join(context.storeDir, String(partition))
          const announce = kept ? context.localStores : undefined
          const restored = yield* restore(context, permit, store, changelog, partition, "changelog", announce)
          context.onCheckpointLag(partition, 0)
          return Option.some({ store, restore: restored, announce })
        })
    })
    const runs = yield* Option.match(context.runs, {
      onNone: () => Effect.succeed(Option.none<RunStore.RunStore>()),
      onSome: (runs) =>
        Effect.gen(function*() {
          // A producer of its own, fenced before its partition is read: a zombie's late step write is rejected.
          const producer = yield* Effect.flatMap(
            Producer.make(context.kafka, {
              partition,
              transactionalId: RunStore.transactionalId(context.applicationId, partition),
              transactionTimeout: context.transactionTimeout,
              maxMessageBytes: context.maxMessageBytes
            }),
            (producer) => producer.fence
          )
          const store = yield* openStore(context, partition, `${partition}.runs`)
          yield* restore(context, producer, store, runs, partition, "run store")
          const runStore = RunStore.make({
            topic: runs.topic,
            partition,
            store,
            commit: RunStore.commitWith(producer),
            retention: runs.retention
          })
          // Fenced this early, another instance took the partition: retried like any failed task start.
          const expired = yield* Effect.catchTag(
            runStore.sweep,
            "TaskMigrated",
            (error) => Effect.fail(new KafkaError({ reason: "Fenced", operation: "run store sweep", cause: error }))
          )
          if (expired > 0) yield* Effect.logInfo(`task ${partition}: forgot ${expired} completed runs older than ${Duration.format(runs.retention)}`)
          return Option.some(runStore)
        })
    })
    const store = Option.map(stateful, ({ store }) => store)
    const inputs: ReadonlyArray<TopicPartition> = startOffsets.map(({ topic }) => ({ topic, partition }))
    // Seek and resume in one step with the pause that undoes it: no interruption can leave it fetching.
    yield* Effect.acquireRelease(
      Effect.zipRight(
        Effect.forEach(startOffsets, (o) => context.consumer.seek(o, o.offset), { discard: true }),
        context.consumer.resume(inputs)
      ),
      () => context.consumer.pause(inputs)
    )
    return {
      partition,
      startOffsets,
      delivery,
      store,
      cache: makeStateCache(stateCacheCapacity),
      timers: Timers.makeTable(),
      restore: Option.map(stateful, ({ restore }) => restore),
      runs,
      database: Option.map(claimed, ({ database }) => database),
      source: Option.fromNullable(source?.topic),
      stored: (position, checkpointLag) => {
        if (Option.isNone(stateful)) return
        stateful.value.announce?.set(partition, position)
        context.onCheckpointLag(partition, checkpointLag)
      }
    }
  })

/** How a task's share of a poll ended. */
export type Outcome<E> =
  | { readonly _tag: "Committed"; readonly partition: number }
  | { readonly _tag: "Migrated"; readonly partition: number; readonly error: TaskMigrated }
  | { readonly _tag: "DeliveryFailed"; readonly partition: number; readonly error: KafkaError | DatabaseError }
  | {
    readonly _tag: "Failed"
    readonly partition: number
    readonly cause: Cause.Cause<Batch.RecordError<E> | StateStoreError | DatabaseError>
  }

/** What a committed batch of a task amounted to, for the caller's bookkeeping. */
export interface Committed {
  readonly result: Batch.TaskBatchResult<unknown>
  readonly offsets: ReadonlyArray<PartitionOffset>
}

/**
 * The store after a commit that wrote changelog records: its checkpoint (the
 * base offset of the last batch the broker appended to the task's changelog
 * partition, at or below its first record after the commit), the records at
 * or after it (that batch's), and the changelog offset it now reflects: past
 * that batch and, exactly-once, the transaction's commit marker (only the
 * task's producer writes its changelog partition). `undefined` when the
 * commit wrote no changelog record.
 */
const checkpointAfter = (
  appended: ReadonlyArray<Producer.Appended>,
  changelog: Option.Option<string>,
  partition: number,
  exactlyOnce: boolean,
  writes: ReadonlyArray<StateStore.StoreWrite>
):
  | { readonly checkpoint: StateStore.Checkpoint; readonly lag: number; readonly position: number }
  | undefined =>
{
  if (Option.isNone(changelog)) return undefined
  const topic = changelog.value
  const written = appended.find((a) => a.topic === topic && a.partition === partition)
  if (written === undefined) return undefined
  const records = written.records ?? 0
  // That batch holds the commit's last `records` changelog records (sent in order): what a restart checks.
  const lastCommit = records > 0 && records <= writes.length
    ? { records, digest: ChangelogReplay.digest(writes.slice(writes.length - records)) }
    : undefined
  return {
    checkpoint: lastCommit === undefined
      ? { topic, partition, offset: written.baseOffset }
      : { topic, partition, offset: written.baseOffset, lastCommit },
    lag: records,
    position: written.records === undefined ? written.baseOffset : written.baseOffset + records + (exactlyOnce ? 1 : 0)
  }
}

/** The store after a commit, its changelog a source topic: the topic's committed offset (`SourceChangelog.checkpointAfter`). */
const sourceCheckpointAfter = (
  topic: string,
  partition: number,
  offsets: ReadonlyArray<PartitionOffset>
): { readonly checkpoint: StateStore.Checkpoint; readonly lag: number; readonly position: number } | undefined => {
  const checkpoint = SourceChangelog.checkpointAfter(topic, partition, offsets)
  return checkpoint === undefined ? undefined : { checkpoint, lag: 0, position: checkpoint.offset }
}

/** A record's failure that is the runtime's, not the record's: the partition rewinds and retries. */
const runtimeFailure = <E>(cause: Cause.Cause<Batch.RecordError<E>>): Option.Option<KafkaError> =>
  Option.filter(Cause.failureOption(cause), (error): error is KafkaError => error instanceof KafkaError)

/** A record's failure because a newer owner fenced the task's run-store producer: the task moved. */
const migratedFailure = (cause: Cause.Cause<unknown>): Option.Option<TaskMigrated> =>
  Option.flatMap(Cause.failureOption(cause), (error) => error instanceof TaskMigrated ? Option.some(error) : Option.none())

/**
 * Deletes the steps of the runs whose records a rule skipped or dead-lettered,
 * once that is committed (the run store's own transaction). A failure leaves
 * the steps behind and is logged: the records are committed past either way.
 */
const forgetRuns = (runs: RunStore.RunStore, executionIds: ReadonlyArray<string>): Effect.Effect<void> =>
  Effect.catchAll(Effect.asVoid(runs.forget(executionIds)), (error) =>
    Effect.logWarning(
      `task ${runs.partition}: the steps of ${executionIds.length} skipped or dead-lettered runs stay in the run store ` +
        `(deleting them failed): ${describe(error)}`
    ))

/**
 * Runs the task's slices of a poll and commits the work that finished (all of
 * it, or up to a failed or interrupted record). The commit is one
 * uninterruptible step: the transaction (or acknowledged sends), the store
 * write, the state cache, then `onCommitted` (the caller's cursors and counters).
 */
export const processSlices = <P extends number, Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  task: Task<P>,
  transformer: Transformer<Inputs, S, E, R>,
  slices: ReadonlyArray<Batch.Slice>,
  options: Batch.Options & {
    readonly groupId: string
    readonly changelog: Option.Option<string>
    readonly onRetries: (retries: number) => void
    /** Wraps the commit (for the runner's count of transactions in flight). */
    readonly inTransaction: <A, E2, R2>(commit: Effect.Effect<A, E2, R2>) => Effect.Effect<A, E2, R2>
    readonly onCommitted: (committed: Committed) => Effect.Effect<void>
  }
): Effect.Effect<Outcome<E>, never, R> => {
  if (Option.isSome(task.database)) return DatabaseTask.processSlices(task, task.database.value, transformer, slices, options)
  const processed: Effect.Effect<Outcome<E>, never, R> = Effect.gen(function*() {
    const partition = task.partition
    const result = yield* Batch.run(transformer, task.store, slices, {
      ...options,
      cache: task.cache,
      partition,
      timers: task.timers
    }).pipe(
      Effect.locally(RunStore.current, task.runs)
    )
    yield* Effect.annotateCurrentSpan({
      "skein.processed": result.processed,
      "skein.skipped": result.skipped,
      "skein.dead_lettered": result.deadLettered,
      "skein.retries": result.retries
    })
    options.onRetries(result.retries)
    // Records kept, or (a batch of due timers) timers fired or stream time moved: a commit.
    if (result.processed > 0 || result.taskWrites.length > 0) {
      const changelogRecords = Option.match(options.changelog, {
        onNone: () => [],
        onSome: (topic) => result.writes.map((w) => ({ topic, partition, key: w.key, value: w.value }))
      })
      const records = [...result.outputs, ...changelogRecords]
      const offsets = slices.map((slice, i) => ({ topic: slice.topic, partition: slice.partition, offset: result.cuts[i]!.offset }))
      const send = task.delivery._tag === "ExactlyOnce"
        ? task.delivery.producer.commit(records, { groupId: options.groupId, offsets })
        : task.delivery.producer.deliver(records)
      const committed = yield* Effect.either(Effect.uninterruptible(
        options.inTransaction(send).pipe(
          Effect.flatMap((receipt) =>
            Option.match(task.store, {
              onNone: () => Effect.void,
              onSome: (store) => {
                const after = Option.isSome(task.source)
                  ? sourceCheckpointAfter(task.source.value, partition, offsets)
                  : checkpointAfter(
                    receipt.appended,
                    options.changelog,
                    partition,
                    task.delivery._tag === "ExactlyOnce",
                    result.writes
                  )
                // A source-topic changelog's checkpoint (the committed input offset) is no batch the commit
                // appended, which a receipt proves: written after the commit's writes, in a batch of its own.
                // A kill in between leaves it behind them, and a restart re-applies the topic from there
                // (its records are the state's changes: the same writes again).
                const sourceCheckpoint = Option.isSome(task.source) ? after?.checkpoint : undefined
                return Faults.afterCommitBeforeStore(partition).pipe(
                  Effect.zipRight(store.write(receipt, result.writes, sourceCheckpoint === undefined ? after?.checkpoint : undefined)),
                  Effect.zipRight(sourceCheckpoint === undefined ? Effect.void : store.replay([], sourceCheckpoint)),
                  Effect.zipRight(Faults.afterStoreWrite(partition)),
                  Effect.tap(() => {
                    if (after !== undefined) task.stored(after.position, after.lag)
                  })
                )
              }
            })
          ),
          Effect.tap(() => {
            for (const [key, state] of result.states) task.cache.set(key, state)
            Timers.commit(task.timers, result.taskWrites)
          }),
          Effect.tap(() => options.onCommitted({ result, offsets })),
          Effect.withSpan("skein.commit", {
            kind: "producer",
            captureStackTrace: false,
            attributes: {
              "skein.application_id": options.groupId,
              "skein.transformer": transformer.name,
              "messaging.destination.partition.id": String(partition),
              "skein.processing_guarantee": task.delivery._tag === "ExactlyOnce" ? "exactly-once" : "at-least-once",
              "skein.commit.records": result.processed,
              "skein.commit.outputs": result.outputs.length,
              "skein.commit.changelog_records": changelogRecords.length
            }
          })
        )
      ))
      if (committed._tag === "Left") {
        const error = committed.left
        switch (error._tag) {
          case "TaskMigrated":
            return { _tag: "Migrated", partition, error }
          case "KafkaError":
            return { _tag: "DeliveryFailed", partition, error }
          case "StateStoreError":
            return { _tag: "Failed", partition, cause: Cause.fail(error) }
        }
      }
      if (result.disposedRuns.length > 0 && Option.isSome(task.runs)) yield* forgetRuns(task.runs.value, result.disposedRuns)
    }
    if (Option.isSome(result.failure)) {
      const migrated = migratedFailure(result.failure.value)
      if (Option.isSome(migrated)) return { _tag: "Migrated", partition, error: migrated.value }
      const runtime = runtimeFailure(result.failure.value)
      if (Option.isSome(runtime)) return { _tag: "DeliveryFailed", partition, error: runtime.value }
      return { _tag: "Failed", partition, cause: result.failure.value }
    }
    return { _tag: "Committed", partition }
  })
  return processed.pipe(
    Effect.tap((outcome) => Effect.annotateCurrentSpan("skein.outcome", outcome._tag)),
    Effect.withSpan("skein.batch", {
      kind: "consumer",
      captureStackTrace: false,
      attributes: {
        "skein.application_id": options.groupId,
        "skein.transformer": transformer.name,
        "messaging.system": "kafka",
        "messaging.operation.type": "process",
        "messaging.destination.partition.id": String(task.partition),
        "messaging.batch.message_count": slices.reduce((n, slice) => n + slice.records.length, 0)
      }
    })
  )
}
