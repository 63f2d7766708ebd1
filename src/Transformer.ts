/**
 * Transformers: exactly-once consume-transform-produce with changelog-backed
 * state.
 *
 * @since 0.1.0
 */
import { Option } from "effect"
import type { Duration, Effect, Schema } from "effect"
import type { PredicateRule, TaggedRule, TaggedRuleFor } from "./ErrorRule.ts"
import type { SinkHooks } from "./internal/database/DatabaseTask.ts"
import { defaultStateKey } from "./internal/runtime/StateKeyCheck.ts"
import type { Declaration as StoreDeclaration } from "./internal/stores/access.ts"
import type {
  EncodeError,
  KafkaError,
  OutputTooLarge,
  PartitionOutOfRange,
  StateNotStorable,
  StateStoreError,
  StoredStateInvalid,
  TaskMigrated,
  TimestampOutOfRange
} from "./SkeinError.ts"
import type * as Timer from "./Timer.ts"
import * as Topic from "./Topic.ts"

/**
 * A consumed record, decoded with its topic's codecs.
 *
 * `headers` is a convenience view: the first value of each header name, as
 * text (bytes that are not UTF-8 are decoded leniently). `rawHeaders` has
 * them all as Kafka has them: every value's bytes, a repeated name once per
 * value in record order (a header without a value has empty bytes). Pass it
 * to `Topic.record` to write the headers back byte for byte; read one name's
 * values with `Transformer.headerValues`.
 *
 * @example
 * ```ts
 * import type { Transformer } from "skein"
 *
 * const describe = (record: Transformer.InputRecord<string, string>): string =>
 *   `${record.topic}/${record.partition}@${record.offset} at ${new Date(record.timestamp).toISOString()}: ` +
 *   `${record.key} = ${record.value} (${record.rawHeaders.length} headers)`
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface InputRecord<K, V> {
  readonly topic: string
  readonly partition: number
  readonly offset: number
  readonly key: K | null
  readonly value: V
  /** The first value of each header, as text. */
  readonly headers: Readonly<Record<string, string>>
  /**
   * Every header as name and value bytes, in record order (a repeated name's values in order).
   *
   * @since 0.2.0
   */
  readonly rawHeaders: ReadonlyArray<readonly [string, Buffer]>
  /** The record's timestamp, in milliseconds since the epoch (-1 for none). */
  readonly timestamp: number
}

/**
 * Every value of a header of a record, as bytes, in record order (empty when
 * it has none).
 *
 * @example
 * ```ts
 * import { Transformer } from "skein"
 *
 * // in a transform: every hop a tracing system appended, byte for byte
 * const hops: ReadonlyArray<Buffer> = Transformer.headerValues(record, "trace-hop")
 * ```
 *
 * @since 0.2.0
 * @category utils
 */
export const headerValues = (
  record: { readonly rawHeaders: ReadonlyArray<readonly [string, Buffer]> },
  name: string
): ReadonlyArray<Buffer> => {
  const values: Array<Buffer> = []
  for (const [header, value] of record.rawHeaders) if (header === name) values.push(value)
  return values
}

/**
 * The record type of a list of input topics: a union over the topics.
 *
 * @example
 * ```ts
 * import type { Transformer } from "skein"
 *
 * // Transformer.InputRecord<string, string> | Transformer.InputRecord<string, number>
 * type WordOrCount = Transformer.RecordOf<[typeof Words, typeof Counts]>
 * ```
 *
 * @since 0.1.0
 * @category type-level
 */
export type RecordOf<Inputs extends ReadonlyArray<Topic.Any>> = {
  [I in keyof Inputs]: InputRecord<Topic.Key<Inputs[I]>, Topic.Value<Inputs[I]>>
}[number]

