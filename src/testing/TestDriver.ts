/**
 * Runs a transformer in memory, without a broker, through the same batch
 * code as `Runner.run`: decoding (poison records and the dead letter topic),
 * error rules and their retries, state through its Schema, output encoding
 * and size checks. In the spirit of Kafka Streams' `TopologyTestDriver`.
 *
 * Each `pipe` is one batch of one task (a partition of the inputs, with its
 * own state, as in a run): the batch runs, then what it kept "commits" as
 * the runner's commit does (outputs and changelog records appended to
 * in-memory topics, the state written to the task's in-memory store and
 * cache), and a fatal failure is the error `Runner.run` fails with.
 *
 * @since 0.2.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { randomUUID } from "node:crypto"
import { Clock, Effect, Either, Option, Schema, TestClock } from "effect"
import type { Duration, ParseResult, Scope } from "effect"
import type {
  DatabaseError,
  OutputTooLarge,
  PartitionOutOfRange,
  StateNotStorable,
  StoredStateInvalid,
  TimestampOutOfRange
} from "../SkeinError.ts"
import { DecodeError, EncodeError, KafkaError, StateStoreError, TaskMigrated } from "../SkeinError.ts"
import type * as Timer from "../Timer.ts"
import * as Topic from "../Topic.ts"
import { changelogTopic } from "../Transformer.ts"
import type { Transformer } from "../Transformer.ts"
import * as Batch from "../internal/runtime/batch.ts"
import * as DatabaseTask from "../internal/database/DatabaseTask.ts"
import * as DriverSink from "../internal/database/DriverSink.ts"
import * as SinkStore from "../internal/database/SinkStore.ts"
import * as CommitReceipt from "../internal/runtime/CommitReceipt.ts"
import { headerRecord } from "../internal/codec/headers.ts"
import type { FetchedHeaders, FetchedRecord } from "../internal/kafka/consumer.ts"
import * as ChangelogReplay from "../internal/stores/ChangelogReplay.ts"
import * as MemoryStore from "../internal/stores/memoryStore.ts"
import * as RunStore from "../internal/workflow/RunStore.ts"
import * as Outputs from "../internal/runtime/outputs.ts"
import * as PartitionCounts from "../internal/runtime/partitionCounts.ts"
import { makeStateCache } from "../internal/stores/StateCache.ts"
import type { StateCache } from "../internal/stores/StateCache.ts"
import type { StateStore } from "../internal/stores/StateStore.ts"
import * as Timers from "../internal/runtime/timers.ts"
import { notText, strictText } from "../internal/codec/utf8.ts"

/**
 * The settings of a driver; every one is optional.
 *
 * @example
 * ```ts
 * import type { TestDriver } from "skein/testing"
 *
 * const options: TestDriver.Options = { deadLetterTopic: "word-count-dead-letters", maxMessageBytes: 1024 }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface Options {
  /** Where poison records and dead-lettered ones go (`SkeinConfig.deadLetterTopic`); unset: none. */
  readonly deadLetterTopic?: string | undefined
  /** The size limit of a record, for every output topic (`SkeinConfig.maxMessageBytes`, default 1 MiB). */
  readonly maxMessageBytes?: number | undefined
  /**
   * How far ahead of the driver's clock (Effect's `Clock`: the `TestClock`
   * under `it.effect`) an output's timestamp may be, for every output topic
   * (a topic's `message.timestamp.after.max.ms`; Kafka 4's default is
   * 3,600,000): a later one fails its record with `TimestampOutOfRange`, as
   * a runner does before the broker would refuse it. Unset: any timestamp.
   */
  readonly timestampAfterMaxMs?: number | undefined
  /** The partition count of output topics, for outputs that name their partition; an unlisted topic accepts any. */
  readonly partitions?: Readonly<Record<string, number>> | undefined
  /** Names the changelog topic (`Transformer.changelogTopic`); default `"test"`. */
  readonly applicationId?: string | undefined
  /**
   * Changelog records each task restores its store from before its first
   * batch, as a task restores from its changelog topic after a restart or on
   * a new owner: its state, named stores, timers and stream time. Pass
   * another driver's `records(driver.changelogTopic)`; a task reads the
   * records of its partition, in order.
   *
   * @since 0.6.0
   */
  readonly restoreFrom?: ReadonlyArray<RawRecord> | undefined
}

