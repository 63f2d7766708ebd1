/**
 * Processing one task's share of a poll: decode each record, run the
 * transform in offset order (per state key, concurrently, for topics with key
 * concurrency) under the error rules, and gather what the kept records
 * produced (see `cut.ts`): outputs, one final state per key, offsets.
 *
 * Processing may end early: a record fails fatally, or `stop` completes (a
 * grace period ran out and running handlers are interrupted). What finished
 * before is still committed.
 *
 * @internal
 */
import { Cause, Clock, Duration, Effect, Either, Exit, Option, Schema } from "effect"
import type { ParseResult } from "effect"
import type { Semaphore } from "effect/Effect"
import type { KafkaError, TimestampOutOfRange } from "../../SkeinError.ts"
import {
  DecodeError,
  EncodeError,
  OutputTooLarge,
  PartitionOutOfRange,
  StateNotStorable,
  StateStoreError,
  StoredStateInvalid
} from "../../SkeinError.ts"
import type * as Timer from "../../Timer.ts"
import type * as Topic from "../../Topic.ts"
import type { RecordOf, Result, TaskState, Transformer } from "../../Transformer.ts"
import * as Cut from "./cut.ts"
import * as Eager from "../streams/eager.ts"
import * as JsonCodec from "../codec/jsonCodec.ts"
import { deadLetter } from "./deadLetter.ts"
import { decodeRecord } from "./decode.ts"
import { describe } from "../util/errorText.ts"
import { headerPairs } from "../codec/headers.ts"
import type { FetchedRecord } from "../kafka/consumer.ts"
import * as Outputs from "./outputs.ts"
import type * as PartitionCounts from "./partitionCounts.ts"
import * as Rules from "./rules.ts"
import * as TaskOrder from "./taskOrder.ts"
import type { StateCache } from "../stores/StateCache.ts"
import * as StateCopy from "../stores/stateCopy.ts"
import * as StateKeyCheck from "./StateKeyCheck.ts"
import { atEndOf as storedAtEndOf } from "./storedAtEnd.ts"
import type { StateStore, StoreWrite } from "../stores/StateStore.ts"
import * as StoreAccess from "../stores/access.ts"
import * as StoreSchemas from "../stores/schemas.ts"
import * as Timers from "./timers.ts"
import * as Tracing from "./tracing.ts"

/** The records of one input partition in a poll. */
export interface Slice {
  readonly topic: string
  readonly partition: number
  readonly records: ReadonlyArray<FetchedRecord>
  /** The offset to commit once every record of the slice is processed. */
  readonly endOffset: number
}

/** The errors that end processing at a record. */
export type RecordError<E> =
  | E
  | DecodeError
  | EncodeError
  | StateStoreError
  | StateNotStorable
  | StoredStateInvalid
  | OutputTooLarge
  | PartitionOutOfRange
  | TimestampOutOfRange
  | KafkaError

export interface Options {
  readonly deadLetterTopic: Option.Option<string>
  /** Completes when running handlers must be interrupted (a grace period ran out). */
  readonly stop: Effect.Effect<void>
  /**
   * How long records are started (`maxBatchDuration`): once it has passed, no
   * record starts; those running finish, and the finished prefix commits.
   * Unset: every record of the slices runs.
   */
  readonly maxDuration?: Duration.Duration | undefined
  /** Permits for transform calls across all tasks (`maxConcurrency`). */
  readonly permits: Option.Option<Semaphore>
  /** The size limit of a record for each output topic. */
  readonly messageLimits: Outputs.MessageLimits
  /** The partition counts of output topics, for outputs that name their partition. */
  readonly partitionCounts: PartitionCounts.PartitionCounts
  /** The task's committed states, decoded (a read-through cache of its store). */
  readonly cache: StateCache
  /** Warns about state keys that span input partitions (`checkStateKeys`); unset: no check. */
  readonly stateKeys?: StateKeyCheck.StateKeyCheck | undefined
  /** The task's partition (a batch of due timers has no slices to name it). */
  readonly partition?: number | undefined
  /** The task's committed timers (a transformer with `onTimer`): loaded, fired and changed by the batch. */
  readonly timers?: Timers.TimerTable | undefined
  /** Moves the task's stream time to this time first (`TestDriver.advanceStreamTime`). */
  readonly advanceStreamTime?: number | undefined
  /**
   * Runs the slices' records in timestamp order across the slices
   * (`taskOrder.merge`; slices in the transformer's input order) when each
   * slice runs in one lane: a multi-input task's batch as the runner formed
   * it (`TaskIdle`). Unset: slice after slice.
   */
  readonly ordered?: boolean | undefined
}

export interface TaskBatchResult<E> {
  /** Outputs and dead letters of the kept records, in processing order. */
  readonly outputs: ReadonlyArray<Topic.EncodedRecord>
  /** The final state per key reached by the kept records (one write per key). */
  readonly writes: ReadonlyArray<StoreWrite>
  /** The same final states, decoded: for the state cache once they are committed. */
  readonly states: ReadonlyMap<string, Option.Option<unknown>>
  /** Per slice (same order): the next offset to commit and how many of its records are kept. */
  readonly cuts: ReadonlyArray<Cut.SliceCut>
  readonly processed: number
  readonly skipped: number
  readonly deadLettered: number
  /** The runs (execution ids) of the kept records a rule skipped or dead-lettered: their steps are deleted after the commit. */
  readonly disposedRuns: ReadonlyArray<string>
  /** The kept writes to the task's timers and stream time (also in `writes`), for its timer table once committed. */
  readonly taskWrites: ReadonlyArray<Timers.Write>
  /** Timers fired by the kept units. */
  readonly fired: number
  readonly retries: number
  /** True when `maxDuration` passed before every record started: the rest continues in the next batch. */
  readonly timedOut: boolean
  /** The fatal failure that ended processing early, if any. */
  readonly failure: Option.Option<Cause.Cause<RecordError<E>>>
  /** True when `stop` interrupted running handlers. */
  readonly interrupted: boolean
}

/**
 * A record decoded ahead of processing: ready, with its state key; poison
 * (it does not decode); or with the defect its `stateKey` threw. Plain
 * objects, no `Either` around the parts: a batch holds one per record until
 * it commits.
 */
type Entry<Inputs extends ReadonlyArray<Topic.Any>> =
  | { readonly _tag: "Ready"; readonly record: FetchedRecord; readonly decoded: RecordOf<Inputs>; readonly stateKey: string }
  | { readonly _tag: "Poison"; readonly record: FetchedRecord; readonly error: DecodeError }
  | { readonly _tag: "KeyDefect"; readonly record: FetchedRecord; readonly defect: unknown }

