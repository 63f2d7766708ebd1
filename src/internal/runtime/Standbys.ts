/**
 * Standby replicas (`standbyReplicas`): read-only copies of other members'
 * task stores, kept warm by tailing their changelog partitions
 * read_committed, so that a task moved to this instance restores only the
 * copy's lag instead of the whole changelog.
 *
 * A standby's store is the very folder a task of that partition would open
 * here (`<storeDir>/<partition>`): each batch of changelog records is applied
 * with the store's checkpoint (the next offset to read) in the same LevelDB
 * batch, by the restore's own code (`ChangelogReplay`), and the offset is
 * announced to the group (`LocalStores`). A new assignment stops the
 * standbys it does not keep (their stores closed and kept on disk; a
 * partition that becomes active here is among them) and starts the new
 * ones, without waiting for either: a standby never holds up an assignment,
 * a poll or a stop (not even one whose reader cannot join its group). A
 * task's start waits for its partition's standby to close the store
 * (`released`), so it opens that store and restores only the tail from its
 * checkpoint; a standby of a partition starts only once the one before it
 * there has ended.
 *
 * One reader serves every standby (`kafka/changelogTail.ts`), made at the
 * first standby. A standby's failure never stops the run: it is logged with
 * the reason, counted (`skein_standby_failures_total`) and the standby is
 * dropped; its store stays safe, since a task verifies the checkpoint against
 * the changelog's offsets at its start. A standby of a partition the
 * changelog does not have (the inputs gained partitions while running) fails
 * so with the typed mismatch error a task of it gets (`partitionsAdded.ts`).
 *
 * A store whose changelog is an input topic (`SourceChangelog.ts`, a table
 * read with `sourceChangelog`) follows that topic, read_committed, but only
 * up to its task's committed offset there: a batch with records past it is
 * held (and that partition's fetching with it) until the active task's
 * commits pass them, polling the group's committed offset. Its checkpoint
 * is never beyond the committed offset, so a task starting from it reads
 * only the records between, and its readable store holds committed state.
 *
 * @internal
 */
import { Cause, Deferred, Duration, Effect, Fiber, FiberSet, Queue } from "effect"
import type { Scope } from "effect"
import * as path from "node:path"
import type { KafkaError, RunnerError } from "../../SkeinError.ts"
import * as ChangelogReplay from "../stores/ChangelogReplay.ts"
import { describe } from "../util/errorText.ts"
import type { KafkaAdmin } from "../kafka/admin.ts"
import type { ChangelogTail } from "../kafka/changelogTail.ts"
import type { LocalStores } from "./LocalStores.ts"
import * as PartitionsAdded from "./partitionsAdded.ts"
import * as SourceChangelog from "../stores/SourceChangelog.ts"
import type { RunnerStats } from "./RunnerStats.ts"
import * as StateStore from "../stores/StateStore.ts"

export interface Standbys {
  /**
   * The standbys of a new assignment: stops every standby not in
   * `partitions` (its store closed, kept) and starts the new ones. Returns at
   * once: it waits for no standby to stop or start.
   */
  readonly update: (partitions: ReadonlyArray<number>) => Effect.Effect<void>
  /** Completes once no standby of `partition` runs here (its store is closed). */
  readonly released: (partition: number) => Effect.Effect<void>
  /** True while `partition` has a standby here (its store is in use). */
  readonly has: (partition: number) => boolean
  /**
   * `partition`'s standby store while it is readable: following its
   * changelog, with nothing in it that the changelog does not hold (a kept
   * store whose last commit is still unconfirmed is not readable).
   */
  readonly readable: (partition: number) => StateStore.StateStore | undefined
}

/** How standbys follow a source-topic changelog (`changelog` is then that topic). */
export interface SourceFollow {
  readonly toWrite: SourceChangelog.ToWrite
  /** The task's committed offset of the topic's partition (its earliest offset when none). */
  readonly committed: (partition: number) => Effect.Effect<number, KafkaError>
  /** How often a held batch asks for the committed offset again. */
  readonly pollInterval: Duration.DurationInput
}

