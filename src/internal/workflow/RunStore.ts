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
 * - `done/{executionId}`: a completed run's encoded success and when it
 *   completed (`{"completedAt":ms,"result":...}`). Completing a run deletes its
 *   step entries in the same transaction; completions older than the
 *   retention are deleted at the task's start and then once an hour, read and
 *   deleted `sweepChunk` at a time (after that, a redelivery of that record
 *   would run it again).
 * - A run whose record is disposed of without completing (skipped or
 *   dead-lettered by a rule: a failed or suspended run) has its step entries
 *   deleted once the batch that disposed of it commits (`forget`).
 *
 * @internal
 */
import { Clock, Duration, Effect, FiberRef, Option, Schema } from "effect"
import type { KafkaError, TaskMigrated } from "../../SkeinError.ts"
import { StateStoreError } from "../../SkeinError.ts"
import type { EncodedRecord } from "../../Topic.ts"
import type { CommitReceipt } from "../runtime/CommitReceipt.ts"
import type { FencedProducer } from "../kafka/producer.ts"
import type { StateStore, StoreWrite } from "../stores/StateStore.ts"

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
  /** Deletes completions older than the retention (a transaction per `sweepChunk` read); returns how many. */
  readonly sweep: Effect.Effect<number, RunStoreWriteError>
  /**
   * Deletes the step entries of runs whose records were disposed of without
   * completing (skipped or dead-lettered), in one transaction; returns how many.
   */
  readonly forget: (executionIds: ReadonlyArray<string>) => Effect.Effect<number, RunStoreWriteError>
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

const StepJson = Schema.parseJson(Schema.Unknown)

const Completion = Schema.parseJson(Schema.Struct({ completedAt: Schema.Number, result: Schema.Unknown }))

/** How often a task deletes expired completions besides at its start. */
const sweepInterval = Duration.hours(1)

/** How many completions a sweep reads at a time (and deletes at most, in one transaction). */
export const sweepChunk = 1_000

/**
 * The run store of task `partition` over its restored local store and its
 * fenced producer. Writes are one at a time: a producer has one transaction.
 */
export const make = <P extends number>(options: {
  readonly topic: string
  readonly partition: P
  /** Task `partition`'s run store: only that task's commits write it. */
  readonly store: StateStore<P>
  /** Commits records to the run store topic in one transaction (a fenced producer's, or memory's): its receipt. */
  readonly commit: (records: ReadonlyArray<EncodedRecord>) => Effect.Effect<CommitReceipt<P>, RunStoreWriteError>
  /** How long a completed run is remembered. */
  readonly retention: Duration.Duration
}): RunStore => {
  const lock = Effect.unsafeMakeSemaphore(1)
  const { partition, store, topic } = options
  let nextSweep = 0
  const write = (writes: ReadonlyArray<StoreWrite>) =>
    lock.withPermits(1)(
      options.commit(writes.map((w) => ({ topic, partition, key: w.key, value: w.value }))).pipe(
        Effect.flatMap((receipt) => {
          const batch = receipt.appended.find((a) => a.topic === topic && a.partition === partition)
          return store.write(receipt, writes, batch === undefined ? undefined : { topic, partition, offset: batch.baseOffset })
        })
      )
    )
  // In chunks: a store holds a week of completions by default, never all read into memory at once.
  const sweep = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    nextSweep = now + Duration.toMillis(sweepInterval)
    const cutoff = now - Duration.toMillis(options.retention)
    let expired = 0
    let after: string | undefined = undefined
    while (true) {
      const entries: ReadonlyArray<readonly [string, string]> = yield* store.entries("done/", { after, limit: sweepChunk })
      const deletes: Array<StoreWrite> = []
      for (const [key, value] of entries) {
        const completion = Schema.decodeUnknownOption(Completion)(value)
        if (Option.isSome(completion) && completion.value.completedAt < cutoff) deletes.push({ key, value: null })
      }
      if (deletes.length > 0) yield* write(deletes)
      expired += deletes.length
      const last = entries[entries.length - 1]
      if (entries.length < sweepChunk || last === undefined) return expired
      after = last[0]
    }
  })
  return {
    topic,
    partition,
    sweep,
    completed: (executionId) =>
      Effect.flatMap(store.get(doneKey(executionId)), (stored) =>
        stored === undefined
          ? Effect.succeedNone
          : Effect.map(
            Effect.mapError(
              Schema.decodeUnknown(Completion)(stored),
              (cause) => new StateStoreError({ operation: `decode the completion of run ${executionId}`, path: store.path, cause })
            ),
            (completion) => Option.some(completion.result)
          )),
    step: (executionId, activity, attempt) =>
      Effect.flatMap(store.get(stepKey(executionId, activity, attempt)), (stored) =>
        stored === undefined
          ? Effect.succeedNone
          : Effect.asSome(Effect.mapError(
            Schema.decodeUnknown(StepJson)(stored),
            (cause) => new StateStoreError({ operation: `decode step ${activity} of run ${executionId}`, path: store.path, cause })
          ))),
    saveStep: (executionId, activity, attempt, encoded) =>
      write([{ key: stepKey(executionId, activity, attempt), value: JSON.stringify(encoded ?? null) }]),
    complete: (executionId, encoded) =>
      Effect.gen(function*() {
        const steps = yield* store.keys(stepsOf(executionId))
        const completedAt = yield* Clock.currentTimeMillis
        yield* write([
          ...steps.map((key): StoreWrite => ({ key, value: null })),
          { key: doneKey(executionId), value: Schema.encodeSync(Completion)({ completedAt, result: encoded ?? null }) }
        ])
        if (completedAt >= nextSweep) yield* sweep
      }),
    forget: (executionIds) =>
      Effect.gen(function*() {
        const steps = yield* Effect.forEach(new Set(executionIds), (id) => store.keys(stepsOf(id)))
        const deletes = steps.flat().map((key): StoreWrite => ({ key, value: null }))
        if (deletes.length > 0) yield* write(deletes)
        return deletes.length
      })
  }
}

/** The commit of a run store written by task `partition`'s own fenced producer (no offsets). */
export const commitWith = <P extends number>(producer: FencedProducer<P>) => (records: ReadonlyArray<EncodedRecord>) =>
  producer.commit(records, { groupId: "", offsets: [] })

/**
 * The run store of the task whose records the current fiber processes
 * (`None`: the transformer keeps no runs, or the fiber is not in a task).
 */
export const current: FiberRef.FiberRef<Option.Option<RunStore>> = FiberRef.unsafeMake(Option.none<RunStore>())
