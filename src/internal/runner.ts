/**
 * The runner's main loop: validates topics, joins the group, initializes
 * pending tasks one at a time, and processes batches with one transaction per
 * task per batch under the batch lock.
 *
 * @internal
 */
import { Chunk, Effect, Option, Queue, Scope } from "effect"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import type { SkeinConfig } from "../SkeinConfig.ts"
import { ChangelogPartitionMismatch, ConfigurationError, PartitionCountMismatch } from "../SkeinError.ts"
import type { KafkaError, RunnerError, TaskMigrated } from "../SkeinError.ts"
import type * as Topic from "../Topic.ts"
import type { Transformer } from "../Transformer.ts"
import { changelogTopic } from "../Transformer.ts"
import * as Batch from "./batch.ts"
import type { BatchLockHeld } from "./BatchLock.ts"
import * as BatchLock from "./BatchLock.ts"
import * as Admin from "./kafka/admin.ts"
import * as ChangelogReader from "./kafka/changelogReader.ts"
import { makeKafka } from "./kafka/client.ts"
import * as Consumer from "./kafka/consumer.ts"
import type { PartitionBatch } from "./kafka/consumer.ts"
import * as Task from "./Task.ts"

/** A partition batch being consumed across poll batches. */
interface Cursor {
  readonly batch: PartitionBatch
  index: number
}

/** Upper bounds (ms) of the batch latency histogram's buckets. */
export const batchLatencyBounds: ReadonlyArray<number> = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]

/** The lifecycle of a runner, for health checks. */
export type RunnerPhase = "starting" | "running" | "stopping" | "stopped" | "failed"

/** Observable state and counters of a running runner (for tests, health and metrics). */
export interface RunnerStats {
  phase: RunnerPhase
  batches: number
  commits: number
  /** Transactions aborted or deliveries failed (each rewinds its partition). */
  aborts: number
  /** Input records committed past (processed, dead-lettered or skipped). */
  recordsProcessed: number
  migrations: number
  rebalances: number
  tasksStarted: number
  tasksStopped: number
  restoredRecords: number
  maxBatchRecords: number
  skipped: number
  deadLettered: number
  retries: number
  inFlightTransactions: number
  teardownsWithTransactionInFlight: number
  /** Epoch milliseconds of the last successful commit. */
  lastCommitAt: number | undefined
  /** Partitions whose tasks are running. */
  readonly assigned: Set<number>
  /** Partitions assigned but waiting for their task to start. */
  readonly pending: Set<number>
  /** Partitions stopped by a failure (failure isolation "partition"), with the error. */
  readonly stopped: Map<number, string>
  /** Records behind the high watermark, per input `topic/partition`, as of the last fetch. */
  readonly lag: Map<string, { readonly topic: string; readonly partition: number; readonly lag: number }>
  /** Restore progress of tasks being restored: changelog records read and total. */
  readonly restoring: Map<number, { restored: number; readonly total: number }>
  /** Batch latency (fetch to commit) histogram: counts per `batchLatencyBounds` bucket, plus +Inf last. */
  readonly batchLatency: { count: number; sumMs: number; readonly buckets: Array<number> }
}

export const makeStats = (): RunnerStats => ({
  phase: "starting",
  batches: 0,
  commits: 0,
  aborts: 0,
  recordsProcessed: 0,
  migrations: 0,
  rebalances: 0,
  tasksStarted: 0,
  tasksStopped: 0,
  restoredRecords: 0,
  maxBatchRecords: 0,
  skipped: 0,
  deadLettered: 0,
  retries: 0,
  inFlightTransactions: 0,
  teardownsWithTransactionInFlight: 0,
  lastCommitAt: undefined,
  assigned: new Set(),
  pending: new Set(),
  stopped: new Map(),
  lag: new Map(),
  restoring: new Map(),
  batchLatency: { count: 0, sumMs: 0, buckets: batchLatencyBounds.map(() => 0).concat([0]) }
})

/** Adds one batch's latency to the histogram. */
export const observeBatchLatency = (stats: RunnerStats, ms: number): void => {
  stats.batchLatency.count++
  stats.batchLatency.sumMs += ms
  const index = batchLatencyBounds.findIndex((bound) => ms <= bound)
  stats.batchLatency.buckets[index === -1 ? batchLatencyBounds.length : index]!++
}