/**
 * Where and when a piped record is: its headers (text or bytes, by name or
 * as pairs), timestamp (default: the `Clock`'s time, so `TestClock` under
 * `it.effect`) and partition (default 0).
 *
 * @example
 * ```ts
 * import type { TestDriver } from "skein/testing"
 *
 * const at: TestDriver.PipeOptions = { partition: 1, timestamp: 1_700_000_000_000, headers: { source: "test" } }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface PipeOptions {
  readonly headers?: Topic.Headers | undefined
  readonly timestamp?: number | undefined
  readonly partition?: number | undefined
}

/**
 * A record to pipe, typed by its topic.
 *
 * @example
 * ```ts
 * import type { TestDriver } from "skein/testing"
 *
 * const records: ReadonlyArray<TestDriver.Input<string, string>> = [{ key: "fox", value: "fox" }]
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface Input<K, V> extends PipeOptions {
  readonly key: K | null
  readonly value: V
}

/**
 * A record to pipe as bytes, encoded or not (a poison record).
 *
 * @example
 * ```ts
 * import type { TestDriver } from "skein/testing"
 *
 * const poison: TestDriver.RawInput = { key: Buffer.from("k"), value: Buffer.from([0xff, 0xfe]) }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface RawInput extends PipeOptions {
  readonly key: Buffer | null
  readonly value: Buffer | null
}

/**
 * A record of an in-memory topic, in its wire form. `partition` is the one
 * the output named (`undefined`: in a run the producer's partitioner picks it
 * by key); `offset` is its position in the driver's copy of the topic.
 *
 * @example
 * ```ts
 * import type { TestDriver } from "skein/testing"
 *
 * const error = (letter: TestDriver.RawRecord) => letter.headers.find(([name]) => name === "skein.error")?.[1].toString()
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface RawRecord {
  readonly topic: string
  readonly partition: number | undefined
  readonly offset: number
  readonly key: Buffer | null
  readonly value: Buffer | null
  /** Every header as name and value bytes, in order. */
  readonly headers: ReadonlyArray<readonly [string, Buffer]>
  readonly timestamp: number | undefined
}

/**
 * An output record decoded with its topic's codecs (`value` is `null` for a tombstone).
 *
 * @example
 * ```ts
 * import type { TestDriver } from "skein/testing"
 *
 * const pair = (record: TestDriver.OutputRecord<string, number>) => [record.key, record.value] as const
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface OutputRecord<K, V> {
  readonly topic: string
  readonly partition: number | undefined
  readonly offset: number
  readonly key: K | null
  readonly value: V | null
  readonly headers: ReadonlyArray<readonly [string, Buffer]>
  readonly timestamp: number | undefined
}

/**
 * What a pipe fails with: what `Runner.run` would fail with for the batch
 * (the transform's own errors, a poison record without a dead letter topic,
 * an output too large or naming a missing partition, a state that does not
 * encode or read back, a stored state the state Schema no longer reads), an
 * input that does not encode with its topic's codecs, or a `DatabaseSink`'s
 * batch that the owner epoch check rejected after another owner took its
 * partition (`TaskMigrated`: see `TestDriver.takeOver`).
 *
 * @example
 * ```ts
 * import type { TestDriver } from "skein/testing"
 *
 * const tag = <E extends { readonly _tag: string }>(error: TestDriver.PipeError<E>): string => error._tag
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export type PipeError<E> =
  | E
  | DecodeError
  | EncodeError
  | OutputTooLarge
  | PartitionOutOfRange
  | TimestampOutOfRange
  | StateStoreError
  | StateNotStorable
  | StoredStateInvalid
  | TaskMigrated

/**
 * A `DatabaseSink`'s row of its offsets table (`TestDriver.positions`):
 * where an input partition resumes, and the epoch of its latest owner.
 *
 * @example
 * ```ts
 * import type { TestDriver } from "skein/testing"
 *
 * const at = (position: TestDriver.SinkPosition) => `${position.topic}/${position.partition}: epoch ${position.epoch}`
 * ```
 *
 * @since 0.6.0
 * @category models
 */
export interface SinkPosition {
  readonly topic: string
  readonly partition: number
  /** The next offset to process; none while no batch of the partition committed. */
  readonly nextOffset: Option.Option<number>
  /** The epoch of the partition's latest owner (a batch commits only with its task's epoch). */
  readonly epoch: number
}