/** Records processed one after the other. */
interface Lane<Inputs extends ReadonlyArray<Topic.Any>, S> {
  /** How many records it has. */
  readonly size: number
  /** Its record at `index`: decoded ahead (`lanesOf`), or as the lane reaches it (`lazyLane`, `chunkedLane`), once. */
  readonly entry: (index: number) => Entry<Inputs>
  /**
   * A lane decoded a chunk at a time (`chunkedLane`): the entries of the chunk that begins at
   * `index`, for the states they need to be read ahead of them (`prefetch`); else absent.
   */
  readonly chunk?: (index: number) => ReadonlyArray<Entry<Inputs>>
  readonly offsets: ReadonlyArray<number>
  /** The finished units, in order (a batch whose records run one after another keeps them as they finish instead: `Cut.folded`). */
  readonly done: Array<Cut.Done<S>>
  /** How many of its records finished (a prefix). */
  finished: number
}

/** What one transform attempt produced. */
interface Attempt<S> {
  readonly outputs: ReadonlyArray<Topic.EncodedRecord>
  readonly change: Option.Option<S> | undefined
  /** The change as stored, checked to decode back (`null`: a delete); `undefined` without a change or a codec; `AtEnd`: stored as the batch ends. */
  readonly encoded: string | null | Cut.AtEnd | undefined
  /** Changes to other state keys of the task (`Result.others`), each checked as `encoded` is. */
  readonly others?: ReadonlyArray<Cut.OtherChange<S>> | undefined
  /** Changes to the timers of the unit's state key (`Result.timers`), checked. */
  readonly timers?: ReadonlyArray<Timer.Change> | undefined
  /** Writes to the transformer's named stores (`Transformer.stores`), in order. */
  readonly stores?: ReadonlyArray<StoreWrite> | undefined
}

/** Records a lane runs at once, one after the other, before its fiber yields (`runLane`). */
const atOnce = 64

/**
 * How many records done at once a lane runs between two reads of the clock for `maxDuration`: reading
 * it for each (`Date.now()`) was 1-2 % of a windowed count's CPU. A record done at once is one whose
 * transform needs no fiber (`Effect.succeed`, `Effect.sync`, a generator of such steps, the stream DSL's:
 * `Eager.runNow`); a record that is not (an asynchronous handler's) is always followed by a read.
 */
const deadlineEvery = 8

/** The stored forms every record's change has (`storedForm`), made once: an `Either` is immutable. */
const noStoredForm = Either.right(undefined)
const storedDelete = Either.right(null)
const storedAtEndForm = Either.right(Cut.AtEnd)
const noEmit: ReadonlyArray<Topic.OutputRecord> = []

/** Decodes a slice's records from `from` to `end` with their topic's Schemas and computes their state keys. */
const decodeSlice = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  topic: Topic.Any,
  slice: Slice,
  stateKeys: StateKeyCheck.StateKeyCheck | undefined,
  reserved: boolean,
  from = 0,
  end = slice.records.length
): Array<Entry<Inputs>> => {
  const entries: Array<Entry<Inputs>> = []
  for (let i = from; i < end; i++) entries.push(decodeEntry(transformer, topic, slice.records[i]!, stateKeys, reserved))
  return entries
}

/** One record decoded with its topic's Schemas, with its state key. */
const decodeEntry = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  topic: Topic.Any,
  record: FetchedRecord,
  stateKeys: StateKeyCheck.StateKeyCheck | undefined,
  reserved: boolean
): Entry<Inputs> => {
  const decoded = decodeRecord(topic, record)
  if (Either.isLeft(decoded)) return { _tag: "Poison", record, error: decoded.left }
  const value = {
    topic: record.topic,
    partition: record.partition,
    offset: record.offset,
    key: decoded.right.key,
    value: decoded.right.value,
    headers: record.headers,
    rawHeaders: headerPairs(record.rawHeaders),
    timestamp: record.timestamp
  } as RecordOf<Inputs>
  return readyEntry(transformer, record, value, stateKeys, reserved)
}

/**
 * A decoded record with its state key; a throwing `stateKey` fails its record (a defect), not the batch.
 * `reserved`: the task's store holds timers or named stores, so a state key in their key space fails too.
 */
const readyEntry = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  record: FetchedRecord,
  decoded: RecordOf<Inputs>,
  stateKeys: StateKeyCheck.StateKeyCheck | undefined,
  reserved: boolean
): Entry<Inputs> => {
  let stateKey: string
  try {
    stateKey = transformer.stateKey(decoded)
  } catch (defect) {
    return { _tag: "KeyDefect", record, defect }
  }
  if (reserved && Timers.isReserved(stateKey)) {
    const defect = new Error(
      `${transformer.name}: the state key of ${record.topic}/${record.partition}@${record.offset} starts with ` +
        `"\\u0000skein.", which Skein reserves for a task's timers and stores: give stateKey another prefix`
    )
    return { _tag: "KeyDefect", record, defect }
  }
  StateKeyCheck.observe(stateKeys, stateKey, record.partition)
  return { _tag: "Ready", record, decoded, stateKey }
}

/** One lane per slice, or one per state key for topics with key concurrency. */
const lanesOf = <Inputs extends ReadonlyArray<Topic.Any>, S>(
  entries: ReadonlyArray<Entry<Inputs>>,
  keyConcurrency: boolean
): ReadonlyArray<Lane<Inputs, S>> => {
  if (!keyConcurrency) return [eagerLane(entries)]
  const byKey = new Map<string, Array<Entry<Inputs>>>()
  for (const entry of entries) {
    // A poison record, or one without a state key, runs in a lane of its own.
    const key = entry._tag === "Ready" ? entry.stateKey : `\u0000record-${entry.record.offset}`
    const list = byKey.get(key)
    if (list === undefined) byKey.set(key, [entry])
    else list.push(entry)
  }
  return [...byKey.values()].map((entries) => eagerLane<Inputs, S>(entries))
}

/** A lane of records decoded ahead. */
const eagerLane = <Inputs extends ReadonlyArray<Topic.Any>, S>(entries: ReadonlyArray<Entry<Inputs>>): Lane<Inputs, S> => ({
  size: entries.length,
  entry: (index) => entries[index]!,
  offsets: entries.map((e) => e.record.offset),
  done: [],
  finished: 0
})

/**
 * A slice's lane whose records are decoded as the lane reaches them: what a record decoded to dies
 * with it, where records decoded ahead live until the batch ends (and every scavenge meanwhile copies
 * them). For a batch that needs no state key ahead (no key lanes, no states to prefetch, no check of
 * state keys across partitions).
 */