/** Checks partition counts and creates (or checks) the changelog topic. */
const validateTopics = (
  admin: Admin.KafkaAdmin,
  inputTopics: ReadonlyArray<string>,
  changelog: Option.Option<string>,
  replicationFactor: number
): Effect.Effect<number, RunnerError> =>
  Effect.gen(function*() {
    const counts = yield* admin.partitionCounts(inputTopics)
    const distinct = new Set(counts.values())
    const [partitions] = [...distinct]
    if (distinct.size !== 1 || partitions === undefined) {
      return yield* Effect.fail(
        new PartitionCountMismatch({ counts: [...counts].map(([topic, n]) => ({ topic, partitions: n })) })
      )
    }
    if (Option.isSome(changelog)) {
      const existing = yield* admin.partitionCount(changelog.value)
      if (existing === undefined) {
        yield* admin.createCompactedTopic(changelog.value, partitions, replicationFactor)
      } else if (existing !== partitions) {
        return yield* Effect.fail(
          new ChangelogPartitionMismatch({ changelog: changelog.value, expected: partitions, actual: existing })
        )
      }
    }
    return partitions
  })

/** Splits the buffered batches into one poll batch of at most `max` records, fairly across partitions. */
const takePoll = (buffer: ReadonlyArray<Cursor>, max: number) => {
  const slices: Array<{ cursor: Cursor; end: number }> = buffer.map((cursor) => ({ cursor, end: cursor.index }))
  let remaining = max
  let progressed = true
  while (remaining > 0 && progressed) {
    progressed = false
    const share = Math.max(1, Math.floor(remaining / Math.max(1, slices.length)))
    for (const slice of slices) {
      const available = slice.cursor.batch.records.length - slice.end
      const take = Math.min(available, share, remaining)
      if (take > 0) {
        slice.end += take
        remaining -= take
        progressed = true
      }
    }
  }
  return slices
}