/**
 * A transformer running in memory.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { TestDriver } from "skein/testing"
 *
 * const program = Effect.gen(function*() {
 *   const driver = yield* TestDriver.make(WordCount)
 *   yield* driver.pipe(Words, "fox", "fox")
 *   yield* driver.pipe(Words, "fox", "fox")
 *   const counts = yield* driver.outputs(Counts) // [{ key: "fox", value: 1, ... }, { key: "fox", value: 2, ... }]
 *   const fox = yield* driver.state("fox") // Option.some(2)
 * })
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface TestDriver<Inputs extends ReadonlyArray<Topic.Any>, S, E, R> {
  /** Encodes a record with the topic's codecs (one of the inputs) and processes it as one batch. */
  readonly pipe: <K, V>(
    topic: Topic.Topic<K, V> & Inputs[number],
    key: K | null,
    value: V,
    options?: PipeOptions
  ) => Effect.Effect<void, PipeError<E>, R>
  /** Processes records of one input topic as one poll: a batch per partition, in order of their first record. */
  readonly pipeAll: <K, V>(
    topic: Topic.Topic<K, V> & Inputs[number],
    records: Iterable<Input<K, V>>
  ) => Effect.Effect<void, PipeError<E>, R>
  /** Processes a record given as bytes (a poison record, say) as one batch. */
  readonly pipeRaw: (topic: Inputs[number] | string, record: RawInput) => Effect.Effect<void, PipeError<E>, R>
  /** The records of a topic so far, decoded with its codecs, in the order they were committed. */
  readonly outputs: <K, V>(topic: Topic.Topic<K, V>) => Effect.Effect<ReadonlyArray<OutputRecord<K, V>>, DecodeError>
  /** The records of a topic so far, in their wire form (the changelog's too: `changelogTopic`). */
  readonly records: (topic: Topic.Any | string) => Effect.Effect<ReadonlyArray<RawRecord>>
  /** The dead letter topic's records so far, byte for byte with their `skein.*` headers (empty without one). */
  readonly deadLetters: Effect.Effect<ReadonlyArray<RawRecord>>
  /** The committed state of a state key in a task (default: task 0, partition 0 of the inputs), decoded. */
  readonly state: (key: string, partition?: number) => Effect.Effect<Option.Option<S>, StateStoreError>
  /** The name of the transformer's changelog topic. */
  readonly changelogTopic: string
  /**
   * Moves the wall clock (`TestClock.adjust`: run under `it.effect` or
   * another `TestClock`) by `duration`, then fires the wall-clock timers due
   * in every task (those restored with `restoreFrom` too), each task's in one
   * batch, as the runner does when no record comes (a pipe fires those due
   * before its records too).
   *
   * @since 0.4.0
   */
  readonly advanceWallClock: (duration: Duration.DurationInput) => Effect.Effect<void, PipeError<E>, R>
  /**
   * Moves a task's stream time (default: task 0) to `time` when later, then
   * fires its stream-time timers due, in one batch: as a record with that
   * timestamp would, without the record. Piped records move it too.
   *
   * @since 0.4.0
   */
  readonly advanceStreamTime: (time: number, options?: { readonly partition?: number | undefined }) => Effect.Effect<void, PipeError<E>, R>
  /**
   * The committed timers of a state key in a task (default: task 0), in time order.
   *
   * @since 0.4.0
   */
  readonly timers: (key: string, partition?: number) => Effect.Effect<ReadonlyArray<Timer.Timer>, StateStoreError | StoredStateInvalid>
  /**
   * A task's committed stream time (default: task 0); -1 before any record with a timestamp.
   *
   * @since 0.4.0
   */
  readonly streamTime: (partition?: number) => Effect.Effect<number, StateStoreError | StoredStateInvalid>
  /**
   * A `DatabaseSink`'s offsets table: the driver's rows of it (under a group
   * id of its own, `<applicationId>-driver-<id>`: its topics are its own),
   * one per input topic and partition its batches claimed, read from the
   * database of the `SqlClient` provided. With a client, a
   * sink's driver keeps them as a runner does: a partition's first batch
   * claims it (its owner epoch bumped), each batch commits its rows, dead
   * letters and offsets in one transaction, conditional on the epoch. Dies
   * for a transformer that is not a sink.
   *
   * @since 0.6.0
   */
  readonly positions: Effect.Effect<ReadonlyArray<SinkPosition>, DatabaseError, SqlClient.SqlClient>
  /**
   * Another owner takes a `DatabaseSink`'s partition (default 0): its owner
   * epoch is bumped in the database, as a new instance's task does when the
   * partition is assigned to it; returns the new epoch. The driver's next
   * batch of that partition is the old owner's: the epoch check rejects it,
   * its rows, dead letters and offsets roll back, and the pipe fails with
   * `TaskMigrated`. The batch after it claims the partition again and runs
   * the records piped since the database's positions, the rejected ones
   * first, as a task that takes the partition back does. Dies for a
   * transformer that is not a sink.
   *
   * @since 0.6.0
   */
  readonly takeOver: (partition?: number) => Effect.Effect<number, DatabaseError, SqlClient.SqlClient>
}

