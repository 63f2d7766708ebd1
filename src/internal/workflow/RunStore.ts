/**
 * A task's run store: what durable workflows of input partition N have done,
 * so that a redelivered record's completed run is read back instead of re-run
 * and a partial run resumes after its last completed step.
 *
 * Kafka alone holds it: a compacted topic per transformer
 * (`{applicationId}-{name}-runs`, co-partitioned with the input), written by
 * a fenced transactional producer of the task's own (transactional id
 * `{applicationId}-runs-{partition}`, so a zombie's late step is fenced) and
 * restored read_committed into a LevelDB store of the task before its first
 * record. Each write commits its own transaction before it returns: a step's
 * result is durable before the workflow goes on, a run's completion before the
 * batch that emits its outputs commits.
 *
 * Entries (keys of the topic and the store, values JSON):
 * - `step/{executionId}/{attempt}/{activity}`: an activity's encoded success;
 *   failures are never stored (a transient error must not become permanent).
 * - `done/{executionId}`: a completed run's encoded success. Completing a run
 *   deletes its step entries in the same transaction.
 *
 * @internal
 */
import { Effect, FiberRef, Option } from "effect"
import type { KafkaError, StateStoreError, TaskMigrated } from "../../SkeinError.ts"
import type { FencedProducer } from "../kafka/producer.ts"
import type { StateStore, StoreWrite } from "../StateStore.ts"

export interface RunStore {
  readonly topic: string
  readonly partition: number
  /** The encoded success of a completed run. */
  readonly completed: (executionId: string) => Effect.Effect<Option.Option<unknown>, StateStoreError>
  /** The encoded success of a completed step. */
  readonly step: (executionId: string, activity: string, attempt: number) => Effect.Effect<Option.Option<unknown>, StateStoreError>
  /** Makes a step's success durable (its own transaction), then keeps it locally. */
  readonly saveStep: (
    executionId: string,
    activity: string,
    attempt: number,
    encoded: unknown
  ) => Effect.Effect<void, RunStoreWriteError>
  /** Makes a run's completion durable and deletes its steps (one transaction). */
  readonly complete: (executionId: string, encoded: unknown) => Effect.Effect<void, RunStoreWriteError>
}

/** Why a run-store write failed: the broker (retried by a rewind), a newer owner, or the local store. */
export type RunStoreWriteError = KafkaError | TaskMigrated | StateStoreError

/** The run store topic of a transformer in an application. */
export const topicOf = (applicationId: string, transformer: { readonly name: string }): string =>
  `${applicationId}-${transformer.name}-runs`

/** The transactional id of task `partition`'s run-store producer. */
export const transactionalId = (applicationId: string, partition: number): string => `${applicationId}-runs-${partition}`

const stepKey = (executionId: string, activity: string, attempt: number) => `step/${executionId}/${attempt}/${activity}`
const stepsOf = (executionId: string) => `step/${executionId}/`
const doneKey = (executionId: string) => `done/${executionId}`

const parse = (stored: string | undefined): Option.Option<unknown> =>
  stored === undefined ? Option.none() : Option.some(JSON.parse(stored))

/**
 * The run store of task `partition` over its restored local store and its
 * fenced producer. Writes are one at a time: a producer has one transaction.
 */
export const make = (options: {
  readonly topic: string
  readonly partition: number
  readonly store: StateStore
  readonly producer: FencedProducer
}): Effect.Effect<RunStore> =>
  Effect.map(Effect.makeSemaphore(1), (lock): RunStore => {
    const { partition, producer, store, topic } = options
    const write = (writes: ReadonlyArray<StoreWrite>) =>
      lock.withPermits(1)(
        producer.commit(writes.map((w) => ({ topic, partition, key: w.key, value: w.value })), { groupId: "", offsets: [] }).pipe(
          Effect.flatMap((appended) => {
            const batch = appended.find((a) => a.topic === topic && a.partition === partition)
            return store.write(writes, batch === undefined ? undefined : { topic, partition, offset: batch.baseOffset })
          })
        )
      )
    return {
      topic,
      partition,
      completed: (executionId) => Effect.map(store.get(doneKey(executionId)), parse),
      step: (executionId, activity, attempt) => Effect.map(store.get(stepKey(executionId, activity, attempt)), parse),
      saveStep: (executionId, activity, attempt, encoded) =>
        write([{ key: stepKey(executionId, activity, attempt), value: JSON.stringify(encoded ?? null) }]),
      complete: (executionId, encoded) =>
        Effect.flatMap(store.keys(stepsOf(executionId)), (steps) =>
          write([
            ...steps.map((key): StoreWrite => ({ key, value: null })),
            { key: doneKey(executionId), value: JSON.stringify(encoded ?? null) }
          ]))
    }
  })

/**
 * The run store of the task whose records the current fiber processes
 * (`None`: the transformer keeps no runs, or the fiber is not in a task).
 */
export const current: FiberRef.FiberRef<Option.Option<RunStore>> = FiberRef.unsafeMake(Option.none<RunStore>())