export const run = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  config: SkeinConfig,
  stats: RunnerStats = makeStats()
): Effect.Effect<never, RunnerError | E, R | Scope.Scope> =>
  Effect.gen(function*() {
    const kafka = makeKafka(config)
    const admin = yield* Admin.make(kafka)
    const inputTopics = transformer.inputs.map((t) => t.name)
    const changelogName = Option.map(transformer.state, () => changelogTopic(config.applicationId, transformer))
    yield* validateTopics(admin, inputTopics, changelogName, config.changelogReplicationFactor)
    if (config.deadLetterTopic !== undefined) yield* admin.partitionCounts([config.deadLetterTopic])
    if (config.deadLetterTopic === undefined && transformer.rules.some((rule) => rule.then === "dlq")) {
      return yield* Effect.fail(
        new ConfigurationError({
          problem: `Transformer ${transformer.name} has an error rule with then: "dlq" but no dead letter topic is configured`,
          fix: "Set deadLetterTopic in SkeinConfig (or SKEIN_DEAD_LETTER_TOPIC) to an existing topic"
        })
      )
    }

    const storeDir = path.join(config.stateDir, `${config.applicationId}-${randomUUID()}`)
    yield* Effect.addFinalizer(() => Effect.promise(() => fs.rm(storeDir, { recursive: true, force: true })))

    const consumer = yield* Consumer.make(kafka, {
      groupId: config.applicationId,
      topics: inputTopics,
      sessionTimeout: config.sessionTimeout,
      rebalanceTimeout: config.rebalanceTimeout,
      heartbeatInterval: config.heartbeatInterval
    })
    const runnerScope = yield* Effect.scope
    const changelog = yield* Option.match(changelogName, {
      onNone: () => Effect.succeed(Option.none()),
      onSome: (topic) =>
        Effect.map(
          Effect.cached(
            ChangelogReader.make(kafka, { topic, groupId: `${config.applicationId}-restore-${randomUUID()}` }).pipe(
              Effect.provideService(Scope.Scope, runnerScope)
            )
          ),
          (reader) => Option.some({ topic, reader })
        )
    })
    const context: Task.TaskContext = {
      kafka,
      admin,
      consumer,
      applicationId: config.applicationId,
      inputTopics,
      changelog,
      storeDir,
      transactionTimeout: config.transactionTimeout
    }

    const lock = yield* BatchLock.make
    const tasks = new Map<number, Task.Task>()
    let pending: Array<number> = []
    let generation = -1
    let buffer: Array<Cursor> = []

    const teardownAll = (held: BatchLockHeld) =>
      Effect.gen(function*() {
        if (stats.inFlightTransactions > 0) stats.teardownsWithTransactionInFlight++
        for (const task of tasks.values()) {
          yield* Task.stop(task, held)
          stats.tasksStopped++
        }
        tasks.clear()
        stats.assigned.clear()
      })
    yield* Effect.addFinalizer(() =>
      consumer.dropInFlight.pipe(Effect.zipRight(lock.withLock(teardownAll)))
    )

    const dropBuffer = (outcome: Consumer.BatchOutcome) => {
      for (const cursor of buffer) cursor.batch.complete(outcome)
      buffer = []
    }

    const commitTask = (task: Task.Task, slices: ReadonlyArray<{ cursor: Cursor; end: number }>) =>
      Effect.gen(function*() {
        const records = slices.flatMap((s) => s.cursor.batch.records.slice(s.cursor.index, s.end))
        const result = yield* Batch.run(transformer, task.store, records, Option.fromNullable(config.deadLetterTopic))
        const changelogRecords = Option.match(changelogName, {
          onNone: () => [],
          onSome: (topic) => result.writes.map((w) => ({ topic, partition: task.partition, key: w.key, value: w.value }))
        })
        const offsets = slices.map((s) => ({
          topic: s.cursor.batch.topic,
          partition: s.cursor.batch.partition,
          offset: s.end >= s.cursor.batch.records.length
            ? s.cursor.batch.nextOffset
            : (s.cursor.batch.records[s.end]?.offset ?? s.cursor.batch.nextOffset)
        }))
        stats.inFlightTransactions++
        const committed = yield* task.producer.commit(
          [...result.outputs, ...changelogRecords],
          { groupId: config.applicationId, offsets },
          task.partition
        ).pipe(
          Effect.ensuring(Effect.sync(() => stats.inFlightTransactions--)),
          Effect.as(true),
          Effect.catchTag("TaskMigrated", (migrated: TaskMigrated) =>
            Effect.logWarning(migrated.message).pipe(Effect.as(false))
          )
        )
        stats.retries += result.retries
        if (committed) {
          stats.commits++
          stats.skipped += result.skipped
          stats.deadLettered += result.deadLettered
          yield* Option.match(task.store, { onNone: () => Effect.void, onSome: (store) => store.write(result.writes) })
        }
        return committed
      })

    const processPoll = (held: BatchLockHeld) =>
      Effect.gen(function*() {
        const slices = takePoll(buffer, config.maxPollRecords).filter((s) => s.end > s.cursor.index)
        const total = slices.reduce((n, s) => n + s.end - s.cursor.index, 0)
        stats.maxBatchRecords = Math.max(stats.maxBatchRecords, total)
        stats.batches++
        const byTask = new Map<number, Array<{ cursor: Cursor; end: number }>>()
        for (const slice of slices) {
          const list = byTask.get(slice.cursor.batch.partition) ?? []
          list.push(slice)
          byTask.set(slice.cursor.batch.partition, list)
        }
        const outcomes = yield* Effect.forEach(
          [...byTask],
          ([partition, taskSlices]) => {
            const task = tasks.get(partition)
            return task === undefined ? Effect.succeed(false) : commitTask(task, taskSlices)
          },
          { concurrency: "unbounded" }
        )
        if (outcomes.some((ok) => !ok)) {
          // A task migrated: no task survives; rejoin to learn the current assignment.
          stats.migrations++
          yield* teardownAll(held)
          pending = []
          dropBuffer("Rejoin")
          return
        }
        for (const slice of slices) slice.cursor.index = slice.end
        const remaining: Array<Cursor> = []
        for (const cursor of buffer) {
          if (cursor.index >= cursor.batch.records.length) cursor.batch.complete("Committed")
          else remaining.push(cursor)
        }
        buffer = remaining
      })

    const handle = (event: Consumer.ConsumerEvent): Effect.Effect<void, KafkaError> => {
      switch (event._tag) {
        case "Crashed":
          return Effect.fail(event.error)
        case "Rebalancing":
          return lock.withLock((held) =>
            Effect.gen(function*() {
              stats.rebalances++
              yield* teardownAll(held)
              pending = []
              dropBuffer("Dropped")
            })
          )
        case "Assigned":
          return lock.withLock((held) =>
            Effect.gen(function*() {
              yield* teardownAll(held)
              dropBuffer("Dropped")
              generation = event.generation
              pending = [...new Set(event.partitions.map((tp) => tp.partition))].sort((a, b) => a - b)
            })
          )
        case "Batch":
          return Effect.sync(() => {
            const batch = event.batch
            if (batch.generation !== generation || !tasks.has(batch.partition)) {
              // Fetched for a task that is not running: dropped uncommitted; its owner reprocesses it.
              batch.complete("Dropped")
            } else {
              buffer.push({ batch, index: 0 })
            }
          })
      }
    }

    return yield* Effect.forever(
      Effect.gen(function*() {
        const idle = buffer.length === 0 && pending.length === 0
        const first = idle ? [yield* Queue.take(consumer.events)] : []
        const rest = Chunk.toReadonlyArray(yield* Queue.takeAll(consumer.events))
        for (const event of [...first, ...rest]) yield* handle(event)
        const next = pending.shift()
        if (next !== undefined) {
          const task = yield* Task.start(context, next)
          tasks.set(next, task)
          stats.tasksStarted++
          stats.restoredRecords += task.restored
          stats.assigned.add(next)
        }
        if (buffer.length > 0) yield* lock.withLock(processPoll)
      })
    )
  }).pipe(Effect.annotateLogs({ applicationId: config.applicationId, transformer: transformer.name }))