const lazyLane = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  topic: Topic.Any,
  slice: Slice,
  reserved: boolean
): Lane<Inputs, S> => ({
  size: slice.records.length,
  entry: (index) => decodeEntry(transformer, topic, slice.records[index]!, undefined, reserved),
  offsets: slice.records.map((record) => record.offset),
  done: [],
  finished: 0
})

/** How many records a `chunkedLane` decodes at a time: fewer than a scavenge's worth, so they die young. */
export const chunkSize = 1024

/**
 * A slice's lane whose records are decoded a chunk at a time, each chunk's states read from the store
 * before its first record runs (`prefetch`): what the records of a chunk decoded to dies with the chunk,
 * where a slice decoded ahead lives until the batch ends and every scavenge meanwhile copies it, then
 * promotes it. For a lane of a whole slice whose states are read ahead (a stateful transformer's
 * records, one after the other).
 */
const chunkedLane = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  topic: Topic.Any,
  slice: Slice,
  stateKeys: StateKeyCheck.StateKeyCheck | undefined,
  reserved: boolean
): Lane<Inputs, S> => {
  let start = -1
  let entries: ReadonlyArray<Entry<Inputs>> = []
  const chunk = (index: number): ReadonlyArray<Entry<Inputs>> => {
    const first = index - (index % chunkSize)
    if (first !== start) {
      entries = decodeSlice(transformer, topic, slice, stateKeys, reserved, first, Math.min(first + chunkSize, slice.records.length))
      start = first
    }
    return entries
  }
  return {
    size: slice.records.length,
    entry: (index) => chunk(index)[index % chunkSize]!,
    chunk,
    offsets: slice.records.map((record) => record.offset),
    done: [],
    finished: 0
  }
}

