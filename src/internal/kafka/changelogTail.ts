/**
 * Follows changelog partitions as they grow, read_committed, for standby
 * replicas (`Standbys.ts`): never an uncommitted write.
 *
 * kafkajs has no manual `assign()`, so, like the restore's reader
 * (`changelogReader.ts`), this is a consumer in a private group of its own
 * (the only member, assigned every partition) with every partition paused
 * except the ones followed. A followed partition's batches arrive on its own
 * queue, and kafkajs waits for each to be acknowledged before it fetches on.
 *
 * @internal
 */
import { Deferred, Effect, Queue } from "effect"
import type { Scope } from "effect"
import type { Consumer } from "kafkajs"
import { KafkaError } from "../../SkeinError.ts"
import { connectOrDisconnect } from "./client.ts"
import type { Kafka } from "./client.ts"
import { consumerRetry } from "./consumer.ts"
import type { ChangelogRecord } from "./changelogReader.ts"
import { changelogRecords } from "./changelogReader.ts"
import { toKafkaError } from "./errors.ts"

/** What a followed partition's reader sees. */
export type TailEvent =
  /** Records, and the next offset to read after them (past any filtered record); `ack` lets kafkajs fetch on. */
  | {
    readonly _tag: "Records"
    readonly records: ReadonlyArray<ChangelogRecord>
    readonly next: number
    readonly highWatermark: number
    readonly ack: () => void
  }
  /** kafkajs moved past records it does not hand over (commit markers, aborted records). */
  | { readonly _tag: "Position"; readonly next: number; readonly highWatermark: number }

export interface ChangelogTail {
  /**
   * Reads `partition` from `from` on, until `unfollow`: its events, in order.
   * Fails when the reader crashed (it stays crashed).
   */
  readonly follow: (partition: number, from: number) => Effect.Effect<Queue.Dequeue<TailEvent>, KafkaError>
  /** Stops reading `partition`; a batch waiting for its acknowledgement is released. */
  readonly unfollow: (partition: number) => Effect.Effect<void>
  /** Completes with the reader's failure once it crashed: every follower ends with it. */
  readonly crashed: Deferred.Deferred<never, KafkaError>
}

interface Followed {
  position: number
  readonly events: Queue.Queue<TailEvent>
  readonly pending: Set<() => void>
}

/** A connected tail reader of `topic` in group `groupId`; disconnected when the scope closes. */
export const make = (
  kafka: Kafka,
  options: { readonly topic: string; readonly groupId: string }
): Effect.Effect<ChangelogTail, KafkaError, Scope.Scope> =>
  Effect.gen(function*() {
    const { topic } = options
    const joined = yield* Deferred.make<void>()
    const crashed = yield* Deferred.make<never, KafkaError>()
    const access = { topics: [topic], topicOperation: "READ", group: options.groupId, groupOperation: "READ" } as const
    const followed = new Map<number, Followed>()
    let assigned: ReadonlyArray<number> = []
    let failed = false

    const consumer: Consumer = kafka.consumer({
      groupId: options.groupId,
      readUncommitted: false,
      maxWaitTimeInMs: 500,
      maxBytesPerPartition: 1024 * 1024,
      retry: consumerRetry
    })
    consumer.on(consumer.events.GROUP_JOIN, (event) => {
      assigned = event.payload.memberAssignment[topic] ?? []
      if (assigned.length > 0) consumer.pause([{ topic, partitions: [...assigned] }])
      // A rejoin (after a retriable crash) starts over from nothing committed: continue where each follower is.
      for (const [partition, follower] of followed) {
        consumer.seek({ topic, partition, offset: String(follower.position) })
        consumer.resume([{ topic, partitions: [partition] }])
      }
      Deferred.unsafeDone(joined, Effect.void)
    })
    consumer.on(consumer.events.END_BATCH_PROCESS, (event) => {
      const follower = followed.get(event.payload.partition)
      // A batch of only filtered records (markers, aborted ones) is resolved by kafkajs itself.
      if (follower === undefined || event.payload.batchSize !== 0) return
      const next = Number(event.payload.lastOffset) + 1
      follower.position = Math.max(follower.position, next)
      Queue.unsafeOffer(follower.events, {
        _tag: "Position",
        next,
        highWatermark: Number(event.payload.highWatermark)
      })
    })
    consumer.on(consumer.events.CRASH, (event) => {
      if (event.payload.restart) return
      failed = true
      const error = toKafkaError("standby changelog consumer", access)(event.payload.error)
      Deferred.unsafeDone(
        crashed,
        Effect.fail(new KafkaError({ reason: "Crashed", operation: error.operation, cause: error.cause }))
      )
      // No join is coming any more: a follower waiting for one sees the crash instead.
      Deferred.unsafeDone(joined, Effect.void)
    })

    yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          await connectOrDisconnect(consumer, () => consumer.subscribe({ topics: [topic], fromBeginning: true }))
          await consumer.run({
            autoCommit: false,
            partitionsConsumedConcurrently: 64,
            eachBatch: async ({ batch, isStale }) => {
              const follower = followed.get(batch.partition)
              if (follower === undefined || isStale() || batch.messages.length === 0) return
              const records = changelogRecords(batch)
              const next = Number(batch.lastOffset()) + 1
              await new Promise<void>((resolve) => {
                const ack = () => {
                  follower.pending.delete(ack)
                  follower.position = Math.max(follower.position, next)
                  resolve()
                }
                follower.pending.add(ack)
                Queue.unsafeOffer(follower.events, {
                  _tag: "Records",
                  records,
                  next,
                  highWatermark: Number(batch.highWatermark),
                  ack
                })
              })
            }
          })
        },
        catch: toKafkaError("standby changelog consumer.run", access)
      }),
      () =>
        Effect.promise(async () => {
          for (const follower of followed.values()) for (const ack of [...follower.pending]) ack()
          await consumer.disconnect().catch(() => undefined)
        })
    )

    const unfollow = (partition: number): Effect.Effect<void> =>
      Effect.suspend(() => {
        const follower = followed.get(partition)
        if (follower === undefined) return Effect.void
        followed.delete(partition)
        for (const ack of [...follower.pending]) ack()
        if (!failed) {
          try {
            consumer.pause([{ topic, partitions: [partition] }])
          } catch {
            // No consumer group to pause in (before its first join, or disconnected at the end): nothing is fetched then.
          }
        }
        return Queue.shutdown(follower.events)
      })

    const follow: ChangelogTail["follow"] = (partition, from) =>
      Effect.gen(function*() {
        // Not a race with the crash: a follow runs uninterruptibly (acquired), where a race's loser could not be interrupted.
        yield* Deferred.await(joined)
        if (failed) return yield* Deferred.await(crashed)
        yield* unfollow(partition)
        const events = yield* Queue.unbounded<TailEvent>()
        followed.set(partition, { position: from, events, pending: new Set() })
        yield* Effect.try({
          try: () => {
            consumer.seek({ topic, partition, offset: String(from) })
            consumer.resume([{ topic, partitions: [partition] }])
          },
          catch: toKafkaError("standby changelog seek", access)
        })
        return events
      })

    return { follow, unfollow, crashed }
  })