/**
 * A change to the state of the record's state key.
 *
 * @example
 * ```ts
 * import { Transformer } from "skein"
 *
 * const update = (count: number): Transformer.StateChange<number> =>
 *   count === 0 ? Transformer.remove : Transformer.set(count)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type StateChange<S> =
  | { readonly _tag: "Set"; readonly value: S }
  | { readonly _tag: "Delete" }

/**
 * Sets the state of the record's state key.
 *
 * @example
 * ```ts
 * import { Effect, Option } from "effect"
 * import { Transformer } from "skein"
 *
 * // in a transform: the key's state becomes the previous count plus one
 * const increment = (count: Option.Option<number>) =>
 *   Effect.succeed({ state: Transformer.set(Option.getOrElse(count, () => 0) + 1) })
 * ```
 *
 * @since 0.1.0
 * @category state
 */
export const set = <S>(value: S): StateChange<S> => ({ _tag: "Set", value })

/**
 * Deletes the state of the record's state key (a tombstone in the changelog).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Transformer } from "skein"
 *
 * // in a transform: forget the record key's state
 * const reset = Effect.succeed({ state: Transformer.remove })
 * ```
 *
 * @since 0.1.0
 * @category state
 */
export const remove: StateChange<never> = { _tag: "Delete" }

/**
 * What a transform returns: records to produce and an optional state change.
 *
 * @example
 * ```ts
 * import { Topic, Transformer } from "skein"
 *
 * const result: Transformer.Result<number> = {
 *   emit: [Topic.record(Counts, "hello", 2)],
 *   state: Transformer.set(2)
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Result<S> {
  readonly emit?: ReadonlyArray<Topic.OutputRecord>
  readonly state?: StateChange<S>
  /**
   * Changes to other state keys of the record's task, applied after `state`
   * and committed in the same transaction (only for a transformer with
   * `sharedState`: see `TaskState`).
   *
   * @since 0.4.0
   */
  readonly others?: ReadonlyArray<KeyChange<S>>
  /**
   * Schedules or cancels timers of the record's state key (of the timer's,
   * from `onTimer`), committed in the same transaction: only for a
   * transformer with `onTimer` (see `Timer`).
   *
   * @since 0.4.0
   */
  readonly timers?: ReadonlyArray<Timer.Change>
}

/**
 * A change to the state of a state key other than the record's (`Result.others`).
 *
 * @since 0.4.0
 * @category models
 */
export interface KeyChange<S> {
  readonly key: string
  readonly state: StateChange<S>
}

/**
 * The state of the record's task beyond the record's own key, for a
 * transformer declared with `sharedState` (the stream DSL's windowed
 * aggregations keep the task's stream time and its open windows there).
 * `get` reads any state key of the task (a private copy, as the record's own
 * state is) as the batch's earlier records left it; `Result.others` writes
 * them, in the record's transaction. Such a transformer's records run one
 * after the other per partition, even on topics with key concurrency.
 *
 * @since 0.4.0
 * @category models
 */
export interface TaskState<S> {
  readonly get: (stateKey: string) => Effect.Effect<Option.Option<S>, StateStoreError | StoredStateInvalid | EncodeError>
}

