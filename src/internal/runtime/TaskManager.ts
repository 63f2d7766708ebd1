/**
 * The task manager: owns a runner's tasks, each in a scope of its own, and
 * everything that starts or stops one.
 *
 * - Assignment: every task is torn down, then the assigned partitions wait
 *   to start; `startDue` starts each in a fiber of its own (at most
 *   `concurrentStarts` at once), so their fences and restores overlap, and
 *   running tasks keep processing and committing meanwhile: a partition is
 *   fetched (resumed) only once its task has restored. Tearing a task down
 *   interrupts its start (a partition that moved away stops restoring).
 * - Starts and rewinds: a task that fails to start on a broker error, or
 *   whose delivery failed, starts again after a backoff (`deliveryBackoff`,
 *   doubling, capped), up to `maxDeliveryFailures` in a row.
 * - Failures: a failed record stops its partition or ends the run
 *   (`failureIsolation`); a migrated task tears every task down (rejoin).
 * - Teardown happens only under the batch locks, which only the manager
 *   holds: one per task, so tasks process their batches side by side
 *   (`processTask` holds its task's), and a task's teardown waits for its
 *   batch in flight; tearing every task down takes them all. Task scopes
 *   are not children of the manager's scope: closing it closes them only
 *   through that teardown, never around a batch in flight.
 * - Standbys never take the lock: an assignment updates them after its
 *   teardown, and a task waits (in its own start) for a standby of its
 *   partition to close the store.
 * - Kept stores: every `stateCleanupDelay` (a `CleanupDue` wakeup), the
 *   stores of partitions this instance is no longer assigned are deleted
 *   once unused that long (`cleanStores`), never one of a partition it is
 *   assigned or has a task of.
 *
 * @internal
 */
import { Cause, Clock, Duration, Effect, Exit, FiberHandle, FiberMap, Option, Queue, Schedule, Scope } from "effect"
import type { SkeinConfig } from "../../SkeinConfig.ts"
import type { DatabaseError, KafkaError, RunnerError } from "../../SkeinError.ts"
import { DeliveryFailed, OffsetOutOfRange } from "../../SkeinError.ts"
import type { PartitionOffset } from "../../TopicPartition.ts"
import * as BatchLock from "./BatchLock.ts"
import type { BatchLockHeld } from "./BatchLock.ts"
import type { BatchOutcome } from "../kafka/consumer.ts"
import { classify, classifyDatabase } from "../kafka/errors.ts"
import type { Recoverable } from "../kafka/errors.ts"
import type { PollBuffer } from "./PollBuffer.ts"
import type { RunnerStats } from "./RunnerStats.ts"
import type { Standbys } from "./Standbys.ts"
import * as StoreCleanup from "../stores/StoreCleanup.ts"
import { describe } from "../util/errorText.ts"
import * as DatabaseTask from "../database/DatabaseTask.ts"
import * as Task from "./Task.ts"
import * as Timers from "./timers.ts"

/** The task manager's batch lock, by name: its permits are `BatchLockHeld<TasksLock>`. */
type TasksLock = "tasks"

/**
 * Why the runner's loop should look again: a task start fell due, a task
 * started or its wall-clock timers are due (a transformer with timers: a
 * task reads them at its first batch, records or not), acknowledged offsets
 * are due a commit, or the kept stores are due a sweep.
 */
export type Wakeup = "TaskDue" | "TaskStarted" | "TimersDue" | "CommitDue" | "CleanupDue"

