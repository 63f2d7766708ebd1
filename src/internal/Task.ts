/**
 * A task: partition N of every input topic, with its fenced transactional
 * producer (or, at-least-once, its plain producer) and its state store.
 *
 * Startup order, enforced by the types: producer -> fence (a `FencedProducer`)
 * -> committed offsets and changelog end are final -> restore the store from
 * its changelog partition -> seek -> resume. Teardown (stop fetching, close
 * and delete the store, release the producer) requires the batch lock.
 *
 * @internal
 */
import { Effect, Exit, Option, Scope } from "effect"
import * as path from "node:path"
import type { RunnerError } from "../SkeinError.ts"
import { OffsetOutOfRange } from "../SkeinError.ts"
import type { TopicPartition } from "../TopicPartition.ts"
import type { BatchLockHeld } from "./BatchLock.ts"
import type { KafkaAdmin } from "./kafka/admin.ts"
import type { ChangelogReader } from "./kafka/changelogReader.ts"
import type { Kafka } from "./kafka/client.ts"
import type { GroupConsumer } from "./kafka/consumer.ts"
import * as Producer from "./kafka/producer.ts"
import type { AtLeastOnceProducer, FencedProducer, RestorePermit } from "./kafka/producer.ts"
import type { ProcessingGuarantee } from "../SkeinConfig.ts"
import * as StateStore from "./StateStore.ts"
import { makeStateCache } from "./StateCache.ts"
import type { StateCache } from "./StateCache.ts"

/** Decoded states a task keeps in memory, on top of its store. */
const stateCacheCapacity = 100_000
import type { Duration } from "effect"

/** How a task delivers its work: one transaction per batch, or acknowledged sends. */
export type Delivery =
  | { readonly _tag: "ExactlyOnce"; readonly producer: FencedProducer }
  | { readonly _tag: "AtLeastOnce"; readonly producer: AtLeastOnceProducer }

export interface Task {
  readonly partition: number
  readonly inputs: ReadonlyArray<TopicPartition>
  readonly delivery: Delivery
  readonly store: Option.Option<StateStore.StateStore>
  /** The store's committed states, decoded. */
  readonly cache: StateCache
  readonly scope: Scope.CloseableScope
  readonly restored: number
}

/** What every task of a runner shares. */
export interface TaskContext {
  readonly kafka: Kafka
  readonly admin: KafkaAdmin
  readonly consumer: GroupConsumer
  readonly applicationId: string
  readonly inputTopics: ReadonlyArray<string>
  readonly changelog: Option.Option<{ readonly topic: string; readonly reader: Effect.Effect<ChangelogReader, RunnerError> }>
  readonly storeDir: string
  readonly transactionTimeout: Duration.Duration
  readonly processingGuarantee: ProcessingGuarantee
  readonly maxMessageBytes: number
  /** An output topic's size limit once known (the producer splits its sends by it). */
  readonly limitOf?: ((topic: string) => number | undefined) | undefined
  /** Restore progress of a partition's store: records read so far of `total`. */
  readonly onRestoreProgress: (partition: number, restored: number, total: number) => void
}

/** The transactional id of task `partition`: static, so a new owner fences the old one. */
export const transactionalId = (applicationId: string, partition: number): string => `${applicationId}-${partition}`

/**
 * The next offset to read of each input partition, read after fencing: only
 * then are they final (kafkajs's own reading at group sync may predate it).
 */
const committedOffsets = (context: TaskContext, _permit: RestorePermit, partition: number) =>
  Effect.gen(function*() {
    const committed = yield* context.admin.committedOffsets(context.applicationId, context.inputTopics, partition)
    return yield* Effect.forEach(context.inputTopics, (topic) =>
      Effect.gen(function*() {
        const range = yield* context.admin.offsetRange(topic, partition)
        const offset = committed.get(topic) ?? -1
        if (offset < 0) return { topic, partition, offset: range.low }
        if (offset < range.low) {
          return yield* Effect.fail(
            new OffsetOutOfRange({ topic, partition, committed: offset, earliest: range.low })
          )
        }
        return { topic, partition, offset }
      }))
  })

/** Restores `store` from the task's changelog partition, up to its end offset (stable once fenced). */
const restore = (
  context: TaskContext,
  permit: RestorePermit,
  store: StateStore.StateStore,
  partition: number
): Effect.Effect<number, RunnerError> =>
  Option.match(context.changelog, {
    onNone: () => Effect.succeed(0),
    onSome: (changelog) =>
      Effect.gen(function*() {
        const range = yield* context.admin.offsetRange(changelog.topic, partition)
        const reader = yield* changelog.reader
        const total = range.end - range.low
        let restored = 0
        context.onRestoreProgress(partition, 0, total)
        return yield* reader.read(permit, partition, { from: range.low, until: range.end }, (records) =>
          store.write(records.map((r) => ({ key: r.key?.toString("utf8") ?? "", value: r.value?.toString("utf8") ?? null })))
            .pipe(Effect.tap(() => {
              restored += records.length
              context.onRestoreProgress(partition, restored, total)
            })))
      })
  })

/** Starts task `partition`; on failure everything it acquired is released. */
export const start = (context: TaskContext, partition: number): Effect.Effect<Task, RunnerError> =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const inputs = context.inputTopics.map((topic) => ({ topic, partition }))
    return yield* Effect.gen(function*() {
      const delivery: Delivery = context.processingGuarantee === "exactly-once"
        ? {
          _tag: "ExactlyOnce",
          producer: yield* Effect.flatMap(
            Producer.make(context.kafka, {
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
            maxMessageBytes: context.maxMessageBytes,
            limitOf: context.limitOf
          })
        }
      const fenced: RestorePermit = delivery.producer
      const offsets = yield* committedOffsets(context, fenced, partition)
      const store = yield* Option.match(context.changelog, {
        onNone: () => Effect.succeed(Option.none<StateStore.StateStore>()),
        onSome: () => Effect.map(StateStore.open(path.join(context.storeDir, String(partition))), Option.some)
      })
      const restored = yield* Option.match(store, {
        onNone: () => Effect.succeed(0),
        onSome: (s) => restore(context, fenced, s, partition)
      })
      yield* Effect.forEach(offsets, (o) => context.consumer.seek(o, o.offset), { discard: true })
      yield* context.consumer.resume(inputs)
      yield* Effect.addFinalizer(() => context.consumer.pause(inputs))
      const cache = makeStateCache(stateCacheCapacity)
      const task: Task = { partition, inputs, delivery, store, cache, scope, restored }
      return task
    }).pipe(
      Scope.extend(scope),
      Effect.onError((cause) => Scope.close(scope, Exit.failCause(cause)))
    )
  })

/** Tears a task down: stops fetching its partitions, deletes its store, releases its producer. */
export const stop = (task: Task, _held: BatchLockHeld): Effect.Effect<void> => Scope.close(task.scope, Exit.void)