/**
 * A declared transformer. Build one with `make` (stateful) or `stateless`.
 *
 * @example
 * ```ts
 * import type { Topic, Transformer } from "skein"
 *
 * const inputNames = <I extends ReadonlyArray<Topic.Any>, S, E, R>(t: Transformer.Transformer<I, S, E, R>) =>
 *   t.inputs.map((topic) => topic.name)
 * inputNames(WordCount) // ["words"]
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Transformer<in out Inputs extends ReadonlyArray<Topic.Any>, in out S, in out E, out R> {
  readonly name: string
  readonly inputs: Inputs
  /** The state codec; `None` for a stateless transformer, which never opens a store. */
  readonly state: Option.Option<Topic.Codec<S>>
  /** The key of a record's state; state is per input partition, so it must not span partitions (see `make`). */
  readonly stateKey: (record: RecordOf<Inputs>) => string
  /** Fails with its own errors `E`, or (a durable workflow's) with the runtime's, which no rule sees. */
  readonly transform: (
    record: RecordOf<Inputs>,
    state: Option.Option<S>,
    /** Always given by the runtime; read it only when `sharedState` is set. */
    task?: TaskState<S>
  ) => Effect.Effect<Result<S>, E | RuntimeError, R>
  /**
   * True when the transform reads and writes other state keys of its task
   * (`TaskState`, `Result.others`): records then run one after the other per
   * partition. Unset: only the record's own state key.
   *
   * @since 0.4.0
   */
  readonly sharedState?: boolean
  /**
   * Runs when a timer of a state key is due (see `Timer`): receives the timer
   * and the key's state, and returns outputs, a state change and timer
   * changes for that key, committed in the task's transaction. Its errors go
   * through `rules` as a record's do (a dead-lettered timer's copy has the
   * state key as key, the timer as JSON value and `skein.error.part: timer`).
   * A transformer with timers runs its records one after the other per
   * partition.
   *
   * @since 0.4.0
   */
  readonly onTimer?: (
    timer: Timer.Fired,
    state: Option.Option<S>,
    /** Always given by the runtime; read it only when `sharedState` is set. */
    task?: TaskState<S>
  ) => Effect.Effect<Result<S>, E | RuntimeError, R>
  /**
   * The named stores the transform (and `onTimer`) uses: `KeyValueStore`,
   * `WindowStore`, `SessionStore`. Kept in the task's state with its
   * per-key state. A transformer with stores runs its records one after the
   * other per partition.
   *
   * @since 0.5.0
   */
  readonly stores?: ReadonlyArray<StoreDeclaration>
  /** What happens when the transform fails with one of its errors; unmatched errors are fatal. */
  readonly rules: ReadonlyArray<Rule<E>>
  /**
   * Set when each task keeps a run store (a durable `KafkaWorkflow`): its
   * topic is created at startup, each task restores its partition first, and
   * completed runs are remembered for `retention`. `runOf` names a record's
   * run (its execution id): the steps of a run whose record is skipped or
   * dead-lettered are deleted once that is committed.
   *
   * @since 0.3.0
   */
  readonly runStore?: {
    readonly retention: Duration.Duration
    readonly runOf?: ((record: RecordOf<Inputs>) => Effect.Effect<string>) | undefined
  }
  /**
   * Set by `DatabaseSink`: the task's positions and commits live in a
   * database (its tables, and a batch handler's collector).
   *
   * @since 0.6.0
   */
  readonly database?: SinkHooks<E> | undefined
  /**
   * Set by the stream DSL for a table read with `sourceChangelog`
   * (`KTable.from(topic, { sourceChangelog: true })`): the state is that
   * input topic's table, so the topic is its changelog. No changelog topic
   * is written; a task restores its store from the topic, up to its
   * committed offset there.
   *
   * @since 0.6.0
   */
  readonly sourceChangelog?: SourceChangelog<S> | undefined
}

/**
 * How a transformer's state is restored from one of its input topics, its
 * changelog (`Transformer.sourceChangelog`).
 *
 * @since 0.6.0
 * @category models
 */
export interface SourceChangelog<S> {
  /** The input topic whose records are the state's changes. */
  readonly topic: string
  /**
   * The state change a record of `topic` makes when processed: its state key
   * and the new state (`None`: deleted). `undefined` for a record whose
   * processing changes no state: one that does not decode (dead-lettered or
   * skipped by the rules), has no key, or has an invalid timestamp.
   */
  readonly change: (record: SourceRecord) => { readonly key: string; readonly state: Option.Option<S> } | undefined
}

/**
 * A record of a source changelog (`SourceChangelog`) as a restore reads it.
 *
 * @since 0.6.0
 * @category models
 */
export interface SourceRecord {
  readonly key: Uint8Array | null
  readonly value: Uint8Array | null
  readonly timestamp: number
}

