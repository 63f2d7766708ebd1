/**
 * The runner's main loop: validates topics, joins the group, initializes
 * pending tasks one at a time, and processes batches with one transaction per
 * task per batch (exactly-once) or acknowledged sends and interval offset
 * commits (at-least-once) under the batch lock.
 *
 * Failures: a record that fails fatally stops its partition or the run
 * (`failureIsolation`), after the work finished before it is committed. A
 * failed delivery rewinds the partition (its task restarts from the last
 * committed offset) after a backoff; `maxDeliveryFailures` in a row end the
 * run. A revocation or a shutdown gives running handlers a grace period, then
 * interrupts them and commits what finished.
 *
 * @internal
 */
import { Cause, Chunk, Deferred, Duration, Effect, Fiber, Option, Queue, Scope } from "effect"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import type { SkeinConfig } from "../SkeinConfig.ts"
import {
  ChangelogPartitionMismatch,
  ConfigurationError,
  DeliveryFailed,
  OffsetOutOfRange,
  PartitionCountMismatch
} from "../SkeinError.ts"
import type { KafkaError, RunnerError, TaskMigrated } from "../SkeinError.ts"
import type * as Topic from "../Topic.ts"
import type { Transformer } from "../Transformer.ts"
import { changelogTopic } from "../Transformer.ts"
import * as Batch from "./batch.ts"
import * as GroupOwnership from "./GroupOwnership.ts"
import type { BatchLockHeld } from "./BatchLock.ts"
import * as BatchLock from "./BatchLock.ts"
import * as Admin from "./kafka/admin.ts"
import * as ChangelogReader from "./kafka/changelogReader.ts"
import * as HealthServer from "./healthServer.ts"
import { makeKafka } from "./kafka/client.ts"
import * as Consumer from "./kafka/consumer.ts"
import type { PartitionBatch } from "./kafka/consumer.ts"
import { makeStats, observeBatchLatency } from "./RunnerStats.ts"
import type { RunnerStats } from "./RunnerStats.ts"
import * as StateKeyCheck from "./StateKeyCheck.ts"
import * as Task from "./Task.ts"

/** A partition batch being consumed across poll batches. */
interface Cursor {
  readonly batch: PartitionBatch
  index: number
}

export { batchLatencyBounds, makeStats, observeBatchLatency } from "./RunnerStats.ts"
export type { RunnerPhase, RunnerStats } from "./RunnerStats.ts"

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

/** A poll's work for one task, and how it ended. */
type TaskOutcome<E> =
  | { readonly _tag: "Committed"; readonly partition: number }
  | { readonly _tag: "Migrated"; readonly partition: number }
  | { readonly _tag: "DeliveryFailed"; readonly partition: number; readonly error: KafkaError }
  | { readonly _tag: "Failed"; readonly partition: number; readonly cause: Cause.Cause<Batch.RecordError<E>> }

/** A partition waiting for its task to start, not before `notBefore` (epoch ms). */
interface PendingTask {
  readonly partition: number
  readonly notBefore: number
}

const maxBackoffMillis = 10_000

/** Checks settings that cannot work together; the message says how to fix them. */
const validateConfig = (config: SkeinConfig, stats: RunnerStats): Effect.Effect<void, ConfigurationError> => {
  const problems: Array<ConfigurationError> = []
  if (stats.phase !== "starting") {
    problems.push(
      new ConfigurationError({
        problem: "This Runner.Stats object already belongs to a run (a runtime runs once)",
        fix: "Pass a fresh Runner.makeStats() to each run"
      })
    )
  }
  if (Duration.greaterThanOrEqualTo(config.revocationGrace, config.rebalanceTimeout)) {
    problems.push(
      new ConfigurationError({
        problem: `revocationGrace (${Duration.format(config.revocationGrace)}) must be shorter than rebalanceTimeout ` +
          `(${Duration.format(config.rebalanceTimeout)}), or the group drops this instance during a rebalance`,
        fix: "Lower SKEIN_REVOCATION_GRACE or raise SKEIN_REBALANCE_TIMEOUT"
      })
    )
  }
  if (config.maxConcurrency !== "unbounded" && !(Number.isInteger(config.maxConcurrency) && config.maxConcurrency > 0)) {
    problems.push(
      new ConfigurationError({
        problem: `maxConcurrency must be a positive integer or "unbounded", got ${config.maxConcurrency}`,
        fix: "Set SKEIN_MAX_CONCURRENCY to a positive integer, or leave it unset"
      })
    )
  }
  if (!(config.maxDeliveryFailures >= 1)) {
    problems.push(
      new ConfigurationError({
        problem: `maxDeliveryFailures must be at least 1, got ${config.maxDeliveryFailures}`,
        fix: "Set SKEIN_MAX_DELIVERY_FAILURES to a positive integer (default 8)"
      })
    )
  }
  const [first] = problems
  return first === undefined ? Effect.void : Effect.fail(first)
}