export interface TaskManager {
  readonly wakeups: Queue.Dequeue<Wakeup>
  /** The running task of `partition`, if any. */
  readonly task: (partition: number) => Option.Option<Task.Task>
  /** How many tasks are running. */
  readonly runningCount: () => number
  /** The running tasks (for the runner's timers: which task has timers due). */
  readonly runningTasks: () => Iterable<Task.Task>
  /**
   * A transformer with timers: a `TimersDue` wakeup at the earliest time a
   * running task that is not `busy` needs a batch for its timers
   * (`Timers.wakeAt`), replacing the one armed before.
   */
  readonly armTimers: (busy: (partition: number) => boolean) => Effect.Effect<void>
  /** The partitions of the current assignment (a running task, one starting or restoring, a stopped one). */
  readonly assigned: () => ReadonlySet<number>
  /** The group generation of the current assignment. */
  readonly generation: () => number
  /** True when a partition's task is due to start, or a start failed for the run. */
  readonly hasDueStart: () => boolean
  /**
   * A new assignment: every task is torn down, then the partitions wait to
   * start (stopped ones stay stopped); the standbys are updated outside the
   * batch lock (a partition that becomes active here stops being one; its
   * task's start waits for the standby's store to close).
   */
  readonly assign: (
    generation: number,
    partitions: ReadonlyArray<number>,
    standbys?: ReadonlyArray<number>
  ) => Effect.Effect<void>
  /** A rebalance began: every task is torn down. */
  readonly revokeAll: Effect.Effect<void>
  /**
   * Starts the partitions whose start is due, each in a fiber of its own (at
   * most `concurrentStarts` restore at once), and returns at once; a start
   * that failed for the run (not retried) is this effect's failure.
   */
  readonly startDue: Effect.Effect<void, RunnerError>
  /**
   * Processes a batch of `task` under its batch lock (other tasks process
   * theirs meanwhile); then its outcome is applied (a rewind, a stopped
   * partition, a rejoin), none dropped, unless the task was torn down meanwhile.
   */
  readonly processTask: <E, R>(
    task: Task.Task,
    work: (task: Task.Task) => Effect.Effect<Task.Outcome<E>, never, R>
  ) => Effect.Effect<void, RunnerError | E, R>
  /** At-least-once: remembers offsets of acknowledged work, committed at the next `commitDue`. */
  readonly acknowledged: (offsets: ReadonlyArray<PartitionOffset>) => void
  /** At-least-once: commits acknowledged offsets; a failure rewinds every task. */
  readonly commitDue: Effect.Effect<void, RunnerError>
  /**
   * Deletes the kept stores of partitions neither assigned to this instance
   * nor with a task, unused for `stateCleanupDelay`. Run by the runner's loop
   * (like `startDue`) and under the batch lock: no task starts or stops meanwhile.
   */
  readonly cleanStores: Effect.Effect<void>
  /** A fetched batch did not continue its partition: restart the task there, or stop it if records were deleted. */
  readonly gap: (
    gap: { readonly topic: string; readonly partition: number; readonly expected: number }
  ) => Effect.Effect<void, RunnerError>
}

const maxBackoff = Duration.seconds(10)

/**
 * Tasks started at once: their fences, offset lookups and restores overlap
 * (a restore's fetch waits while another's store writes). Bounded, because
 * each restore holds up to two fetched changelog batches in memory.
 */
const concurrentStarts = 8