/** A task of the driver: its store, state cache and (a durable workflow's) run store. */
interface DriverTask {
  readonly store: Option.Option<StateStore<number>>
  readonly cache: StateCache
  readonly runs: Option.Option<RunStore.RunStore>
  /** The task's committed timers and stream time (read from its store at its first batch, as a task's). */
  readonly timers: Timers.TimerTable
}

const defaultMaxMessageBytes = 1024 * 1024
const empty = Buffer.alloc(0)

const toBuffer = (value: string | Buffer | null): Buffer | null =>
  value === null ? null : typeof value === "string" ? Buffer.from(value, "utf8") : value

const headerBuffers = (value: Topic.HeaderValue): ReadonlyArray<Buffer> =>
  typeof value === "string" || Buffer.isBuffer(value)
    ? [toBuffer(value) ?? empty]
    : value.map((v) => toBuffer(v) ?? empty)

/** Wire headers by name as fetched headers and as the transform's text view. */
const fetchedHeaders = (headers: Topic.Headers | undefined) => {
  const raw: Record<string, Buffer | ReadonlyArray<Buffer>> = {}
  const text: Record<string, string> = {}
  if (headers === undefined) return { raw, text }
  const byName = headerRecord(headers)
  for (const name of Object.keys(byName)) {
    const values = headerBuffers(byName[name]!)
    Object.defineProperty(raw, name, { value: values.length === 1 ? values[0]! : values, enumerable: true, writable: true })
    Object.defineProperty(text, name, { value: values[0]?.toString("utf8") ?? "", enumerable: true, writable: true })
  }
  return { raw, text }
}

/** Decodes a key or value's wire bytes with its codec. */
const decodePart = <A>(
  part: "key" | "value",
  codec: Topic.AnyCodec<A>,
  bytes: Buffer
): Either.Either<A, ParseResult.ParseError> => {
  if (Topic.isBinary(codec)) return Schema.decodeEither(codec.schema)(bytes)
  const text = strictText(bytes)
  return typeof text === "string" ? Schema.decodeEither(codec)(text) : Either.left(notText(part, bytes))
}

const isKafkaError = (error: unknown): error is KafkaError => error instanceof KafkaError