export const run = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  store: Option.Option<StateStore>,
  slices: ReadonlyArray<Slice>,
  options: Options
): Effect.Effect<TaskBatchResult<E>, never, R> =>
  Effect.gen(function*() {
    const topics = new Map(transformer.inputs.map((topic) => [topic.name, topic]))
    const decodeState = Option.map(transformer.state, (codec) => Schema.decodeEither(codec))
    // A private copy of each state the transform reads, unless the transformer never mutates one or
    // the state cannot be mutated (a number, a string: `stateCopy.ts`).
    const copiesOnRead = Option.isSome(transformer.state) && StateCopy.copiesOnRead(transformer) &&
      !StateCopy.immutable(transformer.state.value)
    const copyState = Option.match(transformer.state, {
      onNone: (): StateCopy.StateCopy<S> => Either.right,
      onSome: (codec): StateCopy.StateCopy<S> => copiesOnRead ? StateCopy.make(codec) : Either.right
    })
    const stateCodecName = `state of ${transformer.name}`
    // A state change's stored form and its decode back, on every record: the codec's cheaper steps.
    const storedSteps = Option.map(transformer.state, JsonCodec.steps)
    // Skein's own bookkeeping states, stored once, as the batch ends (`storedAtEnd.ts`).
    const atEnd = storedAtEndOf(transformer)
    const states = new Map<string, Option.Option<S>>()
    let retries = 0
    /** Set once `maxDuration` has passed: lanes start no further record. */
    let timedOut = false
    /** When `maxDuration` has passed (set as the records begin); the clock is read between records, no timer fiber. */
    let deadline = Number.POSITIVE_INFINITY
    const clock = yield* Effect.clock
    const pastDeadline = (): boolean => {
      if (!timedOut && clock.unsafeCurrentTimeMillis() >= deadline) timedOut = true
      return timedOut
    }
    // Outputs carry trace context only under a tracer the program installed; the batch span
    // is the parent of each record's transform span, or its link when the record has a remote parent.
    const propagate = Tracing.propagates(yield* Effect.tracer)
    const batchSpan = Option.getOrUndefined(yield* Effect.option(Effect.currentSpan))
    const batchLinks = batchSpan === undefined ? [] : [Tracing.linkTo(batchSpan)]
    const onTimer = transformer.onTimer
    const timed = onTimer !== undefined
    /** What moves stream time: the record's event time for a transformer marked so (the stream DSL's extractors), else its timestamp. */
    const eventTime = Timers.eventTimeOf(transformer)
    /** The batch's timers once loaded (a transformer with `onTimer`). */
    let pending: Timers.Pending | undefined = undefined
    /** Timers fired as the batch began, before its records. */
    const before: Array<Cut.Done<S>> = []
    const declarations = transformer.stores ?? []
    const hasStores = declarations.length > 0
    /** The batch's view of the task's named stores, once checked (a transformer with stores). */
    let overlay: StoreAccess.Overlay | undefined = undefined

    /** Whether the batch reads the states its records need from the store ahead, in one call (`prefetch`). */
    const prefetches = Option.isSome(store) && Option.isSome(decodeState)
    const lanesPerSlice = slices.map((slice) => {
      const topic = topics.get(slice.topic)
      // A transformer sharing its task's state across keys (or with timers) runs its records one after the other.
      const concurrent = topic !== undefined && topic.keyConcurrency && transformer.sharedState !== true && !timed && !hasStores
      if (topic === undefined) return []
      // No state key needed ahead: each record is decoded as its lane reaches it.
      if (!concurrent && !prefetches && options.stateKeys === undefined) {
        return [lazyLane<Inputs, S, E, R>(transformer, topic, slice, timed || hasStores)]
      }
      // One lane whose states are read ahead: a chunk at a time, each chunk's states before it runs.
      if (!concurrent && prefetches) return [chunkedLane<Inputs, S, E, R>(transformer, topic, slice, options.stateKeys, timed || hasStores)]
      return lanesOf<Inputs, S>(decodeSlice(transformer, topic, slice, options.stateKeys, timed || hasStores), concurrent)
    })

    /** The state of a key when known without reading the store; `undefined` otherwise. */
    const knownState = (stateKey: string): Option.Option<S> | undefined => {
      const current = states.get(stateKey)
      if (current !== undefined) return current
      if (Option.isNone(store) || Option.isNone(decodeState)) return Option.none()
      const committed = options.cache.get(stateKey) as Option.Option<S> | undefined
      if (committed !== undefined) states.set(stateKey, committed)
      return committed
    }

    /** Decodes a stored state and remembers it for the batch and in the cache. */
    const remember = (
      stateKey: string,
      stored: string | undefined,
      decode: (stored: string) => Either.Either<S, ParseResult.ParseError>
    ): Either.Either<Option.Option<S>, ParseResult.ParseError> => {
      const decoded = stored === undefined ? Either.right(Option.none<S>()) : Either.map(decode(stored), Option.some)
      if (Either.isRight(decoded)) {
        states.set(stateKey, decoded.right)
        options.cache.set(stateKey, decoded.right)
      }
      return decoded
    }

    const readState = (stateKey: string, partition: number): Effect.Effect<Option.Option<S>, StateStoreError | StoredStateInvalid> => {
      if (Option.isNone(store) || Option.isNone(decodeState)) return Effect.succeed(Option.none())
      const db = store.value
      const decode = decodeState.value
      return Effect.flatMap(db.get(stateKey), (stored) =>
        Either.mapLeft(
          remember(stateKey, stored, decode),
          (cause) =>
            new StoredStateInvalid({ transformer: transformer.name, kind: "state", key: stateKey, partition, store: db.path, cause })
        ))
    }

    /** Other state keys of the task, as the batch's finished records left them (a private copy each, as `copyState` makes). */
    const taskPartition = options.partition ?? slices[0]?.partition ?? 0
    const copied = (state: Option.Option<S>) => Either.mapLeft(copyState(state), (cause) => new EncodeError({ topic: stateCodecName, cause }))
    const taskState: TaskState<S> = {
      get: (stateKey) => {
        const known = knownState(stateKey)
        if (known === undefined) return Effect.flatMap(readState(stateKey, taskPartition), copied)
        // Known, for a transformer that reads its states without a copy (the stream DSL's): done at once (`eager.ts`).
        return copiesOnRead ? Effect.flatMap(Effect.succeed(known), copied) : Effect.succeed(known)
      }
    }

    /** The changes `result.others` makes, in their stored form (each checked to read back). */
    const othersOf = (
      result: Result<S>,
      source: FetchedRecord
    ): Either.Either<ReadonlyArray<Cut.OtherChange<S>> | undefined, EncodeError | StateNotStorable> => {
      if (result.others === undefined || result.others.length === 0) return noStoredForm
      const others: Array<Cut.OtherChange<S>> = []
      for (const other of result.others) {
        const change = other.state._tag === "Set" ? Option.some(other.state.value) : Option.none()
        const stored = storedForm(change, other.key, source)
        if (Either.isLeft(stored)) return Either.left(stored.left)
        others.push({ key: other.key, change, encoded: stored.right })
      }
      return Either.right(others)
    }

    const changeOf = (result: Result<S>): Option.Option<S> | undefined =>
      result.state === undefined ? undefined : result.state._tag === "Set" ? Option.some(result.state.value) : Option.none()

    /**
     * A change as it will be stored, and proof that it reads back: a state
     * JSON cannot hold (`NaN` is stored as `null`) fails the record that
     * produced it, before anything of it commits.
     */
    const storedForm = (
      change: Option.Option<S> | undefined,
      stateKey: string,
      source: FetchedRecord
    ): Either.Either<string | null | Cut.AtEnd | undefined, EncodeError | StateNotStorable> => {
      if (change === undefined || Option.isNone(storedSteps)) return noStoredForm
      if (Option.isNone(change)) return storedDelete
      if (atEnd !== undefined && atEnd(change.value)) return storedAtEndForm
      const stored = storedSteps.value.store(change.value)
      if (Either.isRight(stored)) return Either.right(stored.right)
      if (stored.left._tag === "Encode") return Either.left(new EncodeError({ topic: stateCodecName, cause: stored.left.cause }))
      return Either.left(
        new StateNotStorable({
          transformer: transformer.name,
          kind: "state",
          key: stateKey,
          source: { topic: source.topic, partition: source.partition, offset: source.offset },
          cause: stored.left.cause
        })
      )
    }

    /**
     * One transform call on a private copy of the state (`copyState`), with its outputs
     * encoded, continued by `then`. The steps around the transform's own effect
     * are synchronous: one `flatMap` a record (each Effect step is an
     * allocation and a turn of the fiber's loop, per record), whose continuation
     * is `then`'s effect itself (a lane's next record: `runLane`).
     */
    const attempt = <A>(
      decoded: RecordOf<Inputs>,
      stateKey: string,
      state: Option.Option<S>,
      source: FetchedRecord,
      trace: Tracing.TraceHeaders | undefined,
      then: (attempt: Attempt<S>) => Effect.Effect<A, unknown, R>
    ): Effect.Effect<A, unknown, R> => {
      // Called where the record runs (its lane, a rule's retry): without permits, the transform is called at once.
      if (Option.isSome(options.permits)) {
        // `then` runs once the permit is back: it may start the lane's next record, which takes one of its own.
        const permitted = options.permits.value.withPermits(1)(
          Effect.suspend(() => attemptNow(decoded, stateKey, state, source, trace, Exit.succeed))
        )
        return Effect.flatMap(permitted, then)
      }
      return attemptNow(decoded, stateKey, state, source, trace, then)
    }

    /** `attempt`, called now. */
    const attemptNow = <A>(
      decoded: RecordOf<Inputs>,
      stateKey: string,
      state: Option.Option<S>,
      source: FetchedRecord,
      trace: Tracing.TraceHeaders | undefined,
      then: (attempt: Attempt<S>) => Effect.Effect<A, unknown, R>
    ): Effect.Effect<A, unknown, R> => {
      let copy = state
      if (copiesOnRead) {
        const copied = copyState(state)
        if (Either.isLeft(copied)) return Effect.fail(new EncodeError({ topic: stateCodecName, cause: copied.left }))
        copy = copied.right
      }
      const unit = overlay?.unit(source)
      if (unit === undefined) {
        // A transform done at once (`Effect.succeed`, `Effect.sync`, the stream DSL's: `eager.ts`) is settled in this call.
        const result = Eager.runNow(transformer.transform(decoded, copy, taskState))
        if (Eager.isDone(result)) return result._tag === "Success" ? settle(result.value, stateKey, source, trace, then) : Exit.failCause(result.cause)
        return Effect.flatMap(result, (result): Effect.Effect<A, unknown, R> => settle(result, stateKey, source, trace, then))
      }
      return Effect.flatMap(
        Effect.locally(transformer.transform(decoded, copy, taskState), StoreAccess.current, Option.some(unit)),
        (result): Effect.Effect<A, unknown, R> =>
          settle(result, stateKey, source, trace, (finished) => then({ ...finished, stores: unit.close() }))
      )
    }

    /** A transform's (or `onTimer`'s) result, checked and encoded, continued by `then`. */
    const settle = <A, R2>(
      result: Result<S>,
      stateKey: string,
      source: FetchedRecord,
      trace: Tracing.TraceHeaders | undefined,
      then: (attempt: Attempt<S>) => Effect.Effect<A, unknown, R2>
    ): Effect.Effect<A, unknown, R2> => {
      const change = changeOf(result)
      const stored = storedForm(change, stateKey, source)
      if (Either.isLeft(stored)) return Effect.fail(stored.left)
      const others = othersOf(result, source)
      if (Either.isLeft(others)) return Effect.fail(others.left)
      const timers = result.timers
      if (timers !== undefined && timers.length > 0) {
        if (!timed) {
          return Effect.dieMessage(
            `${transformer.name}: a result schedules timers, but the transformer has no onTimer to run them: ` +
              "give it one (Transformer.make({ ..., onTimer }))"
          )
        }
        const invalid = Timers.invalidChange(timers)
        if (invalid !== undefined) return Effect.dieMessage(`${transformer.name}: ${invalid}`)
      }
      const encoded = Outputs.encode(result.emit ?? noEmit, options.messageLimits, options.partitionCounts, source, trace)
      if (!Either.isEither(encoded)) {
        return Effect.flatMap(encoded, (outputs) => then({ outputs, change, encoded: stored.right, others: others.right, timers }))
      }
      return Either.isLeft(encoded)
        ? Exit.fail(encoded.left)
        : then({ outputs: encoded.right, change, encoded: stored.right, others: others.right, timers })
    }

    const finish = (
      entry: Entry<Inputs>,
      stateKey: string,
      finished: Attempt<S>,
      disposition: Cut.Done<S>["disposition"],
      run?: string
    ): Cut.Done<S> => {
      if (finished.change !== undefined) states.set(stateKey, finished.change)
      if (finished.others !== undefined) for (const other of finished.others) states.set(other.key, other.change)
      if (finished.stores !== undefined) overlay?.apply(finished.stores)
      return {
        offset: entry.record.offset,
        stateKey,
        outputs: finished.outputs,
        change: finished.change,
        encoded: finished.encoded,
        others: finished.others,
        disposition,
        run,
        taskWrites: timerWrites(stateKey, finished),
        storeWrites: finished.stores
      }
    }

    /** The writes of a unit's timer changes (none without timers). */
    const timerWrites = (stateKey: string, finished: Attempt<S>): Array<Timers.Write> | undefined =>
      finished.timers === undefined || finished.timers.length === 0 || pending === undefined
        ? undefined
        : pending.apply(stateKey, finished.timers)

    /** The run of a record a rule disposed of (a durable workflow's), whose steps are deleted once that commits. */
    const runOf = transformer.runStore?.runOf
    const disposed = (decoded: RecordOf<Inputs>, done: (run: string | undefined) => Cut.Done<S>): Effect.Effect<Cut.Done<S>> =>
      runOf === undefined ? Effect.sync(() => done(undefined)) : Effect.map(runOf(decoded), done)

    /** A record whose state is known, continued by `then` once it is done. */
    const processKnown = <A>(
      entry: Entry<Inputs>,
      stateKey: string,
      decoded: RecordOf<Inputs>,
      state: Option.Option<S>,
      trace: Tracing.TraceHeaders | undefined,
      then: (done: Cut.Done<S>) => Effect.Effect<A, unknown, R>
    ): Effect.Effect<A, unknown, R> => {
      // Without rules, the transform's continuation is `then`'s: one Effect step a record.
      if (transformer.rules.length === 0) {
        return attempt(decoded, stateKey, state, entry.record, trace, (finished) => then(finish(entry, stateKey, finished, "processed")))
      }
      const processed = attempt(decoded, stateKey, state, entry.record, trace, (finished) => Exit.succeed(finish(entry, stateKey, finished, "processed")))
      // Under rules, a record that succeeds at once costs one `catchAll`; a failed one gets its rule.
      return Eager.flatMap(processKnownRuled(entry, stateKey, decoded, state, trace, processed), then)
    }

    /** A record's attempt under the transformer's rules: a failure gets its rule. */
    const processKnownRuled = (
      entry: Entry<Inputs>,
      stateKey: string,
      decoded: RecordOf<Inputs>,
      state: Option.Option<S>,
      trace: Tracing.TraceHeaders | undefined,
      processed: Effect.Effect<Cut.Done<S>, unknown, R>
    ): Effect.Effect<Cut.Done<S>, unknown, R> =>
      Effect.catchAll(processed, (failed) =>
        Effect.flatMap(
          Rules.recover(transformer.rules, failed, () => attempt(decoded, stateKey, state, entry.record, trace, Exit.succeed), {
            hasDeadLetterTopic: Option.isSome(options.deadLetterTopic),
            onRetry: () => {
              retries++
            }
          }),
          (ruled) => {
            switch (ruled._tag) {
              case "Succeeded":
                return Effect.succeed(finish(entry, stateKey, ruled.value, "processed"))
              case "Skipped": {
                const r = entry.record
                return Effect.zipRight(
                  Effect.logWarning(`skipped ${r.topic}/${r.partition}@${r.offset}: ${describe(ruled.error)}`),
                  disposed(decoded, (run) => finish(entry, stateKey, { outputs: [], change: undefined, encoded: undefined }, "skipped", run))
                )
              }
              case "DeadLettered":
                return Option.match(options.deadLetterTopic, {
                  onNone: () => Effect.fail(ruled.error),
                  onSome: (dlq) =>
                    Effect.flatMap(options.messageLimits.lookup(dlq), (limit) => {
                      const letter = deadLetter(dlq, entry.record, { message: describe(ruled.error) }, limit)
                      return disposed(decoded, (run) =>
                        finish(entry, stateKey, { outputs: [letter], change: undefined, encoded: undefined }, "deadLettered", run))
                    })
                })
            }
          }
        ))

    /** A record, continued by `then` once it is done. */
    const processEntry = <A>(
      entry: Entry<Inputs>,
      trace: Tracing.TraceHeaders | undefined,
      then: (done: Cut.Done<S>) => Effect.Effect<A, unknown, R>
    ): Effect.Effect<A, unknown, R> => {
      if (entry._tag === "Poison") {
        // A poison record never reaches the transform: it goes to the dead letter
        // topic inside this batch's transaction, or, with none configured, fails the run.
        const error = entry.error
        if (Option.isNone(options.deadLetterTopic)) return Effect.fail(error)
        const dlq = options.deadLetterTopic.value
        const letter = Effect.zipWith(
          options.messageLimits.lookup(dlq),
          Effect.logWarning(`poison record sent to ${dlq}: ${error.message}`),
          (limit): Cut.Done<S> => ({
            offset: entry.record.offset,
            stateKey: "",
            outputs: [deadLetter(dlq, entry.record, error, limit)],
            change: undefined,
            disposition: "deadLettered"
          })
        )
        return Effect.flatMap(letter, then)
      }
      if (entry._tag === "KeyDefect") return Effect.die(entry.defect)
      const { decoded, stateKey } = entry
      const known = knownState(stateKey)
      return known === undefined
        ? Effect.flatMap(readState(stateKey, entry.record.partition), (state) => processKnown(entry, stateKey, decoded, state, trace, then))
        : processKnown(entry, stateKey, decoded, known, trace, then)
    }

    /**
     * A record in its `skein.transform` span: a child of the record's remote
     * span (its `traceparent`) linked to the batch span, else of the batch span.
     * Only under a tracer the program installed: with Effect's default one
     * nobody reads the spans, and a span per record costs throughput.
     */
    const tracedEntry = (entry: Entry<Inputs>): Effect.Effect<Cut.Done<S>, unknown, R> => {
      const record = entry.record
      const remote = Tracing.remoteParent(record)
      const attributes = {
        "messaging.system": "kafka",
        "messaging.operation.type": "process",
        "messaging.destination.name": record.topic,
        "messaging.destination.partition.id": String(record.partition),
        "messaging.kafka.offset": record.offset
      }
      const spanOptions = remote === undefined
        ? { kind: "consumer" as const, captureStackTrace: false, attributes }
        : { kind: "consumer" as const, captureStackTrace: false, attributes, parent: remote, links: batchLinks }
      return Effect.useSpan("skein.transform", spanOptions, (span) =>
        Effect.withParentSpan(
          Effect.tap(processEntry(entry, propagate ? Tracing.traceHeaders(span, record) : undefined, Exit.succeed), (done) => {
            if (done.disposition !== "processed") span.attribute("skein.disposition", done.disposition)
          }),
          span
        ))
    }

    /** A record (in its span when traced), continued by `then` once it is done. */
    const processAt = <A>(entry: Entry<Inputs>, then: (done: Cut.Done<S>) => Effect.Effect<A, unknown, R>): Effect.Effect<A, unknown, R> =>
      propagate ? Eager.flatMap(tracedEntry(entry), then) : processEntry(entry, undefined, then)

    /**
     * A due timer: it is removed, then `onTimer` runs on its key's state under
     * the transformer's rules, as a record's transform does. Its outputs are
     * stamped with `time` (the clock's time it fired at).
     */
    const fire = (timers: Timers.Pending, entry: Timers.Entry, time: number): Effect.Effect<Cut.Done<S>, unknown, R> =>
      Effect.suspend(() => {
        if (onTimer === undefined) return Effect.dieMessage("Skein invariant broken: a timer fired without onTimer")
        const removal = timers.remove(entry)
        const fired: Timer.Fired = { key: entry.key, name: entry.name, domain: entry.domain, at: entry.at, time }
        // The timer as a source record: for its outputs' timestamp, errors naming their source, and a dead letter.
        const source: FetchedRecord = {
          topic: `${transformer.name} timer ${entry.name}`,
          partition: taskPartition,
          offset: -1,
          key: Buffer.from(entry.key, "utf8"),
          value: Buffer.from(JSON.stringify({ name: entry.name, domain: entry.domain, at: entry.at, time }), "utf8"),
          headers: {},
          rawHeaders: {},
          timestamp: time
        }
        const call = (state: Option.Option<S>) =>
          Effect.suspend(() => {
            const copy = copyState(state)
            if (Either.isLeft(copy)) return Effect.fail(new EncodeError({ topic: stateCodecName, cause: copy.left }))
            const unit = overlay?.unit(source)
            if (unit === undefined) {
              return Effect.flatMap(onTimer(fired, copy.right, taskState), (result) => settle(result, entry.key, source, undefined, Exit.succeed))
            }
            return Effect.flatMap(
              Effect.locally(onTimer(fired, copy.right, taskState), StoreAccess.current, Option.some(unit)),
              (result) => settle(result, entry.key, source, undefined, (finished) => Exit.succeed({ ...finished, stores: unit.close() }))
            )
          })
        const attemptTimer = (state: Option.Option<S>) =>
          Option.isSome(options.permits) ? options.permits.value.withPermits(1)(call(state)) : call(state)
        const done = (finished: Attempt<S>, disposition: Cut.Done<S>["disposition"]): Cut.Done<S> => {
          if (finished.change !== undefined) states.set(entry.key, finished.change)
          if (finished.others !== undefined) for (const other of finished.others) states.set(other.key, other.change)
          if (finished.stores !== undefined) overlay?.apply(finished.stores)
          return {
            offset: -1,
            stateKey: entry.key,
            outputs: finished.outputs,
            change: finished.change,
            encoded: finished.encoded,
            others: finished.others,
            disposition,
            taskWrites: [removal, ...(timerWrites(entry.key, finished) ?? [])],
            storeWrites: finished.stores,
            fired: 1
          }
        }
        const nothing: Attempt<S> = { outputs: [], change: undefined, encoded: undefined }
        const what = `timer "${entry.name}" of key ${entry.key} (${entry.domain} ${entry.at})`
        const known = knownState(entry.key)
        const state = known === undefined ? readState(entry.key, taskPartition) : Effect.succeed(known)
        return Effect.flatMap(state, (state) => {
          const attempted = Effect.map(attemptTimer(state), (finished) => done(finished, "processed"))
          if (transformer.rules.length === 0) return attempted
          return Effect.catchAll(attempted, (failed) =>
            Effect.flatMap(
              Rules.recover(transformer.rules, failed, () => attemptTimer(state), {
                hasDeadLetterTopic: Option.isSome(options.deadLetterTopic),
                onRetry: () => {
                  retries++
                }
              }),
              (ruled): Effect.Effect<Cut.Done<S>, unknown> => {
                switch (ruled._tag) {
                  case "Succeeded":
                    return Effect.succeed(done(ruled.value, "processed"))
                  case "Skipped":
                    return Effect.as(Effect.logWarning(`skipped ${what}: ${describe(ruled.error)}`), done(nothing, "skipped"))
                  case "DeadLettered":
                    return Option.match(options.deadLetterTopic, {
                      onNone: () => Effect.fail(ruled.error),
                      onSome: (dlq) =>
                        Effect.map(options.messageLimits.lookup(dlq), (limit) => {
                          const letter = deadLetter(dlq, source, { message: describe(ruled.error), part: "timer" }, limit)
                          return done({ ...nothing, outputs: [letter] }, "deadLettered")
                        })
                    })
                }
              }
            ))
        })
      })

    /** Fires the due timers still scheduled as they were, one after the other, each into `into` once finished. */
    const fireDue = (
      timers: Timers.Pending,
      due: ReadonlyArray<Timers.Entry>,
      time: number,
      into: Array<Cut.Done<S>>
    ): Effect.Effect<void, unknown, R> =>
      Effect.forEach(
        due,
        (entry) =>
          timers.current(entry)
            ? Effect.map(fire(timers, entry, time), (done) => {
              into.push(done)
            })
            : Effect.void,
        { discard: true }
      )

    /**
     * After a record: its timestamp moves the task's stream time, and the
     * stream-time timers it makes due fire, in the record's unit (kept and
     * committed with it).
     */
    const afterRecord = (entry: Entry<Inputs>, done: Cut.Done<S>): Effect.Effect<Cut.Done<S>, unknown, R> => {
      if (pending === undefined || entry._tag !== "Ready") return Effect.succeed(done)
      const timers = pending
      const advanced = timers.advance(eventTime === undefined ? entry.record.timestamp : eventTime(entry.decoded))
      if (advanced === undefined) return Effect.succeed(done)
      const taskWrites = [...(done.taskWrites ?? []), advanced]
      const due = timers.due("stream-time", timers.streamTime)
      if (due.length === 0) return Effect.succeed({ ...done, taskWrites })
      const fires: Array<Cut.Done<S>> = []
      return Effect.as(fireDue(timers, due, timers.streamTime, fires), fires).pipe(Effect.map((fires) => {
        const outputs = [...done.outputs]
        const others = [...(done.others ?? [])]
        const storeWrites = [...(done.storeWrites ?? [])]
        for (const f of fires) {
          for (const output of f.outputs) outputs.push(output)
          if (f.storeWrites !== undefined) for (const write of f.storeWrites) storeWrites.push(write)
          if (f.change !== undefined) others.push({ key: f.stateKey, change: f.change, encoded: f.encoded })
          if (f.others !== undefined) for (const other of f.others) others.push(other)
          if (f.taskWrites !== undefined) for (const write of f.taskWrites) taskWrites.push(write)
        }
        return { ...done, outputs, others, taskWrites, storeWrites, fired: (done.fired ?? 0) + fires.length }
      }))
    }

    /** A record and, with timers, the timers it makes due: its unit, continued by `then` once it is done. */
    const processUnit = <A>(entry: Entry<Inputs>, then: (done: Cut.Done<S>) => Effect.Effect<A, unknown, R>): Effect.Effect<A, unknown, R> =>
      timed ? processAt(entry, (done) => Eager.flatMap(afterRecord(entry, done), then)) : processAt(entry, then)

    /**
     * As the batch begins (a transformer with timers): the task's timers are
     * read once, stream time moves by an explicit advance, and the timers due
     * fire: stream-time ones left due (a batch cut short), then wall-clock
     * ones due by the `Clock`.
     */
    const timersPrelude: Effect.Effect<void, unknown, R> = !timed ? Effect.void : Effect.gen(function*() {
      if (options.timers === undefined || Option.isNone(store)) {
        return yield* Effect.dieMessage(
          `${transformer.name} has onTimer but no state: timers are kept in the task's state store; give it a state ` +
            "(Transformer.make)"
        )
      }
      yield* Timers.load(options.timers, store.value, { transformer: transformer.name, partition: taskPartition })
      const timers = new Timers.Pending(options.timers)
      pending = timers
      if (options.advanceStreamTime !== undefined) {
        const advanced = timers.advance(options.advanceStreamTime)
        if (advanced !== undefined) before.push({ offset: -1, stateKey: "", outputs: [], change: undefined, disposition: "processed", taskWrites: [advanced] })
      }
      yield* fireDue(timers, timers.due("stream-time", timers.streamTime), timers.streamTime, before)
      const now = yield* Clock.currentTimeMillis
      yield* fireDue(timers, timers.due("wall-clock", now), now, before)
    })

    /**
     * As the batch begins (a transformer with named stores): the stores are
     * checked against what the task's store holds (once per task; a changed
     * declaration dies with the fix), and the batch's view of them is made.
     * A new store's declaration commits with the batch's first unit.
     */
    const storesPrelude: Effect.Effect<void, unknown> = !hasStores ? Effect.void : Effect.gen(function*() {
      if (Option.isNone(store)) {
        return yield* Effect.dieMessage(
          `${transformer.name} has stores but no state: named stores are kept in the task's state store; declare it ` +
            "with Transformer.make"
        )
      }
      const where = { transformer: transformer.name, partition: taskPartition }
      const declared = yield* StoreSchemas.check(store.value, declarations, where)
      const view = new StoreAccess.Overlay(store.value, declarations, where)
      overlay = view
      if (declared.length > 0) {
        view.apply(declared)
        before.push({ offset: -1, stateKey: "", outputs: [], change: undefined, disposition: "processed", storeWrites: declared })
      }
    })
    const prelude = Effect.zipRight(storesPrelude, timersPrelude)

    /**
     * Records that run one after another (no slice in several lanes beside each other): every finished
     * record is kept, so each finished unit is kept as it finishes (`Cut.folded`), in processing order,
     * and the batch holds no unit until it ends, only what the units add to the cut. Otherwise each
     * lane keeps its finished units for `Cut.cut`.
     */
    const folding = lanesPerSlice.every((lanes) => lanes.length <= 1)
    /** The cut kept as the batch runs (`folding`), `before` first: made at the first finished record, once `before` is. */
    let folded: Cut.Folded<S> | undefined = undefined
    const keepDone = (lane: Lane<Inputs, S>, done: Cut.Done<S>): void => {
      lane.finished++
      if (!folding) {
        lane.done.push(done)
        return
      }
      folded ??= Cut.folded(before)
      folded.keepRecord(done)
    }

    /**
     * A lane's records in order. A record done at once (the stream DSL's, `eager.ts`) is followed by
     * the next in the same call, `atOnce` of them before the fiber yields (as the runtime yields
     * every so many steps); any other record's continuation starts the next: the transform's
     * continuation is the lane's own (`finished`), one `flatMap` a record.
     */
    const runLane = (lane: Lane<Inputs, S>): Effect.Effect<void, unknown, R> => {
      const size = lane.size
      if (size === 0) return Effect.void
      let index = 0
      /** True while a record is started (`processUnit` is called): a unit finished then was done at once. */
      let starting = false
      /** The unit of the record being started, when it was done at once: the loop goes on with the next. */
      let doneAtOnce: Cut.Done<S> | undefined = undefined
      const finished = (done: Cut.Done<S>): Effect.Effect<void, unknown, R> => {
        if (starting) {
          doneAtOnce = done
          return Effect.void
        }
        keepDone(lane, done)
        index++
        return rest()
      }
      /** The chunk whose states were read ahead last (`chunkedLane`). */
      let prepared = -1
      /** The lane's records from `index` (past the first, none once `maxDuration` has passed). */
      const rest = (): Effect.Effect<void, unknown, R> => {
        // The clock is read before every `deadlineEvery`-th record done at once, and before each one that follows a
        // record that was not (an Effect: a slow handler's), or a yield.
        for (let ran = 0; index < size && (index === 0 || ran % deadlineEvery !== 0 || !pastDeadline()); ran++) {
          if (ran === atOnce) return Effect.flatMap(Effect.yieldNow(), rest)
          if (lane.chunk !== undefined && index % chunkSize === 0 && prepared !== index) {
            prepared = index
            const reading = prefetch(lane.chunk(index))
            if (reading !== undefined) return Effect.flatMap(reading, rest)
          }
          let unit: Effect.Effect<void, unknown, R>
          starting = true
          try {
            unit = processUnit(lane.entry(index), finished)
          } catch (defect) {
            // Thrown while running at once: the defect a lazy step's throw is.
            unit = Exit.die(defect)
          } finally {
            starting = false
          }
          if (doneAtOnce !== undefined) {
            keepDone(lane, doneAtOnce)
            doneAtOnce = undefined
            index++
            continue
          }
          // Not done yet (its continuation, `finished`, goes on with the lane), or failed at once.
          if (!Eager.isDone(unit) || unit._tag === "Failure") return unit
          return Effect.dieMessage("Skein invariant broken: a record's unit succeeded without finishing")
        }
        return Effect.void
      }
      return Effect.suspend(rest)
    }

    /**
     * Reads the states `entries` need that are neither the batch's nor cached from the store, in one
     * call; `undefined` when there are none (nothing to wait for). Before each chunk of a
     * `chunkedLane`, or before a batch decoded ahead runs.
     */
    const prefetch = (entries: Iterable<Entry<Inputs>>): Effect.Effect<void, StateStoreError> | undefined => {
      if (!prefetches || Option.isNone(store) || Option.isNone(decodeState)) return undefined
      let missing: Set<string> | undefined
      for (const entry of entries) {
        if (entry._tag === "Ready" && knownState(entry.stateKey) === undefined) (missing ??= new Set()).add(entry.stateKey)
      }
      if (missing === undefined) return undefined
      const keys = missing
      const decode = decodeState.value
      return Effect.flatMap(store.value.getMany([...keys]), (values) =>
        Effect.sync(() => {
          let i = 0
          // A state that does not decode is left for readState, which fails its record.
          for (const key of keys) remember(key, values[i++], decode)
        }))
    }

    // A multi-input task's records in timestamp order across its inputs (`taskOrder.ts`): one lane of them all,
    // each finished unit handed back to its slice's lane once the batch ends.
    const order = options.ordered === true && slices.length > 1 && lanesPerSlice.every((lanes) => lanes.length === 1)
      ? TaskOrder.merge(slices.map((slice) => slice.records.map((record) => record.timestamp)))
      : undefined
    const merged: Lane<Inputs, S> | undefined = order === undefined ? undefined : (() => {
      const next = slices.map(() => 0)
      return eagerLane<Inputs, S>(order.map((i) => lanesPerSlice[i]![0]!.entry(next[i]!++)))
    })()

    // The states of the lanes decoded ahead (the merged lane, key-concurrency lanes): read before any record runs.
    const eagerLanes = merged !== undefined ? [merged] : lanesPerSlice.flat().filter((lane) => lane.chunk === undefined)
    const readAhead = prefetch((function*() {
      for (const lane of eagerLanes) for (let i = 0; i < lane.size; i++) yield lane.entry(i)
    })()) ?? Effect.void

    /** The cut of a `folding` batch: each slice's finished records (the merged lane's, a prefix of `order`, by slice). */
    const foldedCut = (): Cut.Cut<S> => {
      const finished = slices.map((slice, i) => {
        const lanes = lanesPerSlice[i]!
        // A slice of no input topic has no lane: none of its records runs, and it is passed over whole (as `Cut.cut` does).
        return lanes.length === 0 ? slice.records.length : lanes[0]!.finished
      })
      if (merged !== undefined && order !== undefined) for (let k = 0; k < merged.finished; k++) finished[order[k]!]!++
      return (folded ?? Cut.folded(before)).cut(slices.map((slice, i) => ({
        offsets: slice.records.map((r) => r.offset),
        endOffset: slice.endOffset,
        finished: finished[i]!
      })))
    }

    const work = Effect.zipRight(
      Effect.zipRight(prelude, readAhead),
      merged !== undefined ? runLane(merged) : Effect.forEach(
        lanesPerSlice,
        (lanes) =>
          lanes.length === 1
            ? runLane(lanes[0]!)
            : Effect.forEach(lanes, runLane, { concurrency: "unbounded", discard: true }),
        { discard: true }
      )
    )
    // Past maxDuration no record starts (each lane reads the clock between records): the batch ends
    // with the records that finished, and the rest of its records continue in the next one.
    if (options.maxDuration !== undefined) deadline = clock.unsafeCurrentTimeMillis() + Duration.toMillis(options.maxDuration)
    const finished = yield* Effect.race(Effect.exit(work), Effect.as(options.stop, undefined))
    // The state keys seen in more than one partition, as the records were decoded (ahead or a chunk at a time).
    yield* StateKeyCheck.logSplits(options.stateKeys, transformer.name)
    const interrupted = finished === undefined
    const failure = finished !== undefined && Exit.isFailure(finished)
      ? Option.some(finished.cause as Cause.Cause<RecordError<E>>)
      : Option.none()

    const kept = folding ? foldedCut() : Cut.cut(slices.map((slice, i) => {
      const lanes = lanesPerSlice[i]!
      return {
        offsets: slice.records.map((r) => r.offset),
        endOffset: slice.endOffset,
        lanes: lanes.length === 0 ? [] : lanes
      }
    }), before)

    // Each kept change was encoded (and checked to read back) by the record that made it, but those stored at the end.
    const writes: Array<StoreWrite> = []
    for (const [key, value] of kept.encoded) writes.push({ key, value })
    for (const key of kept.atEnd) {
      const state = kept.states.get(key)
      if (state === undefined || Option.isNone(storedSteps)) {
        return yield* Effect.dieMessage(`Skein invariant broken: ${transformer.name}'s state ${key} is stored at the end without a state`)
      }
      if (Option.isNone(state)) {
        writes.push({ key, value: null })
        continue
      }
      const stored = storedSteps.value.store(state.value)
      if (Either.isLeft(stored)) {
        return yield* Effect.dieMessage(
          `Skein invariant broken: ${transformer.name}'s state ${key}, stored at the end, cannot be stored: ${String(stored.left.cause)}`
        )
      }
      writes.push({ key, value: stored.right })
    }
    return {
      outputs: kept.outputs,
      writes,
      states: kept.states,
      cuts: kept.cuts,
      processed: kept.processed,
      skipped: kept.skipped,
      deadLettered: kept.deadLettered,
      disposedRuns: kept.disposedRuns,
      taskWrites: kept.taskWrites,
      fired: kept.fired,
      retries,
      timedOut,
      failure,
      interrupted
    }
  })