export const make = (options: {
  readonly config: SkeinConfig
  readonly context: Task.TaskContext
  readonly stats: RunnerStats
  readonly buffer: PollBuffer
  /** The standby replicas (`standbyReplicas` above 0, a stateful transformer). */
  readonly standbys?: Standbys | undefined
}): Effect.Effect<TaskManager, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { buffer, config, context, standbys, stats } = options
    const exactlyOnce = config.processingGuarantee === "exactly-once"
    const lock = yield* BatchLock.makeKeyed<TasksLock>("tasks")
    const wakeups = yield* Queue.unbounded<Wakeup>()
    /**
     * Scopes of the tasks starting or running; closing one tears its task
     * down. Not children of the manager's scope: only a teardown (under the
     * lock) closes them, its finalizer included.
     */
    const scopes = new Map<number, Scope.CloseableScope>()
    /** The starts in progress (fence, offsets, restore), one fiber per partition. */
    const starts = yield* FiberMap.make<number>()
    /** At most `concurrentStarts` starts acquire and restore at once. */
    const startSlots = yield* Effect.makeSemaphore(concurrentStarts)
    /** Start failures that end the run, reported by the next `startDue`. */
    const startFailures: Array<Cause.Cause<RunnerError>> = []
    const running = new Map<number, Task.Task>()
    /** Partitions whose start is due, in order. */
    const due: Array<number> = []
    /** Partitions waiting out a backoff before their start is due. */
    const backoffs = yield* FiberMap.make<number>()
    /** Failed deliveries or starts in a row, per partition. */
    const failures = new Map<number, number>()
    /** At-least-once: acknowledged work whose offsets are not committed yet. */
    const uncommitted = new Map<string, PartitionOffset>()
    let generation = -1
    /** The wakeup for the tasks' timers, and the time it is armed for. */
    const timerWakeup = yield* FiberHandle.make<void>()
    let timersArmedAt: number | undefined = undefined
    /** The partitions of the current assignment, stopped ones included. */
    let assignment: ReadonlySet<number> = new Set()

    const backoff = (attempts: number): Duration.Duration =>
      Duration.min(maxBackoff, Duration.times(config.deliveryBackoff, 2 ** (attempts - 1)))

    if (!exactlyOnce) {
      yield* Queue.offer(wakeups, "CommitDue").pipe(
        Effect.repeat(Schedule.spaced(config.commitInterval)),
        Effect.delay(config.commitInterval),
        Effect.forkScoped
      )
    } else if (context.database !== undefined && Duration.toMillis(context.database.kafkaCommitInterval) > 0) {
      // A database sink's idle tasks: their Kafka offsets follow the database's (DatabaseTask.followKafka).
      // (With no interval, every batch commits them.)
      const every = Duration.max(context.database.kafkaCommitInterval, Duration.seconds(1))
      yield* Queue.offer(wakeups, "CommitDue").pipe(
        Effect.repeat(Schedule.spaced(every)),
        Effect.delay(every),
        Effect.forkScoped
      )
    }

    if (Option.isSome(context.changelog) || context.source !== undefined || Option.isSome(context.runs)) {
      // A zero delay sweeps every second.
      const every = Duration.max(config.stateCleanupDelay, Duration.seconds(1))
      yield* Queue.offer(wakeups, "CleanupDue").pipe(
        Effect.repeat(Schedule.spaced(every)),
        Effect.delay(every),
        Effect.forkScoped
      )
    }

    const commitAcknowledged = Effect.suspend(() => {
      const offsets = [...uncommitted.values()]
      uncommitted.clear()
      return context.consumer.commitOffsets(offsets)
    })

    /** Tears one task down; its buffered batches complete with `outcome` ("Kept": left to the caller). */
    const stopTask = (partition: number, held: BatchLockHeld<TasksLock>, outcome: BatchOutcome | "Kept" = "Dropped") =>
      Effect.gen(function*() {
        yield* lock.verify(held, partition)
        // A start in progress is interrupted first (its restore stops); its scope is closed below.
        yield* FiberMap.remove(starts, partition)
        const scope = scopes.get(partition)
        scopes.delete(partition)
        running.delete(partition)
        stats.removeTask(partition)
        for (const [key, offset] of uncommitted) if (offset.partition === partition) uncommitted.delete(key)
        if (outcome !== "Kept") buffer.dropPartition(partition, outcome)
        if (scope !== undefined) {
          yield* Scope.close(scope, Exit.void)
          stats.recordTaskStopped()
        }
      })

    /** Tears every task down; the buffered batches complete with `outcome` ("Rejoin": kafkajs rejoins the group). */
    const teardownAll = (held: BatchLockHeld<TasksLock>, outcome: BatchOutcome = "Dropped") =>
      Effect.gen(function*() {
        stats.recordTeardown()
        if (!exactlyOnce && uncommitted.size > 0) {
          // Acknowledged work is committed before its partitions are given up; if that
          // fails, the records are delivered again (at-least-once).
          yield* commitAcknowledged.pipe(
            Effect.catchAll((error) => Effect.logWarning(`offset commit before teardown failed: ${error.message}`))
          )
        }
        yield* FiberMap.clear(starts)
        for (const partition of [...scopes.keys()]) yield* stopTask(partition, held, "Kept")
        due.length = 0
        yield* FiberMap.clear(backoffs)
        stats.clearPending()
        buffer.dropAll(outcome)
      })
    yield* Effect.addFinalizer(() => lock.withAll((held) => teardownAll(held)))

    /** Schedules `partition`'s start after the backoff of one more failure in a row; `Some` once they are exhausted. */
    const retryLater = (partition: number, what: string, { error }: Recoverable) =>
      Effect.gen(function*() {
        const attempts = (failures.get(partition) ?? 0) + 1
        failures.set(partition, attempts)
        if (attempts >= config.maxDeliveryFailures) return Option.some(attempts)
        const delay = backoff(attempts)
        yield* Effect.logWarning(`${what} (${attempts} in a row), retrying in ${Duration.format(delay)}: ${error.message}`)
        stats.addPending(partition)
        yield* FiberMap.run(
          backoffs,
          partition,
          Effect.sleep(delay).pipe(
            Effect.zipRight(Effect.sync(() => due.push(partition))),
            Effect.zipRight(Queue.offer(wakeups, "TaskDue"))
          )
        )
        return Option.none()
      })

    /** A failed delivery rewinds the partition: its task restarts from the last commit after a backoff. */
    const rewind = (partition: number, error: KafkaError | DatabaseError, held: BatchLockHeld<TasksLock>) =>
      Effect.gen(function*() {
        stats.recordAbort()
        yield* stopTask(partition, held)
        const failure = error._tag === "KafkaError" ? classify(error) : classifyDatabase(error)
        if (failure._tag === "Fatal") return yield* Effect.fail(error) // credentials, TLS, ACLs: no retry gets past them
        const exhausted = yield* retryLater(partition, `delivery of task ${partition} failed, rewinding to the last commit`, failure)
        if (Option.isSome(exhausted)) {
          return yield* Effect.fail(new DeliveryFailed({ partition, attempts: exhausted.value, cause: error }))
        }
      })

    /** Marks `partition` stopped by `message` (failure isolation "partition"). */
    const markStopped = (partition: number, message: string) =>
      Effect.gen(function*() {
        yield* Effect.logError(`partition ${partition} stopped: ${message}`)
        stats.markStopped(partition, message)
      })

    /** A partition's failure: stops only it (`failureIsolation: "partition"`) or ends the run. */
    const failPartition = <E>(partition: number, cause: Cause.Cause<E>, held: BatchLockHeld<TasksLock>) =>
      Effect.gen(function*() {
        if (config.failureIsolation === "run") return yield* Effect.failCause(cause)
        yield* markStopped(partition, describe(Cause.squash(cause)))
        yield* stopTask(partition, held)
      })

    /**
     * Starts task `partition` (in its start fiber): a standby of the partition
     * closes its store first, then fence, offsets, restore, and the partition
     * is fetched. Runs beside the poll loop; a teardown interrupts it.
     */
    const startTask = (partition: number) =>
      Effect.gen(function*() {
        // The scope is registered before anything is acquired in it: a teardown
        // interrupting the start at any point closes it.
        const scope = yield* Scope.make()
        scopes.set(partition, scope)
        const began = Date.now()
        const started = yield* Effect.uninterruptibleMask((restore) =>
          Effect.exit(restore(Effect.zipRight(
            standbys === undefined ? Effect.void : standbys.released(partition),
            startSlots.withPermits(1)(Scope.extend(Task.make(context, partition), scope)).pipe(
              Effect.tap((task) =>
                Effect.annotateCurrentSpan("skein.restore.mode", Option.match(task.restore, { onNone: () => "none", onSome: (r) => r.mode }))
              ),
              Effect.withSpan("skein.task.start", {
                captureStackTrace: false,
                attributes: {
                  "skein.application_id": config.applicationId,
                  "skein.transformer": context.transformer,
                  "messaging.destination.partition.id": String(partition),
                  "skein.generation": generation
                }
              })
            )
          ))).pipe(
            Effect.tap((exit) =>
              Effect.sync(() => {
                stats.taskStartEnded(partition)
                if (Exit.isSuccess(exit)) {
                  running.set(partition, exit.value)
                  buffer.expect(exit.value.startOffsets)
                  stats.recordTaskStarted(
                    partition,
                    Option.getOrUndefined(Option.map(exit.value.restore, ({ from, mode, reason, records, until }) => ({
                      mode,
                      reason,
                      records,
                      from,
                      until,
                      millis: Date.now() - began
                    })))
                  )
                }
              })
            ),
            Effect.tap((exit) =>
              Exit.isFailure(exit)
                ? Effect.zipRight(
                  Effect.sync(() => {
                    if (scopes.get(partition) === scope) scopes.delete(partition)
                  }),
                  Scope.close(scope, exit)
                )
                : Queue.offer(wakeups, "TaskStarted")
            )
          )
        )
        if (Exit.isSuccess(started) || Cause.isInterruptedOnly(started.cause)) return
        const error = Cause.failureOption(started.cause)
        if (Option.isNone(error)) return yield* Effect.failCause(started.cause)
        const failure = error.value
        if (failure instanceof OffsetOutOfRange && config.failureIsolation === "partition") {
          // An unreadable partition stops like a failed record: never a silent reset.
          return yield* markStopped(partition, failure.message)
        }
        const recoverable = failure._tag === "KafkaError"
          ? classify(failure)
          : failure._tag === "DatabaseError"
          ? classifyDatabase(failure)
          : undefined
        if (recoverable?._tag === "Recoverable") {
          // A broker unreachable or busy while the task connects, fences or restores: retried
          // after a backoff like a failed delivery, up to maxDeliveryFailures in a row.
          const exhausted = yield* retryLater(partition, `task ${partition} failed to start`, recoverable)
          if (Option.isSome(exhausted)) return yield* Effect.fail(failure)
          return
        }
        return yield* Effect.fail(failure)
      })

    /** Forks `partition`'s start; a failure it does not retry is kept for `startDue` (it ends the run). */
    const launch = (partition: number) =>
      FiberMap.run(
        starts,
        partition,
        startTask(partition).pipe(
          Effect.catchAllCause((cause) =>
            Cause.isInterruptedOnly(cause) ? Effect.void : Effect.zipRight(
              Effect.sync(() => startFailures.push(cause)),
              Queue.offer(wakeups, "TaskDue")
            )
          )
        )
      )

    /** A task's outcome, unless the task was torn down meanwhile: its rewind, its stop, or a rejoin. */
    const applyOutcome = <E>(task: Task.Task, outcome: Task.Outcome<E>): Effect.Effect<void, RunnerError | E> => {
      const current = () => running.get(task.partition) === task
      switch (outcome._tag) {
        case "Committed":
          return Effect.sync(() => {
            if (current()) failures.delete(outcome.partition)
          })
        case "Failed":
          return lock.withKey(outcome.partition, (held) => current() ? failPartition(outcome.partition, outcome.cause, held) : Effect.void)
        case "DeliveryFailed":
          return lock.withKey(outcome.partition, (held) => current() ? rewind(outcome.partition, outcome.error, held) : Effect.void)
        case "Migrated":
          // A task migrated: no task survives; rejoin to learn the current assignment. Said and
          // counted even when a revocation tore the tasks down meanwhile.
          return Effect.zipRight(
            Effect.zipRight(Effect.logWarning(outcome.error.message), Effect.sync(() => stats.recordMigration())),
            lock.withAll((held) =>
              Effect.gen(function*() {
                if (!current()) return
                yield* teardownAll(held, "Rejoin")
                // Its batches were buffered (kafkajs holds none of them): ask for the rejoin.
                yield* context.consumer.requestRejoin
              })
            )
          )
      }
    }

    const manager: TaskManager = {
      wakeups,
      task: (partition) => Option.fromNullable(running.get(partition)),
      runningCount: () => running.size,
      runningTasks: () => running.values(),
      armTimers: (busy) =>
        Effect.gen(function*() {
          let earliest = Number.POSITIVE_INFINITY
          for (const task of running.values()) if (!busy(task.partition)) earliest = Math.min(earliest, Timers.wakeAt(task.timers))
          if (earliest === timersArmedAt) return
          timersArmedAt = earliest
          if (earliest === Number.POSITIVE_INFINITY) return yield* FiberHandle.clear(timerWakeup)
          const delay = Math.max(0, earliest - (yield* Clock.currentTimeMillis))
          yield* FiberHandle.run(
            timerWakeup,
            Effect.sleep(delay).pipe(
              Effect.zipRight(Effect.sync(() => {
                timersArmedAt = undefined
              })),
              Effect.zipRight(Queue.offer(wakeups, "TimersDue"))
            )
          )
        }),
      assigned: () => assignment,
      generation: () => generation,
      hasDueStart: () => due.length > 0 || startFailures.length > 0,
      assign: (next, partitions, standbyPartitions = []) =>
        Effect.zipRight(
          lock.withAll((held) =>
            Effect.gen(function*() {
              yield* teardownAll(held)
              // Every assignment after the first is a rebalance, an eviction's rejoin included.
              if (generation !== -1) stats.recordRebalance()
              generation = next
              assignment = new Set(partitions)
              // A stopped partition stays stopped until a restart, or until it moves away.
              stats.keepStopped(partitions)
              for (const partition of partitions) {
                if (stats.stopped.has(partition)) continue
                due.push(partition)
                stats.addPending(partition)
              }
            })
          ),
          // Outside the lock, never waiting for a standby to stop: a partition active here is
          // never a standby too, and its task's start waits for the standby's store to close.
          standbys === undefined
            ? Effect.void
            : Effect.suspend(() => {
              const active = new Set(partitions)
              return standbys.update(standbyPartitions.filter((p) => !active.has(p)))
            })
        ),
      revokeAll: lock.withAll((held) => teardownAll(held)),
      startDue: Effect.suspend(() => {
        if (startFailures.length > 0) {
          return Effect.failCause(startFailures.splice(0).reduce(Cause.parallel))
        }
        return Effect.forEach(due.splice(0), launch, { discard: true })
      }),
      processTask: (task, work) =>
        Effect.gen(function*() {
          const partition = task.partition
          // A task torn down between the batch's start and its lock processes nothing.
          const outcome = yield* lock.withKey(
            partition,
            () => running.get(partition) === task ? work(task) : Effect.succeed({ _tag: "Committed" as const, partition })
          )
          // The task's lock is free again: its outcome takes the locks it needs (a migration: all).
          yield* applyOutcome(task, outcome)
        }),
      acknowledged: (offsets) => {
        for (const o of offsets) uncommitted.set(`${o.topic}\u0000${o.partition}`, o)
      },
      commitDue: Effect.suspend(() => {
        const behind = [...running.values()].some((task) => Option.isSome(task.database) && task.database.value.kafkaBehind.size > 0)
        // Nothing to commit: no lock taken (it waits for the batches in flight).
        if (uncommitted.size === 0 && !behind) return Effect.void
        return lock.withAll((held) =>
          Effect.gen(function*() {
            for (const task of running.values()) {
              if (Option.isSome(task.database)) yield* DatabaseTask.followKafka(task, task.database.value, context.applicationId)
            }
            if (uncommitted.size === 0) return
            const committed = yield* Effect.either(commitAcknowledged)
            if (committed._tag === "Left") {
              for (const partition of [...running.keys()]) yield* rewind(partition, committed.left, held)
            } else {
              stats.recordOffsetCommit(yield* Clock.currentTimeMillis)
            }
          })
        )
      }),
      cleanStores: lock.withAll(() =>
        StoreCleanup.whileRunning(
          context.storeDir,
          config.stateCleanupDelay,
          (partition) => assignment.has(partition) || scopes.has(partition) || (standbys?.has(partition) ?? false)
        ).pipe(
          Effect.map((deleted) => {
            for (const { folder, partition } of deleted) if (folder === String(partition)) context.localStores.remove(partition)
          })
        )
      ),
      gap: ({ expected, partition, topic }) =>
        Effect.gen(function*() {
          const range = yield* context.admin.offsetRange(topic, partition)
          yield* lock.withKey(partition, (held) =>
            Effect.gen(function*() {
              if (!running.has(partition)) return
              if (expected < range.low) {
                // Retention deleted records this task had not read yet: never a skip.
                const error = new OffsetOutOfRange({ topic, partition, committed: expected, earliest: range.low })
                return yield* failPartition(partition, Cause.fail(error), held)
              }
              // Fetched from somewhere else than where the task continues: start it again from its commit.
              yield* Effect.logWarning(`task ${partition}: a batch of ${topic} did not start at ${expected}; restarting it`)
              yield* stopTask(partition, held)
              due.push(partition)
              stats.addPending(partition)
            })
          )
        })
    }
    return manager
  })
