/**
 * The runner's poll loop: take the consumer's events (and the task manager's
 * wakeups), fork the due task starts, process a poll of the running tasks'
 * records. Tasks start beside the loop (a restore holds up only its own
 * partition, which is fetched once its task runs). What a run needs is
 * acquired by `RunnerSetup`.
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
import { Cause, Chunk, Clock, Deferred, Duration, Effect, Exit, Fiber, Option, Queue } from "effect"
import type { Scope } from "effect"
import type { SkeinConfig } from "../SkeinConfig.ts"
import type { RunnerError } from "../SkeinError.ts"
import type * as Topic from "../Topic.ts"
import type { Transformer } from "../Transformer.ts"
import type * as Consumer from "./kafka/consumer.ts"
import { surface } from "./kafka/errors.ts"
import * as PollBuffer from "./PollBuffer.ts"
import * as RunnerSetup from "./RunnerSetup.ts"
import { makeStats } from "./RunnerStats.ts"
import type { RunnerStats } from "./RunnerStats.ts"
import * as Task from "./Task.ts"
import type * as TaskManager from "./TaskManager.ts"

export { batchLatencyBounds, makeStats } from "./RunnerStats.ts"
export type { RunnerPhase, RunnerStats } from "./RunnerStats.ts"

/** What the loop waits for: consumer events, or a wakeup of the task manager. */
type LoopEvent = Consumer.ConsumerEvent | { readonly _tag: "Wakeup"; readonly wakeup: TaskManager.Wakeup }

export const run = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  config: SkeinConfig,
  stats: RunnerStats = makeStats(),
  hooks: RunnerSetup.RunnerHooks = {}
): Effect.Effect<never, RunnerError | E, R | Scope.Scope> =>
  Effect.gen(function*() {
    const { buffer, changelog, consumer, deadLetterTopic, manager, messageLimits, partitionCounts, permits, stateKeys } =
      yield* RunnerSetup.acquire(transformer, config, stats, hooks)
    const shutdown = yield* Deferred.make<void>()
    const exactlyOnce = config.processingGuarantee === "exactly-once"

    const updateLag = (topic: string, partition: number, highWatermark: number, position: number) => {
      stats.setLag(topic, partition, Math.max(0, highWatermark - position))
    }

    const handle = (event: LoopEvent): Effect.Effect<void, RunnerError> => {
      switch (event._tag) {
        case "Crashed":
          return Effect.fail(event.error)
        case "Rebalancing":
          return manager.revokeAll
        case "Assigned":
          return manager.assign(
            event.generation,
            [...new Set(event.partitions.map((tp) => tp.partition))].sort((a, b) => a - b),
            event.standbys
          )
        case "Filtered":
          return Effect.sync(() => buffer.filtered(event.topic, event.partition, event.nextOffset))
        case "Wakeup":
          switch (event.wakeup) {
            case "CommitDue":
              return manager.commitDue
            case "CleanupDue":
              return manager.cleanStores
            case "TaskDue":
              return Effect.void
          }
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

    const pollAttributes = { "skein.application_id": config.applicationId, "skein.transformer": transformer.name }
    /** One poll: its records, by task, processed and committed in a `skein.poll` span (each task's a `skein.batch`). */
    const processPoll = Effect.gen(function*() {
      const started = yield* Clock.currentTimeMillis
      const slices = buffer.take(config.maxPollRecords)
      const total = slices.reduce((n, s) => n + s.end - s.cursor.index, 0)
      stats.recordBatch(total)
      yield* Effect.annotateCurrentSpan("messaging.batch.message_count", total)
      const byTask = new Map<number, Array<PollBuffer.PollSlice>>()
      for (const slice of slices) {
        const list = byTask.get(slice.cursor.batch.partition) ?? []
        list.push(slice)
        byTask.set(slice.cursor.batch.partition, list)
      }
      yield* Effect.annotateCurrentSpan("skein.partitions", byTask.size)
      // Running handlers get a grace period once a revocation or a shutdown begins.
      const rebalance = yield* consumer.nextRebalance
      const stop = Effect.raceFirst(
        Effect.zipRight(Deferred.await(rebalance), Effect.sleep(config.revocationGrace)),
        Effect.zipRight(Deferred.await(shutdown), Effect.sleep(config.shutdownGrace))
      )
      yield* manager.runPoll([...byTask.keys()], (task) => {
        const taskSlices = byTask.get(task.partition) ?? []
        return Task.processSlices(
          task,
          transformer,
          taskSlices.map(PollBuffer.records),
          {
            deadLetterTopic,
            stop,
            maxDuration: config.maxBatchDuration,
            permits,
            messageLimits,
            partitionCounts,
            cache: task.cache,
            stateKeys,
            groupId: config.applicationId,
            changelog,
            onRetries: (retries) => {
              stats.recordRetries(retries)
            },
            inTransaction: (commit) => stats.inTransaction(commit),
            onCommitted: ({ offsets, result }) =>
              Effect.map(Clock.currentTimeMillis, (now) => {
                stats.recordCommit(result, now, task.partition)
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
      stats.observeBatchLatency((yield* Clock.currentTimeMillis) - started)
    }).pipe(Effect.withSpan("skein.poll", { captureStackTrace: false, attributes: pollAttributes }))

    const loop = Effect.gen(function*() {
      yield* stats.setPhase("running")
      while (!(yield* Deferred.isDone(shutdown))) {
        for (const event of yield* nextEvents) yield* handle(event)
        if (yield* Deferred.isDone(shutdown)) break
        // Forks the due starts (fence, restore) beside this loop: a restore holds up only its own partition.
        yield* manager.startDue
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
          yield* stats.setPhase("stopping")
          yield* Deferred.succeed(shutdown, undefined)
          const stopped = yield* Fiber.await(fiber).pipe(
            Effect.timeout(Duration.sum(config.shutdownGrace, Duration.seconds(60))),
            Effect.option
          )
          if (Option.isNone(stopped)) {
            yield* Effect.logError(
              `the runner did not stop within shutdownGrace + 60 s (${Duration.format(config.shutdownGrace)} + 60 s); ` +
                "its tasks are torn down now"
            )
          } else if (Exit.isFailure(stopped.value) && !Cause.isInterruptedOnly(stopped.value.cause)) {
            // A failure while stopping is the run's failure, not a clean stop: an interrupted
            // run can only end with it as a defect, so runMain logs it and exits non-zero.
            yield* stats.setPhase("failed")
            yield* Effect.logError("the run failed while stopping", stopped.value.cause)
            return yield* Effect.die(Cause.squash(stopped.value.cause))
          }
        })
      ),
      Effect.tapErrorCause((cause) => Cause.isInterruptedOnly(cause) ? Effect.void : stats.setPhase("failed")),
      Effect.ensuring(stats.finish)
    )
  }).pipe(Effect.mapError(surface), Effect.annotateLogs({ applicationId: config.applicationId, transformer: transformer.name }))