/**
 * The runtime's own errors that a transform can fail with besides its own:
 * a durable workflow's handler reads and writes its run store (`KafkaError`,
 * `TaskMigrated`, `StateStoreError`), encodes its result (`EncodeError`,
 * `StateNotStorable`) and reads stored results (`StoredStateInvalid`). They
 * are not part of a transformer's error type `E`, so no rule is written for
 * them and no rule sees them: a broker error rewinds the partition, a fenced
 * producer migrates the task, the others are fatal. `StateNotStorable` alone
 * reaches a rule made with `ErrorRule.tagged("StateNotStorable", ...)`, as it
 * does for a transformer's state.
 *
 * @example
 * ```ts
 * import type { Transformer } from "skein"
 *
 * const runtime = (error: Transformer.RuntimeError): string => `${error._tag}: ${error.message}`
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export type RuntimeError = KafkaError | TaskMigrated | StateStoreError | EncodeError | StateNotStorable | StoredStateInvalid

/**
 * An error rule of a transformer: a predicate over its own errors, or a
 * tagged rule for one of their tags or for `OutputTooLarge`,
 * `PartitionOutOfRange`, `TimestampOutOfRange` or `StateNotStorable`.
 *
 * @example
 * ```ts
 * import { Schedule } from "effect"
 * import { ErrorRule, type Transformer } from "skein"
 *
 * const rules: ReadonlyArray<Transformer.Rule<Unavailable>> = [
 *   ErrorRule.tagged("Unavailable", { retry: Schedule.recurs(3), then: "dlq" }),
 *   ErrorRule.tagged("OutputTooLarge", { then: "dlq" })
 * ]
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Rule<E> =
  | PredicateRule<E>
  | TaggedRuleFor<E>
  | TaggedRule<"OutputTooLarge", OutputTooLarge>
  | TaggedRule<"PartitionOutOfRange", PartitionOutOfRange>
  | TaggedRule<"TimestampOutOfRange", TimestampOutOfRange>
  | TaggedRule<"StateNotStorable", StateNotStorable>

/**
 * Declares a stateful transformer. The transform receives a private copy of
 * the current state of the record's state key (default: the record key),
 * decoded through the state Schema (class instances and `Option`s intact),
 * and returns records to emit and an optional state change.
 *
 * @example
 * ```ts
 * const WordCount = Transformer.make({
 *   name: "word-count",
 *   inputs: [Words],
 *   state: Schema.Number,
 *   transform: (record, count) => {
 *     const next = Option.getOrElse(count, () => 0) + 1
 *     return Effect.succeed({ emit: [Topic.record(Counts, record.key, next)], state: Transformer.set(next) })
 *   }
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <const Inputs extends ReadonlyArray<Topic.Any>, S, SI, E = never, R = never>(options: {
  readonly name: string
  readonly inputs: Inputs
  readonly state: Schema.Schema<S, SI>
  /**
   * The key whose state a record reads and writes (default: the record key).
   *
   * **State is kept per input partition.** A state key that differs from the
   * record key must still put all of one key's records on one partition:
   * when records with the same state key arrive on two partitions (the topic
   * has more than one and is keyed by something else), each partition keeps
   * its own copy of that key's state and neither sees the other's updates.
   * Re-key the input topic by the state key upstream instead. The runner
   * warns once per key when it sees a key on a second partition
   * (`SkeinConfig.checkStateKeys`, on by default for a custom `stateKey`).
   */
  readonly stateKey?: (record: RecordOf<Inputs>) => string
  readonly transform: (record: RecordOf<Inputs>, state: Option.Option<S>) => Effect.Effect<Result<S>, E, R>
  /**
   * Runs when a timer the transform (or `onTimer`) scheduled is due, with
   * the state of the timer's key (see `Timer`).
   *
   * @since 0.4.0
   */
  readonly onTimer?: ((timer: Timer.Fired, state: Option.Option<S>) => Effect.Effect<Result<S>, E, R>) | undefined
  /**
   * Named stores the transform and `onTimer` read and write
   * (`KeyValueStore.make`, `WindowStore.make`, `SessionStore.make`): their
   * writes commit in the record's transaction, and they are restored, kept
   * and served by standbys with the task's state.
   *
   * @since 0.5.0
   */
  readonly stores?: ReadonlyArray<StoreDeclaration> | undefined
  readonly rules?: ReadonlyArray<Rule<NoInfer<E>>>
}): Transformer<Inputs, S, E, R> => ({
  name: options.name,
  inputs: options.inputs,
  state: Option.some(Topic.json(options.state)),
  stateKey: options.stateKey ?? defaultStateKey,
  transform: options.transform,
  ...(options.onTimer === undefined ? {} : { onTimer: options.onTimer }),
  ...(options.stores === undefined || options.stores.length === 0 ? {} : { stores: options.stores }),
  rules: options.rules ?? []
})