export const run = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  config: SkeinConfig,
  stats: RunnerStats = makeStats()
): Effect.Effect<never, RunnerError | E, R | Scope.Scope> =>
  Effect.gen(function*() {
    yield* validateConfig(config, stats)
    stats.phase = "starting"
    if (config.healthPort !== undefined) {
      const server = yield* HealthServer.serve(stats, {
        port: config.healthPort,
        labels: { applicationId: config.applicationId, transformer: transformer.name }
      })
      stats.healthPort = server.port
    }
    const kafka = makeKafka(config)
    const admin = yield* Admin.make(kafka)
    const inputTopics = transformer.inputs.map((t) => t.name)
    const changelogName = Option.map(transformer.state, () => changelogTopic(config.applicationId, transformer))
    yield* validateTopics(admin, inputTopics, changelogName, config.changelogReplicationFactor)
    yield* GroupOwnership.check(admin, { groupId: config.applicationId, owner: transformer.name })
    if (config.deadLetterTopic !== undefined) yield* admin.partitionCounts([config.deadLetterTopic])
    if (config.deadLetterTopic === undefined && transformer.rules.some((rule) => rule.then === "dlq")) {
      return yield* Effect.fail(
        new ConfigurationError({
          problem: `Transformer ${transformer.name} has an error rule with then: "dlq" but no dead letter topic is configured`,
          fix: "Set deadLetterTopic in SkeinConfig (or SKEIN_DEAD_LETTER_TOPIC) to an existing topic"
        })
      )
    }
    const exactlyOnce = config.processingGuarantee === "exactly-once"

    const storeDir = path.join(config.stateDir, `${config.applicationId}-${randomUUID()}`)
    yield* Effect.addFinalizer(() => Effect.promise(() => fs.rm(storeDir, { recursive: true, force: true })))

    const consumer = yield* Consumer.make(kafka, {
      groupId: config.applicationId,
      topics: inputTopics,
      sessionTimeout: config.sessionTimeout,
      rebalanceTimeout: config.rebalanceTimeout,
      heartbeatInterval: config.heartbeatInterval,
      owner: transformer.name
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
      transactionTimeout: config.transactionTimeout,
      processingGuarantee: config.processingGuarantee,
      maxMessageBytes: config.maxMessageBytes,
      onRestoreProgress: (partition, restored, total) => {
        stats.restoring.set(partition, { restored, total })
      }
    }

    const permits = config.maxConcurrency === "unbounded"
      ? Option.none()
      : Option.some(yield* Effect.makeSemaphore(config.maxConcurrency))
    const limits = new Map<string, number>()
    const messageLimits: Batch.MessageLimits = {
      known: (topic) => limits.get(topic),
      lookup: (topic) =>
        Effect.map(admin.maxMessageBytes(topic), (topicLimit) => {
          const limit = Math.min(config.maxMessageBytes, topicLimit ?? config.maxMessageBytes)
          limits.set(topic, limit)
          return limit
        })
    }

    const stateKeys = StateKeyCheck.enabled(config.checkStateKeys, transformer) ? StateKeyCheck.make() : undefined
    const shutdown = yield* Deferred.make<void>()
    const lock = yield* BatchLock.make
    const tasks = new Map<number, Task.Task>()
    let pending: Array<PendingTask> = []
    let generation = -1
    let buffer: Array<Cursor> = []
    /** Failed deliveries in a row, per partition. */
    const failures = new Map<number, number>()
    /** At-least-once: acknowledged work whose offsets are not committed yet. */
    const uncommitted = new Map<string, { topic: string; partition: number; offset: number }>()
    let lastOffsetCommit = Date.now()

    const dropPartition = (partition: number, outcome: Consumer.BatchOutcome) => {
      buffer = buffer.filter((cursor) => {
        if (cursor.batch.partition !== partition) return true
        cursor.batch.complete(outcome)
        return false
      })
    }

    const dropBuffer = (outcome: Consumer.BatchOutcome) => {
      for (const cursor of buffer) cursor.batch.complete(outcome)
      buffer = []
    }

    /** At-least-once: commits the offsets of acknowledged work. */
    const commitAcknowledged = Effect.suspend(() => {
      const offsets = [...uncommitted.values()]
      uncommitted.clear()
      lastOffsetCommit = Date.now()
      return Effect.as(consumer.commitOffsets(offsets), offsets)
    })

    const stopTask = (partition: number, held: BatchLockHeld) =>
      Effect.gen(function*() {
        const task = tasks.get(partition)
        if (task === undefined) return
        tasks.delete(partition)
        stats.assigned.delete(partition)
        for (const key of uncommitted.keys()) {
          if (uncommitted.get(key)?.partition === partition) uncommitted.delete(key)
        }
        yield* Task.stop(task, held)
        stats.tasksStopped++
        dropPartition(partition, "Dropped")
      })

    const teardownAll = (held: BatchLockHeld) =>
      Effect.gen(function*() {
        if (stats.inFlightTransactions > 0) stats.teardownsWithTransactionInFlight++
        if (!exactlyOnce && uncommitted.size > 0) {
          // Acknowledged work is committed before its partitions are given up; if that
          // fails, the records are delivered again (at-least-once).
          yield* commitAcknowledged.pipe(
            Effect.catchAll((error) => Effect.logWarning(`offset commit before teardown failed: ${error.message}`))
          )
        }
        for (const task of tasks.values()) {
          yield* Task.stop(task, held)
          stats.tasksStopped++
        }
        tasks.clear()
        stats.assigned.clear()
        stats.pending.clear()
        stats.restoring.clear()
      })
    yield* Effect.addFinalizer(() => consumer.dropInFlight.pipe(Effect.zipRight(lock.withLock(teardownAll))))

    /** Processes and delivers one task's slices; the work finished before a failure or an interruption commits. */
    const processTask = (
      task: Task.Task,
      slices: ReadonlyArray<{ cursor: Cursor; end: number }>,
      stop: Effect.Effect<void>
    ): Effect.Effect<TaskOutcome<E>, never, R> =>
      Effect.gen(function*() {
        const partition = task.partition
        const result = yield* Batch.run(
          transformer,
          task.store,
          slices.map(({ cursor, end }) => ({
            topic: cursor.batch.topic,
            partition: cursor.batch.partition,
            records: cursor.batch.records.slice(cursor.index, end),
            endOffset: end >= cursor.batch.records.length
              ? cursor.batch.nextOffset
              : (cursor.batch.records[end]?.offset ?? cursor.batch.nextOffset)
          })),
          { deadLetterTopic: Option.fromNullable(config.deadLetterTopic), stop, permits, messageLimits, cache: task.cache, stateKeys }
        )
        stats.retries += result.retries
        if (result.processed > 0) {
          const changelogRecords = Option.match(changelogName, {
            onNone: () => [],
            onSome: (topic) => result.writes.map((w) => ({ topic, partition, key: w.key, value: w.value }))
          })
          const records = [...result.outputs, ...changelogRecords]
          const offsets = slices.map(({ cursor }, i) => ({
            topic: cursor.batch.topic,
            partition: cursor.batch.partition,
            offset: result.cuts[i]!.offset
          }))
          stats.inFlightTransactions++
          const delivered = yield* Effect.either(
            task.delivery._tag === "ExactlyOnce"
              ? task.delivery.producer.commit(records, { groupId: config.applicationId, offsets }, partition)
              : task.delivery.producer.deliver(records)
          ).pipe(Effect.ensuring(Effect.sync(() => stats.inFlightTransactions--)))
          if (delivered._tag === "Left") {
            const error = delivered.left
            if (error._tag === "TaskMigrated") {
              yield* Effect.logWarning((error satisfies TaskMigrated).message)
              return { _tag: "Migrated", partition }
            }
            return { _tag: "DeliveryFailed", partition, error }
          }
          failures.delete(partition)
          stats.commits++
          stats.lastCommitAt = Date.now()
          stats.recordsProcessed += result.processed
          stats.skipped += result.skipped
          stats.deadLettered += result.deadLettered
          if (!exactlyOnce) for (const o of offsets) uncommitted.set(`${o.topic}/${o.partition}`, o)
          for (const [i, { cursor }] of slices.entries()) {
            cursor.index += result.cuts[i]!.kept
            const key = `${cursor.batch.topic}/${cursor.batch.partition}`
            stats.lag.set(key, {
              topic: cursor.batch.topic,
              partition: cursor.batch.partition,
              lag: Math.max(0, cursor.batch.highWatermark - result.cuts[i]!.offset)
            })
          }
          if (Option.isSome(task.store)) {
            const written = yield* Effect.either(task.store.value.write(result.writes))
            if (written._tag === "Left") return { _tag: "Failed", partition, cause: Cause.fail(written.left) }
            for (const [key, state] of result.states) task.cache.set(key, state)
          }
        }
        if (Option.isSome(result.failure)) return { _tag: "Failed", partition, cause: result.failure.value }
        return { _tag: "Committed", partition }
      })

    /** The backoff after `attempts` failures in a row: doubling from `deliveryBackoff`, capped. */
    const backoffMillis = (attempts: number) =>
      Math.min(maxBackoffMillis, Duration.toMillis(config.deliveryBackoff) * 2 ** (attempts - 1))

    /**
     * Counts a failure of a partition's task in a row and schedules the task's
     * restart after the backoff; `Some(attempts)` once `maxDeliveryFailures` is reached.
     */
    const retryLater = (partition: number, what: string, error: KafkaError) =>
      Effect.gen(function*() {
        const attempts = (failures.get(partition) ?? 0) + 1
        failures.set(partition, attempts)
        if (attempts >= config.maxDeliveryFailures) return Option.some(attempts)
        const backoff = backoffMillis(attempts)
        yield* Effect.logWarning(`${what} (${attempts} in a row), retrying in ${backoff} ms: ${error.message}`)
        pending.push({ partition, notBefore: Date.now() + backoff })
        stats.pending.add(partition)
        return Option.none()
      })

    /** A failed delivery rewinds the partition: its task restarts from the last commit after a backoff. */
    const rewind = (partition: number, error: KafkaError, held: BatchLockHeld) =>
      Effect.gen(function*() {
        stats.aborts++
        yield* stopTask(partition, held)
        const exhausted = yield* retryLater(partition, `delivery of task ${partition} failed, rewinding to the last commit`, error)
        if (Option.isSome(exhausted)) {
          return yield* Effect.fail(new DeliveryFailed({ partition, attempts: exhausted.value, cause: error }))
        }
      })

    /** At-least-once: when acknowledged work's offsets are due for a commit (epoch ms); none without any. */
    const commitDueAt = (): number | undefined =>
      !exactlyOnce && uncommitted.size > 0 ? lastOffsetCommit + Duration.toMillis(config.commitInterval) : undefined

    /** At-least-once: commits acknowledged offsets once the commit interval has passed; a failure rewinds every task. */
    const commitIfDue = (held: BatchLockHeld) =>
      Effect.gen(function*() {
        const due = commitDueAt()
        if (due === undefined || Date.now() < due) return
        const committed = yield* Effect.either(commitAcknowledged)
        if (committed._tag === "Left") {
          for (const partition of [...tasks.keys()]) yield* rewind(partition, committed.left, held)
        }
      })

    /** A partition's failure: stops only it (`failureIsolation: "partition"`) or ends the run. */
    const failPartition = (partition: number, cause: Cause.Cause<RunnerError | E>, held: BatchLockHeld) =>
      Effect.gen(function*() {
        if (config.failureIsolation === "run") return yield* Effect.failCause(cause)
        const reason = Cause.squash(cause)
        const message = reason instanceof Error ? reason.message : String(reason)
        yield* Effect.logError(`partition ${partition} stopped: ${message}`)
        stats.stopped.set(partition, message)
        stats.pending.delete(partition)
        yield* stopTask(partition, held)
      })

    const processPoll = (held: BatchLockHeld) =>
      Effect.gen(function*() {
        const started = Date.now()
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
        // Running handlers get a grace period once a revocation or a shutdown begins.
        const rebalance = yield* consumer.nextRebalance
        const stop = Effect.raceFirst(
          Effect.zipRight(Deferred.await(rebalance), Effect.sleep(config.revocationGrace)),
          Effect.zipRight(Deferred.await(shutdown), Effect.sleep(config.shutdownGrace))
        )
        const outcomes = yield* Effect.forEach(
          [...byTask].filter(([partition]) => tasks.has(partition)),
          ([partition, taskSlices]) => processTask(tasks.get(partition)!, taskSlices, stop),
          { concurrency: "unbounded" }
        )
        if (outcomes.some((outcome) => outcome._tag === "Migrated")) {
          // A task migrated: no task survives; rejoin to learn the current assignment.
          stats.migrations++
          yield* teardownAll(held)
          pending = []
          dropBuffer("Rejoin")
          return
        }
        for (const outcome of outcomes) {
          if (outcome._tag === "DeliveryFailed") yield* rewind(outcome.partition, outcome.error, held)
          else if (outcome._tag === "Failed") yield* failPartition(outcome.partition, outcome.cause, held)
        }
        const remaining: Array<Cursor> = []
        for (const cursor of buffer) {
          if (cursor.index >= cursor.batch.records.length) cursor.batch.complete("Committed")
          else remaining.push(cursor)
        }
        buffer = remaining
        observeBatchLatency(stats, Date.now() - started)
        yield* commitIfDue(held)
      })

    const startTask = (partition: number) =>
      Effect.gen(function*() {
        const started = yield* Effect.either(Task.start(context, partition))
        stats.restoring.delete(partition)
        stats.pending.delete(partition)
        if (started._tag === "Left") {
          const error = started.left
          if (error instanceof OffsetOutOfRange && config.failureIsolation === "partition") {
            // An unreadable partition stops like a failed record: never a silent reset.
            yield* Effect.logError(`partition ${partition} stopped: ${error.message}`)
            stats.stopped.set(partition, error.message)
            return
          }
          if (error._tag === "KafkaError") {
            // A broker unreachable or busy while the task connects, fences or restores: retried
            // after a backoff like a failed delivery, up to maxDeliveryFailures in a row.
            const exhausted = yield* retryLater(partition, `task ${partition} failed to start`, error)
            if (Option.isSome(exhausted)) return yield* Effect.fail(error)
            return
          }
          return yield* Effect.fail(error)
        }
        const task = started.right
        tasks.set(partition, task)
        stats.tasksStarted++
        stats.restoredRecords += task.restored
        stats.assigned.add(partition)
      })

    const handle = (event: Consumer.ConsumerEvent): Effect.Effect<void, KafkaError> => {
      switch (event._tag) {
        case "Crashed":
          return Effect.fail(event.error)
        case "Rebalancing":
          return lock.withLock((held) =>
            Effect.gen(function*() {
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
              // Every assignment after the first is a rebalance, an eviction's rejoin included.
              if (generation !== -1) stats.rebalances++
              generation = event.generation
              const partitions = [...new Set(event.partitions.map((tp) => tp.partition))].sort((a, b) => a - b)
              // A stopped partition stays stopped until a restart, or until it moves away.
              for (const partition of [...stats.stopped.keys()]) {
                if (!partitions.includes(partition)) stats.stopped.delete(partition)
              }
              pending = partitions.filter((p) => !stats.stopped.has(p)).map((partition) => ({ partition, notBefore: 0 }))
              for (const p of pending) stats.pending.add(p.partition)
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
              const first = batch.records[0]?.offset ?? batch.nextOffset
              stats.lag.set(`${batch.topic}/${batch.partition}`, {
                topic: batch.topic,
                partition: batch.partition,
                lag: Math.max(0, batch.highWatermark - first)
              })
            }
          })
      }
    }

    /** Waits for the next event, a pending task's backoff to pass, an offset commit to fall due, or the shutdown. */
    const nextEvents = Effect.gen(function*() {
      const ready = pending.some((p) => p.notBefore <= Date.now())
      if (buffer.length > 0 || ready) return Chunk.toReadonlyArray(yield* Queue.takeAll(consumer.events))
      const commitDue = commitDueAt()
      const wakeAt = commitDue === undefined ? pending.map((p) => p.notBefore) : [...pending.map((p) => p.notBefore), commitDue]
      const wake = wakeAt.length === 0 ? Effect.never : Effect.sleep(Math.max(0, Math.min(...wakeAt) - Date.now()))
      const first = yield* Effect.raceAll([
        Effect.map(Queue.take(consumer.events), Option.some),
        Effect.as(Deferred.await(shutdown), Option.none()),
        Effect.as(wake, Option.none())
      ])
      const rest = Chunk.toReadonlyArray(yield* Queue.takeAll(consumer.events))
      return Option.isSome(first) ? [first.value, ...rest] : rest
    })

    const step = Effect.gen(function*() {
      for (const event of yield* nextEvents) yield* handle(event)
      if (yield* Deferred.isDone(shutdown)) return
      const index = pending.findIndex((p) => p.notBefore <= Date.now())
      if (index >= 0) {
        const [next] = pending.splice(index, 1)
        // A shutdown interrupts a task still starting (restoring); it releases what it acquired.
        yield* Effect.raceFirst(startTask(next!.partition), Effect.zipRight(Deferred.await(shutdown), Effect.interrupt))
          .pipe(Effect.catchAllCause((cause) => Cause.isInterruptedOnly(cause) ? Effect.void : Effect.failCause(cause)))
      }
      if (buffer.length > 0 && !(yield* Deferred.isDone(shutdown))) yield* lock.withLock(processPoll)
      // At-least-once: an idle runner still commits its acknowledged work once the interval has passed.
      else if ((commitDueAt() ?? Infinity) <= Date.now()) yield* lock.withLock(commitIfDue)
    })

    const loop = Effect.gen(function*() {
      stats.phase = "running"
      while (!(yield* Deferred.isDone(shutdown))) yield* step
    })

    // On interruption (SIGTERM, SIGINT): fetching stops, handlers get shutdownGrace, finished
    // work commits; then the scope tears the tasks down and the consumer leaves the group.
    const fiber = yield* Effect.forkScoped(loop)
    return yield* Fiber.join(fiber).pipe(
      Effect.zipRight(Effect.interrupt),
      Effect.tapErrorCause((cause) => Effect.sync(() => {
        if (!Cause.isInterruptedOnly(cause)) stats.phase = "failed"
      })),
      Effect.onInterrupt(() =>
        Effect.gen(function*() {
          stats.phase = "stopping"
          yield* Deferred.succeed(shutdown, undefined)
          yield* Fiber.await(fiber).pipe(
            Effect.timeout(Duration.sum(config.shutdownGrace, Duration.seconds(60))),
            Effect.ignore
          )
        })
      ),
      Effect.ensuring(Effect.sync(() => {
        if (stats.phase !== "failed") stats.phase = "stopped"
      }))
    )
  }).pipe(Effect.annotateLogs({ applicationId: config.applicationId, transformer: transformer.name }))
