/**
 * The runner's poll loop: take the consumer's events (and the task manager's
 * wakeups, and the tasks' ended batches), fork the due task starts, and start
 * a batch for each running task with records and none in flight. Tasks start
 * beside the loop (a restore holds up only its own partition, which is
 * fetched once its task runs), and process beside it and each other: a slow
 * or retrying record holds up only its own partition. Fetched records wait
 * in the buffer; a partition pauses while its buffer holds a task's share of
 * `maxPollRecords`; the next fetch waits until no task is busy, at most
 * `fetchHold` (see `held`). What a run needs is acquired by `RunnerSetup`.
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
import { Cause, Chunk, Clock, Deferred, Duration, Effect, Exit, Fiber, FiberHandle, FiberSet, Option, Queue } from "effect"
import type { Scope } from "effect"
import type { SkeinConfig } from "../../SkeinConfig.ts"
import type { RunnerError } from "../../SkeinError.ts"
import type * as Topic from "../../Topic.ts"
import type { Transformer } from "../../Transformer.ts"
import type * as Consumer from "../kafka/consumer.ts"
import { surface } from "../kafka/errors.ts"
import * as PollBuffer from "./PollBuffer.ts"
import * as RunnerSetup from "./RunnerSetup.ts"
import { makeStats } from "./RunnerStats.ts"
import type { RunnerStats } from "./RunnerStats.ts"
import * as Task from "./Task.ts"
import * as TaskIdle from "./TaskIdle.ts"
import type * as TaskManager from "./TaskManager.ts"
import * as TaskOrder from "./taskOrder.ts"
import * as Timers from "./timers.ts"

export { batchLatencyBounds, makeStats } from "./RunnerStats.ts"
export type { RunnerPhase, RunnerStats } from "./RunnerStats.ts"

/** What the loop waits for: consumer events, a wakeup of the task manager, or the shutdown. */
type LoopEvent =
  | Consumer.ConsumerEvent
  | { readonly _tag: "Wakeup"; readonly wakeup: TaskManager.Wakeup }
  | { readonly _tag: "Shutdown" }
  | { readonly _tag: "HoldExpired" }

/** A task's batch ended (its outcome applied): its exit is the run's failure when it failed. */
interface Processed<E> {
  readonly _tag: "Processed"
  readonly partition: number
  readonly exit: Exit.Exit<void, RunnerError | E>
}

/** The longest fetched batches hold kafkajs's next fetch while tasks are busy (see `held` in `run`). */
const fetchHold = Duration.millis(50)