/**
 * Declares a stateless transformer: it can only emit records.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Topic, Transformer } from "skein"
 *
 * const Shout = Transformer.stateless({
 *   name: "shout",
 *   inputs: [Words],
 *   transform: (record) => Effect.succeed({ emit: [Topic.record(Shouted, record.key, record.value.toUpperCase())] })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const stateless = <const Inputs extends ReadonlyArray<Topic.Any>, E = never, R = never>(options: {
  readonly name: string
  readonly inputs: Inputs
  readonly transform: (record: RecordOf<Inputs>) => Effect.Effect<Result<never>, E, R>
  readonly rules?: ReadonlyArray<Rule<NoInfer<E>>>
}): Transformer<Inputs, never, E, R> => ({
  name: options.name,
  inputs: options.inputs,
  state: Option.none(),
  stateKey: defaultStateKey,
  transform: (record) => options.transform(record),
  rules: options.rules ?? []
})

/**
 * The changelog topic of a transformer in an application.
 *
 * @example
 * ```ts
 * import { Transformer } from "skein"
 *
 * Transformer.changelogTopic("wc", WordCount) // "wc-word-count-changelog"
 * ```
 *
 * @since 0.1.0
 * @category utils
 */
export const changelogTopic = (applicationId: string, transformer: { readonly name: string }): string =>
  `${applicationId}-${transformer.name}-changelog`

/**
 * Any transformer, whatever its inputs, state, errors and requirements: the
 * element type of `Runner.runAll`'s list. Read a transformer's error and
 * requirement types with `ErrorOf` and `ContextOf`.
 *
 * @example
 * ```ts
 * import type { Transformer } from "skein"
 *
 * const names = (transformers: ReadonlyArray<Transformer.Any>) => transformers.map((t) => t.name)
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface Any {
  readonly name: string
  readonly inputs: ReadonlyArray<Topic.Any>
  readonly transform: (record: never, state: never, task?: never) => Effect.Effect<Result<unknown>, unknown, unknown>
}

/**
 * The error type `E` of a transformer (a union over a union of transformers).
 *
 * @example
 * ```ts
 * import type { Transformer } from "skein"
 *
 * type Errors = Transformer.ErrorOf<typeof WordCount | typeof Shout>
 * ```
 *
 * @since 0.2.0
 * @category type-level
 */
export type ErrorOf<T> = T extends Transformer<infer _Inputs, infer _S, infer E, infer _R> ? E : never

/**
 * The requirements `R` of a transformer (a union over a union of transformers).
 *
 * @example
 * ```ts
 * import type { Transformer } from "skein"
 *
 * type Needs = Transformer.ContextOf<typeof WordCount | typeof Shout>
 * ```
 *
 * @since 0.2.0
 * @category type-level
 */
export type ContextOf<T> = T extends Transformer<infer _Inputs, infer _S, infer _E, infer R> ? R : never
