/**
 * The runner: sets a run up, then loops: take the consumer's events (and the
 * task manager's wakeups), start the next due task, process a poll.
 *
 * The data path reads one way: runner (this poll loop) -> task manager
 * (tasks, starts, rewinds, teardown under the batch lock) -> task (its
 * records and its commit) -> producer and store -> the Kafka client.
 *
 * Shutdown (interruption): fetching stops, running handlers get
 * `shutdownGrace`, finished work commits; then the scope tears the tasks
 * down and the consumer leaves the group. A failure raised while stopping is
 * the run's failure, never dropped.
 *
 * @internal
 */
import { Cause, Chunk, Clock, Deferred, Duration, Effect, Exit, Fiber, Option, Queue, Scope } from "effect"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import type { SkeinConfig } from "../SkeinConfig.ts"
import type { RunnerError } from "../SkeinError.ts"
import type * as Topic from "../Topic.ts"
import type { Transformer } from "../Transformer.ts"
import { changelogTopic } from "../Transformer.ts"
import * as HealthServer from "./healthServer.ts"
import * as Admin from "./kafka/admin.ts"
import * as ChangelogReader from "./kafka/changelogReader.ts"
import { makeKafka } from "./kafka/client.ts"
import * as Consumer from "./kafka/consumer.ts"
import { surface } from "./kafka/errors.ts"
import * as GroupOwnership from "./GroupOwnership.ts"
import { memoizeSuccess } from "./memoizeSuccess.ts"
import * as Outputs from "./outputs.ts"
import * as PollBuffer from "./PollBuffer.ts"
import { makeStats, observeBatchLatency } from "./RunnerStats.ts"
import type { RunnerStats } from "./RunnerStats.ts"
import * as StateKeyCheck from "./StateKeyCheck.ts"
import * as Task from "./Task.ts"
import * as TaskManager from "./TaskManager.ts"
import { validateConfig, validateTopics } from "./validation.ts"

export { batchLatencyBounds, makeStats, observeBatchLatency } from "./RunnerStats.ts"
export type { RunnerPhase, RunnerStats } from "./RunnerStats.ts"

/** What the loop waits for: consumer events, or a wakeup of the task manager. */
type LoopEvent = Consumer.ConsumerEvent | { readonly _tag: "Wakeup"; readonly wakeup: TaskManager.Wakeup }