export const run = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  config: SkeinConfig,
  stats: RunnerStats = makeStats(),
  hooks: RunnerSetup.RunnerHooks = {}
): Effect.Effect<never, RunnerError | E, R | Scope.Scope> =>
  Effect.gen(function*() {
    const { buffer, changelog, consumer, deadLetterTopic, endOffset, manager, messageLimits, partitionCounts, permits, positions, stateKeys } =
      yield* RunnerSetup.acquire(transformer, config, stats, hooks)
    const shutdown = yield* Deferred.make<void>()
    const exactlyOnce = config.processingGuarantee === "exactly-once"

    const updateLag = (topic: string, partition: number, highWatermark: number, position: number) => {
      stats.setLag(topic, partition, Math.max(0, highWatermark - position))
    }

    const handle = (event: LoopEvent | Processed<E>): Effect.Effect<void, RunnerError | E> => {
      switch (event._tag) {
        case "Shutdown":
          return Effect.void
        case "HoldExpired":
          return releaseAll
        case "Crashed":
          return Effect.fail(event.error)
        case "Rebalancing":
          // The tasks commit what finished (within revocationGrace), then kafkajs rejoins.
          return Effect.zipRight(Effect.zipRight(releaseAll, manager.revokeAll), consumer.revoked)
        case "Assigned":
          idle?.reset()
          return manager.assign(
            event.generation,
            [...new Set(event.partitions.map((tp) => tp.partition))].sort((a, b) => a - b),
            event.standbys
          )
        case "Filtered":
          return Effect.sync(() => buffer.filtered(event.topic, event.partition, event.nextOffset))
        case "Processed":
          return Effect.suspend(() => {
            inFlight.delete(event.partition)
            buffer.completeProcessed()
            // A failure its task could not take (failure isolation "run", a fatal error) ends the run.
            if (Exit.isFailure(event.exit) && !Cause.isInterruptedOnly(event.exit.cause)) return Effect.failCause(event.exit.cause)
            return unthrottle(event.partition)
          })
        case "Wakeup":
          switch (event.wakeup) {
            case "CommitDue":
              return manager.commitDue
            case "CleanupDue":
              return manager.cleanStores
            case "TaskDue":
            case "TaskStarted":
            case "TimersDue":
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
            case "Accepted": {
              // The records are buffered: kafkajs fetches on once no task is busy (its fetcher waits
              // for every batch of a fetch), and this partition pauses once its buffer holds a task's
              // share of a poll.
              updateLag(batch.topic, batch.partition, batch.highWatermark, batch.records[0]?.offset ?? batch.nextOffset)
              idle?.fetched(batch.topic, batch.partition, batch.nextOffset, batch.highWatermark, clock.unsafeCurrentTimeMillis())
              return Effect.zipRight(hold(batch), throttle(batch.topic, batch.partition))
            }
            case "Stale":
              return Effect.sync(() => batch.complete("Dropped"))
            case "Gap":
              batch.complete("Dropped")
              return manager.gap({ topic: batch.topic, partition: batch.partition, expected: arrival.expected })
          }
        }
      }
    }

    /**
     * Everything the loop reacts to, in one queue: the consumer's events and the
     * task manager's wakeups (forwarded as they come), the tasks' ended batches and
     * the shutdown. One queue, so waiting for the next event forks no fiber.
     */
    const inbox = yield* Queue.unbounded<LoopEvent | Processed<E>>()
    yield* Effect.forkScoped(Effect.forever(
      Effect.flatMap(Queue.takeBetween(consumer.events, 1, Number.MAX_SAFE_INTEGER), (events) => Queue.offerAll(inbox, events))
    ))
    yield* Effect.forkScoped(Effect.forever(
      Effect.flatMap(
        Queue.takeBetween(manager.wakeups, 1, Number.MAX_SAFE_INTEGER),
        (wakeups) => Queue.offerAll(inbox, Chunk.map(wakeups, (wakeup) => ({ _tag: "Wakeup" as const, wakeup })))
      )
    ))

    /**
     * A task reading several inputs processes them in timestamp order and waits for a lagging one
     * (`maxTaskIdle`, Kafka Streams' `max.task.idle.ms`): `TaskIdle`. Woken through the inbox.
     */
    const idle = TaskOrder.applies(transformer)
      ? yield* TaskIdle.make({
        inputs: transformer.inputs.map((topic) => topic.name),
        maxTaskIdle: config.maxTaskIdle === "no-wait" ? "no-wait" : Duration.toMillis(config.maxTaskIdle),
        buffer,
        endOffset,
        wake: Effect.asVoid(Queue.offer(inbox, { _tag: "Wakeup", wakeup: "TaskDue" }))
      })
      : undefined

    /** The events ready now, or (with nothing to do) the next one and any that came with it. */
    const nextEvents: Effect.Effect<ReadonlyArray<LoopEvent | Processed<E>>> = Effect.gen(function*() {
      if (dispatchable().length > 0 || manager.hasDueStart()) return Chunk.toReadonlyArray(yield* Queue.takeAll(inbox))
      const first = yield* Queue.take(inbox)
      return [first, ...Chunk.toReadonlyArray(yield* Queue.takeAll(inbox))]
    })

    /** The tasks processing a batch, by partition: a task runs one batch at a time. */
    const inFlight = new Set<number>()
    /** Where the tasks' batches run: beside the loop, which waits for them before it ends. */
    const batches = yield* FiberSet.make<void>()
    /** Input partitions paused because their buffer is full. */
    const throttled = new Set<string>()
    const tpKey = (topic: string, partition: number) => `${topic}\u0000${partition}`

    /** A task's share of `maxPollRecords`: the most records one batch takes, and a partition's buffer before it pauses. */
    const share = () => Math.max(1, Math.floor(config.maxPollRecords / Math.max(1, manager.runningCount())))

    /** Pauses `topic`/`partition` while its buffer holds a batch's worth. */
    const throttle = (topic: string, partition: number): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (buffer.buffered(topic, partition) < share()) return Effect.void
        throttled.add(tpKey(topic, partition))
        return consumer.pause([{ topic, partition }])
      })

    /** Resumes the paused inputs of task `partition` whose buffers have room again (its task still running). */
    const unthrottle = (partition: number): Effect.Effect<void> =>
      Effect.suspend(() => {
        const running = Option.isSome(manager.task(partition))
        const resumed: Array<{ topic: string; partition: number }> = []
        for (const topic of transformer.inputs.map((t) => t.name)) {
          const key = tpKey(topic, partition)
          if (!throttled.has(key)) continue
          // A task that stopped paused its inputs; its next start resumes them.
          if (!running) throttled.delete(key)
          else if (buffer.buffered(topic, partition) < share()) {
            throttled.delete(key)
            resumed.push({ topic, partition })
          }
        }
        return consumer.resume(resumed)
      })

    /**
     * Fetched batches held from kafkajs while any task has a batch in flight,
     * until none has or `fetchHold` passes. kafkajs's next fetch waits for every
     * batch of a fetch, so it goes out once the tasks' commits are done, as from
     * a poll loop: it brings every record that arrived meanwhile, and each task
     * begins its next transaction after its commit's markers are written (the
     * coordinator answers CONCURRENT_TRANSACTIONS until then). A held batch is
     * still processed at once when its task is idle: only the next fetch waits.
     * A slow or retrying task delays the other partitions' next fetch by at most
     * `fetchHold`, never their processing.
     */
    const held: Array<Consumer.PartitionBatch> = []
    const holdTimer = yield* FiberHandle.make()
    const hold = (batch: Consumer.PartitionBatch): Effect.Effect<void> =>
      Effect.sync(() => {
        held.push(batch)
      })
    /** Lets kafkajs go on to its next fetch. */
    const releaseAll: Effect.Effect<void> = Effect.suspend(() => {
      for (const batch of held.splice(0)) batch.complete("Buffered")
      return FiberHandle.clear(holdTimer)
    })
    /** After the loop's events and dispatch: released when no task is in flight, else once `fetchHold` passes. */
    const settleHold: Effect.Effect<void> = Effect.suspend(() => {
      if (held.length === 0) return Effect.void
      if (inFlight.size === 0) return releaseAll
      return FiberHandle.run(
        holdTimer,
        Effect.zipRight(Effect.sleep(fetchHold), Queue.offer(inbox, { _tag: "HoldExpired" })),
        { onlyIfMissing: true }
      ).pipe(Effect.asVoid)
    })

    /** Running tasks with records waiting (or, a transformer with timers, timers due) and no batch in flight. */
    const dispatchable = (): ReadonlyArray<number> => {
      const now = clock.unsafeCurrentTimeMillis()
      const ready = [...buffer.waiting()].filter((partition) =>
        !inFlight.has(partition) && Option.isSome(manager.task(partition)) && (idle === undefined || idle.ready(partition, now))
      )
      if (!timed) return ready
      const waiting = new Set(ready)
      for (const task of manager.runningTasks()) {
        if (!inFlight.has(task.partition) && !waiting.has(task.partition) && Timers.wakeAt(task.timers) <= now) ready.push(task.partition)
      }
      return ready
    }

    /**
     * Timers (a transformer with `onTimer`): a task whose wall-clock timers are
     * due gets a batch without records (it fires them, in its transaction);
     * the task manager wakes the loop when the next is due.
     */
    const timed = transformer.onTimer !== undefined
    const clock = yield* Effect.clock

    /** The runner's scope: where the rebalance watchers run. */
    const runScope = yield* Effect.scope
    /** The next rebalance, and the grace period its batches get once it (or the shutdown) begins. */
    let watched: {
      readonly rebalance: Deferred.Deferred<void>
      readonly grace: Deferred.Deferred<Duration.Duration>
      readonly stop: Effect.Effect<void>
    } | undefined
    /**
     * Completes when running handlers must be interrupted: they get a grace period
     * once a revocation (`revocationGrace`) or the shutdown (`shutdownGrace`)
     * begins, whichever comes first. One watcher fiber per rebalance, ended by it;
     * the batches share its `Deferred` rather than race the two of their own.
     */
    const stopSignal: Effect.Effect<Effect.Effect<void>> = Effect.gen(function*() {
      const rebalance = yield* consumer.nextRebalance
      if (watched?.rebalance === rebalance) return watched.stop
      const grace = yield* Deferred.make<Duration.Duration>()
      if (yield* Deferred.isDone(shutdown)) yield* Deferred.succeed(grace, config.shutdownGrace)
      yield* Deferred.await(rebalance).pipe(
        Effect.zipRight(Deferred.succeed(grace, config.revocationGrace)),
        Effect.forkIn(runScope)
      )
      watched = { rebalance, grace, stop: Effect.flatMap(Deferred.await(grace), Effect.sleep) }
      return watched.stop
    })

    const pollAttributes = { "skein.application_id": config.applicationId, "skein.transformer": transformer.name }
    /**
     * Starts a batch for each task with records waiting and none in flight, in a
     * `skein.poll` span (each task's a `skein.batch`): a task's batch commits on
     * its own, and a task still busy (a slow record, a retry) holds up no other.
     */
    const dispatch = Effect.gen(function*() {
      const ready = dispatchable()
      if (ready.length === 0) return
      const stop = yield* stopSignal
      const max = share()
      let total = 0
      for (const partition of ready) {
        const task = Option.getOrThrow(manager.task(partition))
        // A multi-input task takes its records in timestamp order, up to where a lagging input must be waited for
        // (offered at least one record of each input with some: the smallest head is always among them).
        const ordered = idle === undefined ? undefined : idle.order(
          partition,
          buffer.takeFor(partition, Math.max(max, transformer.inputs.length)),
          Math.max(max, transformer.inputs.length),
          clock.unsafeCurrentTimeMillis()
        )
        const taskSlices = ordered === undefined ? buffer.takeFor(partition, max) : ordered.slices
        if (ordered !== undefined && ordered.enforced > 0) stats.recordEnforcedProcessing(ordered.enforced)
        const count = taskSlices.reduce((n, s) => n + PollBuffer.size(s), 0)
        total += count
        stats.recordBatch(count)
        const started = yield* Clock.currentTimeMillis
        const work = manager.processTask(task, (task) =>
          Task.processSlices(
            task,
            transformer,
            taskSlices.map(PollBuffer.records),
            {
              deadLetterTopic,
              stop,
              ordered: idle !== undefined,
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
                  // After the store write: queries bounded by a position (KIP-796) wait for these offsets.
                  positions.committed(task.partition, offsets)
                  if (!exactlyOnce) manager.acknowledged(offsets)
                  taskSlices.forEach((slice, i) => {
                    PollBuffer.advance(slice, result.cuts[i]!.kept)
                    const batch = slice.parts[slice.parts.length - 1]!.cursor.batch
                    updateLag(batch.topic, batch.partition, batch.highWatermark, result.cuts[i]!.offset)
                  })
                })
            }
          ))
        inFlight.add(partition)
        yield* FiberSet.run(
          batches,
          work.pipe(
            Effect.exit,
            Effect.tap(() => Effect.map(Clock.currentTimeMillis, (now) => stats.observeBatchLatency(now - started))),
            Effect.flatMap((exit) => Queue.offer(inbox, { _tag: "Processed", partition, exit })),
            Effect.asVoid
          )
        )
      }
      yield* Effect.annotateCurrentSpan({ "messaging.batch.message_count": total, "skein.partitions": ready.length })
    }).pipe(Effect.withSpan("skein.poll", { captureStackTrace: false, attributes: pollAttributes }))

    const loop = Effect.gen(function*() {
      yield* stats.setPhase("running")
      while (!(yield* Deferred.isDone(shutdown))) {
        for (const event of yield* nextEvents) yield* handle(event)
        if (yield* Deferred.isDone(shutdown)) break
        // Forks the due starts (fence, restore) beside this loop: a restore holds up only its own partition.
        yield* manager.startDue
        if (!(yield* Deferred.isDone(shutdown))) yield* dispatch
        if (timed) yield* manager.armTimers((partition) => inFlight.has(partition))
        if (idle !== undefined) yield* idle.kick
        yield* settleHold
      }
      // Stopping: the batches in flight get shutdownGrace, commit what finished, and end; then
      // kafkajs need not wait for a revocation before it rejoins (it is about to leave).
      while (inFlight.size > 0) {
        const event = yield* Queue.take(inbox)
        if (event._tag === "Processed") yield* handle(event)
      }
      yield* releaseAll
      yield* consumer.stopped
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
          if (watched !== undefined) yield* Deferred.succeed(watched.grace, config.shutdownGrace)
          yield* Queue.offer(inbox, { _tag: "Shutdown" })
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