/**
 * A driver for `transformer`, with empty in-memory topics and state.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { TestDriver } from "skein/testing"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const driver = yield* TestDriver.make(WordCount, { deadLetterTopic: "dlq" })
 *   yield* driver.pipe(Words, "fox", "fox")
 *   yield* driver.pipeRaw(Words, { key: Buffer.from("k"), value: Buffer.from([0xff]) }) // to "dlq"
 *   return yield* driver.deadLetters
 * }))
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  options: Options = {}
): Effect.Effect<TestDriver<Inputs, S, E, R>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const deadLetterTopic = Option.fromNullable(options.deadLetterTopic)
    const maxMessageBytes = options.maxMessageBytes ?? defaultMaxMessageBytes
    const partitions = options.partitions ?? {}
    const changelog = changelogTopic(options.applicationId ?? "test", transformer)
    const runsTopic = RunStore.topicOf(options.applicationId ?? "test", transformer)
    const outputTopicConfig = {
      maxMessageBytes: undefined,
      timestampType: undefined,
      timestampAfterMaxMs: options.timestampAfterMaxMs ?? Infinity,
      timestampBeforeMaxMs: undefined
    }
    const messageLimits = Outputs.makeMessageLimits(maxMessageBytes, () => Effect.succeed(outputTopicConfig), yield* Effect.clock)
    const partitionCounts = PartitionCounts.make((topic) =>
      Effect.succeed(Object.hasOwn(partitions, topic) ? partitions[topic] : undefined)
    )
    // A `DatabaseSink`: its offsets and epochs in the database of the client the pipes run with, under a
    // group id of this driver's own (its in-memory topics are its own: another driver's positions are not theirs).
    const sink = transformer.database === undefined
      ? undefined
      : DriverSink.make(transformer, transformer.database.tables, {
        groupId: `${options.applicationId ?? "test"}-driver-${randomUUID().slice(0, 8)}`,
        deadLetterTopic,
        messageLimits
      })
    const topics = new Map<string, Array<RawRecord>>()
    const inputOffsets = new Map<string, number>()
    const tasks = new Map<number, DriverTask>()
    const lock = yield* Effect.makeSemaphore(1)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        topics.clear()
        tasks.clear()
      })
    )
    const decodeState = Option.map(transformer.state, (codec) => Schema.decodeEither(codec))

    const taskOf = (partition: number): DriverTask => {
      const existing = tasks.get(partition)
      if (existing !== undefined) return existing
      const runStore = transformer.runStore
      const task: DriverTask = {
        store: Option.map(transformer.state, () => MemoryStore.make(`memory:${transformer.name}/${partition}`, partition)),
        cache: makeStateCache(100_000),
        timers: Timers.makeTable(),
        // A durable workflow's run store in memory: its writes go to the driver's copy of the topic.
        runs: runStore === undefined ? Option.none() : Option.some(RunStore.make({
          topic: runsTopic,
          partition,
          store: MemoryStore.make(`memory:${transformer.name}/${partition}.runs`, partition),
          commit: (records) =>
            Effect.sync(() => {
              for (const record of records) append(record)
              return CommitReceipt.issue(partition, [])
            }),
          retention: runStore.retention
        }))
      }
      tasks.set(partition, task)
      return task
    }

    const append = (record: Topic.EncodedRecord, partition?: number) => {
      const log = topics.get(record.topic) ?? []
      topics.set(record.topic, log)
      const byName = record.headers
      const headers = byName === undefined
        ? []
        : Object.keys(byName).flatMap((name) => headerBuffers(byName[name]!).map((v) => [name, v] as const))
      log.push({
        topic: record.topic,
        partition: record.partition ?? partition,
        offset: log.length,
        key: toBuffer(record.key),
        value: toBuffer(record.value),
        headers,
        timestamp: record.timestamp
      })
    }

    /**
     * A sink's batch that failed: its fatal error, or a rejected batch
     * (`TaskMigrated`); the runtime's own errors (a database gone) are defects.
     */
    const sinkFailure = (
      error: DatabaseTask.BatchFailed<E> | DatabaseError | KafkaError | TaskMigrated
    ): Effect.Effect<never, PipeError<E>> => {
      if (error instanceof DatabaseTask.BatchFailed) {
        return Effect.catchIf(Effect.failCause(error.cause), isKafkaError, (kafka) => Effect.die(kafka))
      }
      return error instanceof TaskMigrated ? Effect.fail(error) : Effect.die(error)
    }

    /**
     * Runs one batch of a task as `processSlices` does (its slice, or none for
     * its due timers): the batch, then its commit, then its failure.
     */
    const process = (
      partition: number,
      slices: ReadonlyArray<Batch.Slice>,
      advanceStreamTime?: number
    ): Effect.Effect<void, PipeError<E>, R> =>
      Effect.gen(function*() {
        const restoring = !tasks.has(partition) && options.restoreFrom !== undefined
        const task = taskOf(partition)
        if (restoring && Option.isSome(task.store)) {
          // The task's store as a restore leaves it: the changelog's records of its partition applied in order.
          const changelogRecords = (options.restoreFrom ?? []).flatMap((r) =>
            (r.partition ?? 0) === partition ? [{ offset: r.offset, key: r.key, value: r.value }] : []
          )
          yield* ChangelogReplay.apply(task.store.value, changelogRecords)
        }
        const runOf = (batch: ReadonlyArray<Batch.Slice>) =>
          Batch.run(transformer, task.store, batch, {
            deadLetterTopic,
            stop: Effect.never,
            permits: Option.none(),
            messageLimits,
            partitionCounts,
            cache: task.cache,
            partition,
            timers: task.timers,
            advanceStreamTime
          }).pipe(Effect.locally(RunStore.current, task.runs))
        // A `DatabaseSink`: with the program's SqlClient, the batch as a task runs it (`DriverSink`); without one, no transaction.
        const hooks = transformer.database
        const result = yield* (sink === undefined || hooks === undefined ? runOf(slices) : Effect.gen(function*() {
          const refused = DatabaseTask.keyConcurrencyRefused(hooks, transformer.name)
          if (Option.isSome(refused)) return yield* Effect.die(refused.value)
          const client = yield* SinkStore.currentClient
          return yield* Option.match(client, {
            onNone: () => DatabaseTask.driverBatch(transformer, slices, runOf(slices), { deadLetterTopic, messageLimits }),
            onSome: (sql) => sink.process(sql, partition, slices, runOf)
          })
        }).pipe(Effect.catchAll(sinkFailure)))
        if (result.processed > 0 || result.taskWrites.length > 0) {
          for (const output of result.outputs) append(output)
          if (Option.isSome(task.store)) {
            for (const w of result.writes) append({ topic: changelog, key: w.key, value: w.value }, partition)
            // The in-memory commit happened: the outputs and the changelog records are in the driver's topics.
            yield* task.store.value.write(CommitReceipt.issue(partition, []), result.writes)
          }
          for (const [key, state] of result.states) task.cache.set(key, state)
          Timers.commit(task.timers, result.taskWrites)
          // The runs of records a rule skipped or dead-lettered: their steps go, as the runner's do (in memory nothing fails).
          if (result.disposedRuns.length > 0 && Option.isSome(task.runs)) yield* Effect.orDie(task.runs.value.forget(result.disposedRuns))
        }
        if (Option.isSome(result.failure)) {
          // In memory no lookup reaches a broker: a KafkaError cannot happen, so it would be a defect.
          return yield* Effect.catchIf(Effect.failCause(result.failure.value), isKafkaError, (error) => Effect.die(error))
        }
      })

    const fetched = (topic: string, record: RawInput, now: number): FetchedRecord => {
      const partition = record.partition ?? 0
      const at = `${topic}\u0000${partition}`
      const offset = inputOffsets.get(at) ?? 0
      inputOffsets.set(at, offset + 1)
      const { raw, text } = fetchedHeaders(record.headers)
      const rawHeaders: FetchedHeaders = raw
      const input: FetchedRecord = {
        topic,
        partition,
        offset,
        key: record.key,
        value: record.value,
        headers: text,
        rawHeaders,
        timestamp: record.timestamp ?? now
      }
      sink?.piped(input)
      return input
    }

    const inputNames = new Set(transformer.inputs.map((topic) => topic.name))
    const restoredPartitions = new Set((options.restoreFrom ?? []).map((r) => r.partition ?? 0))
    const notASink = Effect.dieMessage(`TestDriver: ${transformer.name} is not a DatabaseSink: it has no offsets table`)

    /** A task's committed timers, read from its store if no batch has read them yet; `undefined` without the task. */
    const loadedTimers = (partition: number) =>
      Effect.gen(function*() {
        const task = tasks.get(partition)
        if (task === undefined || Option.isNone(task.store)) return undefined
        yield* Timers.load(task.timers, task.store.value, { transformer: transformer.name, partition })
        return task.timers
      })

    const processRaw = (topic: string, records: ReadonlyArray<RawInput>): Effect.Effect<void, PipeError<E>, R> =>
      Effect.gen(function*() {
        if (!inputNames.has(topic)) {
          return yield* Effect.dieMessage(`TestDriver: ${topic} is not an input of ${transformer.name}`)
        }
        const now = yield* Clock.currentTimeMillis
        const byPartition = new Map<number, Array<FetchedRecord>>()
        for (const record of records) {
          const r = fetched(topic, record, now)
          const list = byPartition.get(r.partition)
          if (list === undefined) byPartition.set(r.partition, [r])
          else list.push(r)
        }
        for (const [partition, list] of byPartition) {
          yield* process(partition, [{ topic, partition, records: list, endOffset: list[list.length - 1]!.offset + 1 }])
        }
      }).pipe(lock.withPermits(1))

    const encodeInput = <K, V>(topic: Topic.Topic<K, V>, input: Input<K, V>): Either.Either<RawInput, EncodeError> =>
      Either.gen(function*() {
        const key = input.key === null ? null : yield* topic.encodeKey(input.key)
        const value = yield* topic.encodeValue(input.value)
        return { key: toBuffer(key), value: toBuffer(value), headers: input.headers, timestamp: input.timestamp, partition: input.partition }
      }).pipe(Either.mapLeft((cause) => new EncodeError({ topic: topic.name, cause })))

    const pipeAll = <K, V>(topic: Topic.Topic<K, V>, records: Iterable<Input<K, V>>): Effect.Effect<void, PipeError<E>, R> =>
      Effect.flatMap(
        Effect.forEach(records, (input) => encodeInput(topic, input)),
        (raw) => processRaw(topic.name, raw)
      )

    const records = (topic: Topic.Any | string): Effect.Effect<ReadonlyArray<RawRecord>> =>
      Effect.sync(() => [...(topics.get(typeof topic === "string" ? topic : topic.name) ?? [])])

    const outputs = <K, V>(topic: Topic.Topic<K, V>): Effect.Effect<ReadonlyArray<OutputRecord<K, V>>, DecodeError> =>
      Effect.flatMap(records(topic), (raw) =>
        Effect.forEach(raw, (record) => {
          const fail = (part: "key" | "value") => (cause: ParseResult.ParseError) =>
            new DecodeError({ topic: record.topic, partition: record.partition ?? -1, offset: record.offset, part, cause })
          return Either.gen(function*() {
            const key = record.key === null ? null : yield* Either.mapLeft(decodePart("key", topic.key, record.key), fail("key"))
            const value = record.value === null
              ? null
              : yield* Either.mapLeft(decodePart("value", topic.value, record.value), fail("value"))
            return { ...record, key, value }
          })
        }))

    return {
      pipe: (topic, key, value, pipeOptions) => pipeAll(topic, [{ ...pipeOptions, key, value }]),
      pipeAll,
      pipeRaw: (topic, record) => processRaw(typeof topic === "string" ? topic : topic.name, [record]),
      outputs,
      records,
      deadLetters: Option.match(deadLetterTopic, { onNone: () => Effect.succeed([]), onSome: records }),
      state: (key, partition = 0) =>
        Effect.gen(function*() {
          const task = tasks.get(partition)
          if (task === undefined || Option.isNone(task.store) || Option.isNone(decodeState)) return Option.none<S>()
          const store = task.store.value
          const stored = yield* store.get(key)
          if (stored === undefined) return Option.none<S>()
          return yield* Either.match(decodeState.value(stored), {
            onLeft: (cause) => Effect.fail(new StateStoreError({ operation: `decode state of ${key}`, path: store.path, cause })),
            onRight: (state) => Effect.succeed(Option.some(state))
          })
        }),
      changelogTopic: changelog,
      advanceWallClock: (duration) =>
        Effect.zipRight(
          TestClock.adjust(duration),
          Effect.suspend(() =>
            // The tasks that ran, and those with records to restore (their restored timers may be due).
            Effect.forEach(new Set([...tasks.keys(), ...restoredPartitions]), (partition) => process(partition, []), { discard: true })
          ).pipe(lock.withPermits(1))
        ),
      advanceStreamTime: (time, advance) => process(advance?.partition ?? 0, [], time).pipe(lock.withPermits(1)),
      timers: (key, partition = 0) =>
        Effect.map(loadedTimers(partition), (table) =>
          [...(table?.entries.values() ?? [])]
            .filter((entry) => entry.key === key)
            .sort(Timers.order)
            .map(({ at, domain, name }): Timer.Timer => ({ name, domain, at }))),
      streamTime: (partition = 0) => Effect.map(loadedTimers(partition), (table) => table?.streamTime ?? -1),
      positions: Effect.flatMap(SqlClient.SqlClient, (sql) => sink === undefined ? notASink : sink.positions(sql)),
      takeOver: (partition = 0) =>
        Effect.flatMap(SqlClient.SqlClient, (sql) => sink === undefined ? notASink : sink.takeOver(sql, partition)).pipe(
          lock.withPermits(1)
        )
    }
  })