export const make = (options: {
  readonly changelog: string
  /** Set when the changelog is an input topic: followed up to the task's committed offset. */
  readonly source?: SourceFollow | undefined
  /** The task's input topics: a changelog partition count that differs from theirs is a typed mismatch. */
  readonly inputTopics: ReadonlyArray<string>
  readonly storeDir: string
  readonly admin: KafkaAdmin
  /** The shared reader, made at the first standby. */
  readonly tail: Effect.Effect<ChangelogTail, RunnerError>
  readonly localStores: LocalStores
  readonly stats: RunnerStats
}): Effect.Effect<Standbys, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { admin, changelog, localStores, stats, storeDir } = options
    /** Every standby's fiber: interrupted together when the runner's scope closes. */
    const all = yield* FiberSet.make<void>()
    /** The latest standby fiber of each partition (running, or stopping). */
    const fibers = new Map<number, Fiber.RuntimeFiber<void>>()
    const current = new Set<number>()
    /** The standby stores queries may read (`readable`). */
    const readableStores = new Map<number, StateStore.StateStore>()

    /** Keeps `partition`'s store warm until interrupted. */
    const follow = (partition: number): Effect.Effect<void> =>
      Effect.gen(function*() {
        const store = yield* StateStore.open(path.join(storeDir, String(partition)))
        const range = yield* admin.offsetRange(changelog, partition)
        if (partition >= range.partitions) {
          // The inputs gained partitions while running: a changelog partition that does not exist
          // is never followed as empty (nor reported warm or announced); the failure below says why.
          return yield* PartitionsAdded.storeMissing(admin, options.inputTopics, changelog, partition, range.partitions)
        }
        const checkpoint = yield* store.checkpoint
        if (options.source !== undefined) return yield* followSource(partition, store, checkpoint, range.low, options.source)
        let start = ChangelogReplay.start(checkpoint, { topic: changelog, partition }, range)
        // A store an active task left: kept only if the changelog holds the commit that wrote it last.
        let lastCommit = start.mode === "tail" && typeof checkpoint === "object"
          ? ChangelogReplay.checkLastCommit(checkpoint)
          : undefined
        if (lastCommit !== undefined && range.end < lastCommit.until) {
          start = { mode: "full", reason: ChangelogReplay.lostReason(lastCommit) }
          lastCommit = undefined
        }
        let position = range.low
        if (start.mode === "full") {
          localStores.remove(partition)
          yield* store.clear
          yield* Effect.logInfo(`standby ${partition}: reading its changelog in full (${start.reason})`)
        } else {
          position = start.from
        }
        // Until the last commit is found, the checkpoint (which names it) stays as it is.
        if (lastCommit === undefined) yield* store.replay([], { topic: changelog, partition, offset: position })
        localStores.set(partition, position)
        stats.setStandby(partition, position, Math.max(0, range.end - position))
        const tail = yield* options.tail
        // The release first, the follow interruptible: a follow waiting for the reader's join
        // (one that never comes) never holds up the standby's stop. `unfollow` of a partition
        // not followed does nothing; no other standby of it runs before this one ends.
        // Added after the store opened: runs before it closes, so no query reads a closed store.
        yield* Effect.addFinalizer(() =>
          Effect.zipRight(
            tail.unfollow(partition),
            Effect.sync(() => {
              readableStores.delete(partition)
              stats.removeStandby(partition)
            })
          )
        )
        if (lastCommit === undefined) readableStores.set(partition, store)
        const events = yield* tail.follow(partition, position)
        yield* Effect.logInfo(`standby ${partition}: following ${changelog} from offset ${position}`)
        const take = Effect.raceFirst(Queue.take(events), Deferred.await(tail.crashed))
        for (;;) {
          const event = yield* take
          const next = Math.max(position, event.next)
          const records = event._tag === "Records" ? event.records.filter((r) => r.offset >= position) : []
          const found = lastCommit?.feed(records, next) ?? "held"
          if (found === "lost" && lastCommit !== undefined) {
            // The store holds state no committed record backs: emptied, so the partition's task restores in full.
            const reason = ChangelogReplay.lostReason(lastCommit)
            readableStores.delete(partition)
            localStores.remove(partition)
            yield* Effect.ensuring(store.clear, Effect.sync(() => event._tag === "Records" && event.ack()))
            stats.recordStandbyFailure()
            current.delete(partition)
            return yield* Effect.logWarning(
              `standby ${partition} dropped: ${reason}. Its store was emptied: a task of partition ${partition} ` +
                `starting here restores in full`
            )
          }
          if (found === "held") {
            lastCommit = undefined
            readableStores.set(partition, store)
          }
          const checkpoint = found === "held" ? { topic: changelog, partition, offset: next } : undefined
          if (event._tag === "Records") {
            // A batch may begin before the position (fetched from a committed transaction's start).
            yield* Effect.ensuring(ChangelogReplay.apply(store, records, checkpoint), Effect.sync(event.ack))
          } else if (next > position && checkpoint !== undefined) {
            yield* store.replay([], checkpoint)
          }
          position = next
          localStores.set(partition, position)
          stats.setStandby(partition, position, Math.max(0, event.highWatermark - position))
        }
      }).pipe(
        Effect.scoped,
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause) ? Effect.interrupt : Effect.gen(function*() {
            stats.recordStandbyFailure()
            current.delete(partition)
            yield* Effect.logWarning(
              `standby ${partition} dropped: ${describe(Cause.squash(cause))}. Its store is kept; a task of ` +
                `partition ${partition} starting here checks its checkpoint against the changelog as always`
            )
          })
        ),
        Effect.annotateLogs({ standby: partition })
      )

    /** Keeps `partition`'s store warm from its source topic, up to the task's committed offset there. */
    const followSource = (
      partition: number,
      store: StateStore.StateStore,
      checkpoint: StateStore.Checkpoint | "missing" | "unreadable",
      low: number,
      source: SourceFollow
    ) =>
      Effect.gen(function*() {
        let limit = yield* source.committed(partition)
        const start = SourceChangelog.start(checkpoint, { topic: changelog, partition }, low, limit)
        let position = low
        if (start.mode === "full") {
          localStores.remove(partition)
          yield* store.clear
          yield* store.replay([], { topic: changelog, partition, offset: position })
          yield* Effect.logInfo(`standby ${partition}: reading its source topic in full (${start.reason})`)
        } else {
          position = start.from
        }
        localStores.set(partition, position)
        stats.setStandby(partition, position, Math.max(0, limit - position))
        const tail = yield* options.tail
        yield* Effect.addFinalizer(() =>
          Effect.zipRight(
            tail.unfollow(partition),
            Effect.sync(() => {
              readableStores.delete(partition)
              stats.removeStandby(partition)
            })
          )
        )
        readableStores.set(partition, store)
        const events = yield* tail.follow(partition, position)
        yield* Effect.logInfo(`standby ${partition}: following ${changelog} from offset ${position}, up to its task's committed offset`)
        const take = Effect.raceFirst(Queue.take(events), Deferred.await(tail.crashed))
        /** Waits until the task's commits pass `offset`. */
        const committedPast = (offset: number) =>
          Effect.whileLoop({
            while: () => limit <= offset,
            body: () =>
              Effect.zipRight(
                Effect.sleep(source.pollInterval),
                Effect.map(source.committed(partition), (committed) => {
                  limit = Math.max(limit, committed)
                })
              ),
            step: () => undefined
          })
        for (;;) {
          const event = yield* take
          const records = event._tag === "Records" ? event.records.filter((r) => r.offset >= position) : []
          const last = records[records.length - 1]
          const apply = Effect.gen(function*() {
            if (last !== undefined) yield* committedPast(last.offset)
            // Never past the committed offset: a task starting from the checkpoint keeps it.
            const next = Math.max(position, Math.min(event.next, limit))
            if (records.length > 0 || next > position) {
              yield* store.replay(SourceChangelog.writes(records, source.toWrite), { topic: changelog, partition, offset: next })
            }
            position = next
          })
          yield* event._tag === "Records" ? Effect.ensuring(apply, Effect.sync(event.ack)) : apply
          localStores.set(partition, position)
          stats.setStandby(partition, position, Math.max(0, event.highWatermark - position))
        }
      })

    /** Waits for the standby fiber of `partition` (if any) to end. */
    const released = (partition: number): Effect.Effect<void> =>
      Effect.suspend(() => {
        const fiber = fibers.get(partition)
        return fiber === undefined ? Effect.void : Effect.asVoid(Fiber.await(fiber))
      })

    /** Interrupts `partition`'s standby without waiting for it to end. */
    const stop = (partition: number) =>
      Effect.suspend(() => {
        current.delete(partition)
        const fiber = fibers.get(partition)
        return fiber === undefined ? Effect.void : Effect.asVoid(Fiber.interruptFork(fiber))
      })

    /** Starts `partition`'s standby once the one before it there has ended. */
    const start = (partition: number) =>
      Effect.gen(function*() {
        const previous = fibers.get(partition)
        const fiber = yield* FiberSet.run(
          all,
          Effect.zipRight(previous === undefined ? Effect.void : Effect.asVoid(Fiber.await(previous)), follow(partition))
        )
        fibers.set(partition, fiber)
        fiber.addObserver(() => {
          if (fibers.get(partition) === fiber) fibers.delete(partition)
        })
      })

    return {
      has: (partition) => current.has(partition),
      readable: (partition) => readableStores.get(partition),
      released,
      update: (partitions) =>
        Effect.gen(function*() {
          const wanted = new Set(partitions)
          for (const partition of [...current]) if (!wanted.has(partition)) yield* stop(partition)
          for (const partition of [...wanted].sort((a, b) => a - b)) {
            if (current.has(partition)) continue
            current.add(partition)
            yield* start(partition)
          }
        })
    }
  })
