/**
 * A `DatabaseSink` under `TestDriver`, on the `SqlClient` the program
 * provides: its offsets and owner epochs as a runner keeps them.
 *
 * - A partition's first batch claims it in the sink's offsets table (the
 *   owner epoch bumped, the positions read), as a task does when it starts.
 * - Each batch commits its rows, its dead letters (the outbox) and its
 *   offsets in one transaction, the offsets' update conditional on the
 *   epoch; the dead letters then go to the driver's dead letter topic and
 *   leave the outbox.
 * - `takeOver` bumps a partition's epoch as a new owner's task would: the
 *   driver's next batch of it fails the epoch check and rolls back
 *   (`TaskMigrated`).
 * - A batch that did not commit (rejected, rolled back, or ended by a fatal
 *   error) leaves the partition unclaimed: its next batch claims it again and
 *   starts at the database's positions, so the records piped since then run
 *   again, as a restarted task's would after seeking there. Records piped at
 *   offsets below the positions (a second driver on the same database and
 *   application id) are skipped, as a task seeks past them.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Either, Option } from "effect"
import type { DatabaseError, KafkaError, TaskMigrated } from "../../SkeinError.ts"
import type * as Topic from "../../Topic.ts"
import type { Transformer } from "../../Transformer.ts"
import type * as Batch from "../runtime/batch.ts"
import type { FetchedRecord } from "../kafka/consumer.ts"
import { type BatchFailed, runBatch } from "./DatabaseTask.ts"
import * as SinkStore from "./SinkStore.ts"

/** A partition the driver's task holds: its epoch, and where each input topic's uncommitted records begin. */
interface Claim {
  readonly epoch: number
  readonly next: Map<string, number>
}

export interface DriverSink<E, R> {
  /** Keeps a piped record of the sink's inputs: a claim runs the records past the database's positions again. */
  readonly piped: (record: FetchedRecord) => void
  /**
   * A batch of `partition` as its task runs it (see the module's comment):
   * `slices` are the records just piped; the batch runs the partition's
   * records from the claim's positions on. The result's outputs are the dead
   * letters published.
   */
  readonly process: <E2>(
    sql: SqlClient.SqlClient,
    partition: number,
    slices: ReadonlyArray<Batch.Slice>,
    run: (slices: ReadonlyArray<Batch.Slice>) => Effect.Effect<Batch.TaskBatchResult<E>, E2, R>
  ) => Effect.Effect<Batch.TaskBatchResult<E>, E2 | BatchFailed<E> | DatabaseError | KafkaError | TaskMigrated, R>
  /** The offsets table's rows of the driver's application id. */
  readonly positions: (sql: SqlClient.SqlClient) => Effect.Effect<ReadonlyArray<SinkStore.Position>, DatabaseError>
  /** Another owner takes `partition`: its epoch bumped in the database. The new epoch. */
  readonly takeOver: (sql: SqlClient.SqlClient, partition: number) => Effect.Effect<number, DatabaseError>
}

export const make = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  tables: SinkStore.Tables,
  options: Pick<Batch.Options, "deadLetterTopic" | "messageLimits"> & { readonly groupId: string }
): DriverSink<E, R> => {
  const topics = transformer.inputs.map((topic) => topic.name)
  const log = new Map<string, Array<FetchedRecord>>()
  const claims = new Map<number, Claim>()
  let ensured = false
  const logOf = (topic: string, partition: number): Array<FetchedRecord> => {
    const key = `${topic}\u0000${partition}`
    const existing = log.get(key)
    if (existing !== undefined) return existing
    const created: Array<FetchedRecord> = []
    log.set(key, created)
    return created
  }
  const storeOf = (sql: SqlClient.SqlClient) =>
    Effect.gen(function*() {
      const store = SinkStore.make(sql, tables)
      if (!ensured) {
        yield* store.ensure
        ensured = true
      }
      return store
    })

  /** The partition's records from the claim's positions on, a slice per input topic that has some. */
  const pending = (partition: number, claim: Claim): ReadonlyArray<Batch.Slice> =>
    topics.flatMap((topic) => {
      const records = logOf(topic, partition)
      const from = claim.next.get(topic) ?? 0
      return records.length > from
        ? [{ topic, partition, records: records.slice(from), endOffset: records.length }]
        : []
    })

  const process: DriverSink<E, R>["process"] = (sql, partition, slices, run) =>
    Effect.gen(function*() {
      const store = yield* storeOf(sql)
      const published: Array<Topic.EncodedRecord> = []
      let claim = claims.get(partition)
      if (claim === undefined) {
        const claimed = yield* store.claim(options.groupId, partition, topics, new Map())
        const next = new Map(topics.map((topic) => [topic, claimed.positions.get(topic) ?? 0]))
        // Dead letters a previous owner committed and never published: published now.
        if (claimed.pending.length > 0) {
          published.push(...claimed.pending)
          yield* store.published(options.groupId, topics.map((topic) => ({ topic, partition, offset: next.get(topic) ?? 0 })))
        }
        claim = { epoch: claimed.epoch, next }
        claims.set(partition, claim)
      }
      const held = claim
      // A wall-clock advance runs no records (a sink has no timers).
      const batch = slices.length === 0 ? [] : pending(partition, held)
      const body = Effect.gen(function*() {
        const { deadLetters, result } = yield* runBatch(transformer, batch, run(batch), { ...options, onRetry: () => undefined })
        const offsets = batch.map((slice, i) => ({ topic: slice.topic, partition, offset: result.cuts[i]!.offset }))
        const moved = result.cuts.some((cut) => cut.kept > 0) || result.processed > 0
        if (moved) yield* store.commit(options.groupId, partition, held.epoch, offsets, deadLetters)
        return { result, deadLetters, offsets, moved }
      })
      const committed = yield* Effect.either(store.transaction(body))
      if (Either.isLeft(committed)) {
        // Rolled back: the next batch claims the partition again, from the database's positions.
        claims.delete(partition)
        return yield* Effect.fail(committed.left)
      }
      const { deadLetters, moved, offsets, result } = committed.right
      if (moved) {
        for (const offset of offsets) held.next.set(offset.topic, offset.offset)
        // Published to the driver's dead letter topic (the caller appends the outputs): out of the outbox.
        if (deadLetters.length > 0) yield* store.published(options.groupId, offsets)
      }
      // A fatal error: what it ended committed; the next batch claims again and runs the failed record first.
      if (Option.isSome(result.failure)) claims.delete(partition)
      return { ...result, outputs: [...published, ...deadLetters] }
    })

  return {
    piped: (record) => {
      logOf(record.topic, record.partition).push(record)
    },
    process,
    positions: (sql) => Effect.flatMap(storeOf(sql), (store) => store.positions(options.groupId)),
    takeOver: (sql, partition) =>
      Effect.flatMap(storeOf(sql), (store) =>
        Effect.map(store.claim(options.groupId, partition, topics, new Map()), (claimed) => claimed.epoch))
  }
}