export const run = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  config: SkeinConfig,
  stats: RunnerStats = makeStats()
): Effect.Effect<never, RunnerError | E, R | Scope.Scope> =>
  Effect.gen(function*() {
    yield* validateConfig(config, stats, transformer.rules, transformer.name)
    stats.phase = "starting"
    if (config.healthPort !== undefined) {
      const server = yield* HealthServer.serve(stats, {
        port: config.healthPort,
        labels: { applicationId: config.applicationId, transformer: transformer.name }
      })
      stats.healthPort = server.port
    }
    const kafka = yield* makeKafka(config)
    const admin = yield* Admin.make(kafka)
    const inputTopics = transformer.inputs.map((t) => t.name)
    const changelog = Option.map(transformer.state, () => changelogTopic(config.applicationId, transformer))
    yield* validateTopics(admin, inputTopics, changelog, {
      replicationFactor: config.changelogReplicationFactor,
      deadLetterTopic: config.deadLetterTopic
    })
    // One applicationId, one transformer: a group already running another one is refused.
    yield* GroupOwnership.check(admin, { groupId: config.applicationId, owner: transformer.name })

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
    // The changelog reader is made at the first restore; a failed first connect is retried by the next one.
    const restoreFrom = yield* Option.match(changelog, {
      onNone: () => Effect.succeed(Option.none()),
      onSome: (topic) =>
        Effect.map(
          memoizeSuccess(
            ChangelogReader.make(kafka, { topic, groupId: `${config.applicationId}-restore-${randomUUID()}` }).pipe(
              Scope.extend(runnerScope)
            )
          ),
          (reader) => Option.some({ topic, reader })
        )
    })
    const messageLimits = Outputs.makeMessageLimits(config.maxMessageBytes, admin.maxMessageBytes)
    const buffer = PollBuffer.make()
    const manager = yield* TaskManager.make({
      config,
      stats,
      buffer,
      context: {
        kafka,
        admin,
        consumer,
        applicationId: config.applicationId,
        inputTopics,
        changelog: restoreFrom,
        storeDir,
        transactionTimeout: config.transactionTimeout,
        processingGuarantee: config.processingGuarantee,
        maxMessageBytes: config.maxMessageBytes,
        limitOf: messageLimits.known,
        onRestoreProgress: (partition, restored, total) => {
          stats.restoring.set(partition, { restored, total })
        }
      }
    })
    const permits = config.maxConcurrency === "unbounded"
      ? Option.none()
      : Option.some(yield* Effect.makeSemaphore(config.maxConcurrency))
    const deadLetterTopic = Option.fromNullable(config.deadLetterTopic)
    const stateKeys = StateKeyCheck.enabled(config.checkStateKeys, transformer) ? StateKeyCheck.make() : undefined
    const shutdown = yield* Deferred.make<void>()
    const exactlyOnce = config.processingGuarantee === "exactly-once"

    const updateLag = (topic: string, partition: number, highWatermark: number, position: number) => {
      stats.lag.set(`${topic}/${partition}`, { topic, partition, lag: Math.max(0, highWatermark - position) })
    }

    const handle = (event: LoopEvent): Effect.Effect<void, RunnerError> => {
      switch (event._tag) {
        case "Crashed":
          return Effect.fail(event.error)
        case "Rebalancing":
          return manager.revokeAll
        case "Assigned":
          return manager.assign(event.generation, [...new Set(event.partitions.map((tp) => tp.partition))].sort((a, b) => a - b))
        case "Filtered":
          return Effect.sync(() => buffer.filtered(event.topic, event.partition, event.nextOffset))
        case "Wakeup":
          return event.wakeup === "CommitDue" ? manager.commitDue : Effect.void
        case "Batch": {
          const batch = event.batch
          if (batch.generation !== manager.generation() || Option.isNone(manager.task(batch.partition))) {
            // Fetched for a task that is not running: dropped uncommitted; its owner reprocesses it.
            return Effect.sync(() => batch.complete("Dropped"))
          }
          const arrival = buffer.offer(batch)
          switch (arrival._tag) {
            case "Accepted":
              return Effect.sync(() =>
                updateLag(batch.topic, batch.partition, batch.highWatermark, batch.records[0]?.offset ?? batch.nextOffset)
              )
            case "Stale":
              return Effect.sync(() => batch.complete("Dropped"))
            case "Gap":
              batch.complete("Dropped")
              return manager.gap({ topic: batch.topic, partition: batch.partition, expected: arrival.expected })
          }
        }
      }
    }

    /** The events ready now, or (with nothing to do) the next one: an event, a wakeup or the shutdown. */
    const nextEvents: Effect.Effect<ReadonlyArray<LoopEvent>> = Effect.gen(function*() {
      const ready = (): Effect.Effect<ReadonlyArray<LoopEvent>> =>
        Effect.zipWith(
          Queue.takeAll(consumer.events),
          Queue.takeAll(manager.wakeups),
          (events, wakeups): ReadonlyArray<LoopEvent> => [
            ...Chunk.toReadonlyArray(events),
            ...Chunk.toReadonlyArray(wakeups).map((wakeup) => ({ _tag: "Wakeup" as const, wakeup }))
          ]
        )
      if (!buffer.isEmpty() || manager.hasDueStart()) return yield* ready()
      const first = yield* Effect.raceAll<Effect.Effect<Option.Option<LoopEvent>>>([
        Effect.map(Queue.take(consumer.events), Option.some),
        Effect.map(Queue.take(manager.wakeups), (wakeup) => Option.some({ _tag: "Wakeup" as const, wakeup })),
        Effect.as(Deferred.await(shutdown), Option.none())
      ])
      return [...Option.toArray(first), ...(yield* ready())]
    })

    const processPoll = Effect.gen(function*() {
      const started = yield* Clock.currentTimeMillis
      const slices = buffer.take(config.maxPollRecords)
      const total = slices.reduce((n, s) => n + s.end - s.cursor.index, 0)
      stats.maxBatchRecords = Math.max(stats.maxBatchRecords, total)
      stats.batches++
      const byTask = new Map<number, Array<PollBuffer.PollSlice>>()
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
      yield* manager.runPoll([...byTask.keys()], (task) => {
        const taskSlices = byTask.get(task.partition) ?? []
        return Task.process(
          task,
          transformer,
          taskSlices.map(({ cursor, end }) => ({
            topic: cursor.batch.topic,
            partition: cursor.batch.partition,
            records: cursor.batch.records.slice(cursor.index, end),
            endOffset: end >= cursor.batch.records.length
              ? cursor.batch.nextOffset
              : (cursor.batch.records[end]?.offset ?? cursor.batch.nextOffset)
          })),
          {
            deadLetterTopic,
            stop,
            permits,
            messageLimits,
            cache: task.cache,
            stateKeys,
            groupId: config.applicationId,
            changelog,
            onRetries: (retries) => {
              stats.retries += retries
            },
            onCommitted: ({ offsets, result }) =>
              Effect.map(Clock.currentTimeMillis, (now) => {
                stats.commits++
                stats.lastCommitAt = now
                stats.recordsProcessed += result.processed
                stats.skipped += result.skipped
                stats.deadLettered += result.deadLettered
                if (!exactlyOnce) manager.acknowledged(offsets)
                taskSlices.forEach(({ cursor }, i) => {
                  cursor.index += result.cuts[i]!.kept
                  updateLag(cursor.batch.topic, cursor.batch.partition, cursor.batch.highWatermark, result.cuts[i]!.offset)
                })
              })
          }
        )
      })
      buffer.completeProcessed()
      observeBatchLatency(stats, (yield* Clock.currentTimeMillis) - started)
    })

    const loop = Effect.gen(function*() {
      stats.phase = "running"
      while (!(yield* Deferred.isDone(shutdown))) {
        for (const event of yield* nextEvents) yield* handle(event)
        if (yield* Deferred.isDone(shutdown)) break
        yield* manager.startNext(Deferred.await(shutdown))
        if (!buffer.isEmpty() && !(yield* Deferred.isDone(shutdown))) yield* processPoll
      }
    })

    // On interruption (SIGTERM, SIGINT): fetching stops, handlers get shutdownGrace, finished
    // work commits; then the scope tears the tasks down and the consumer leaves the group.
    const fiber = yield* Effect.forkScoped(loop)
    return yield* Fiber.join(fiber).pipe(
      Effect.zipRight(Effect.interrupt),
      Effect.onInterrupt(() =>
        Effect.gen(function*() {
          stats.phase = "stopping"
          yield* Deferred.succeed(shutdown, undefined)
          const stopped = yield* Fiber.await(fiber).pipe(
            Effect.timeout(Duration.sum(config.shutdownGrace, Duration.seconds(60))),
            Effect.option
          )
          // A failure while stopping is the run's failure: logged here, and returned by the scope's close.
          if (Option.isSome(stopped) && Exit.isFailure(stopped.value) && !Cause.isInterruptedOnly(stopped.value.cause)) {
            stats.phase = "failed"
            yield* Effect.logError("the run failed while stopping", stopped.value.cause)
          }
        })
      ),
      Effect.tapErrorCause((cause) =>
        Effect.sync(() => {
          if (!Cause.isInterruptedOnly(cause)) stats.phase = "failed"
        })
      ),
      Effect.ensuring(Effect.sync(() => {
        if (stats.phase !== "failed") stats.phase = "stopped"
      }))
    )
  }).pipe(Effect.mapError(surface), Effect.annotateLogs({ applicationId: config.applicationId, transformer: transformer.name }))
