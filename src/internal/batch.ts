/**
 * Processing one task's share of a poll: decode each record, run the
 * transform in offset order (per state key, concurrently, for topics with key
 * concurrency), and gather the outputs, the final state per key and the
 * offsets to commit.
 *
 * Processing may end early: a record fails fatally, or `stop` completes (a
 * grace period ran out and running handlers are interrupted). What finished
 * before is still committed: the result keeps, per input partition, the
 * records below a cut (the first record not finished), with only their
 * outputs and state.
 *
 * @internal
 */
import { Cause, Effect, Either, Exit, Option, Schedule, Schema } from "effect"
import type { ParseResult } from "effect"
import type { Semaphore } from "effect/Effect"
import type { KafkaError } from "../SkeinError.ts"
import { DecodeError, EncodeError, OutputTooLarge, StateStoreError } from "../SkeinError.ts"
import type * as Topic from "../Topic.ts"
import type { RecordOf, Result, Transformer } from "../Transformer.ts"
import type { FetchedRecord } from "./kafka/consumer.ts"
import { recordSizeBound } from "./kafka/producer.ts"
import type { StateCache } from "./StateCache.ts"
import * as StateKeyCheck from "./StateKeyCheck.ts"
import type { StateStore, StoreWrite } from "./StateStore.ts"

/** The records of one input partition in a poll. */
export interface Slice {
  readonly topic: string
  readonly partition: number
  readonly records: ReadonlyArray<FetchedRecord>
  /** The offset to commit once every record of the slice is processed. */
  readonly endOffset: number
}

/** The errors that end processing at a record. */
export type RecordError<E> = E | DecodeError | EncodeError | StateStoreError | OutputTooLarge | KafkaError

export interface Options {
  readonly deadLetterTopic: Option.Option<string>
  /** Completes when running handlers must be interrupted (a grace period ran out). */
  readonly stop: Effect.Effect<void>
  /** Permits for transform calls across all tasks (`maxConcurrency`). */
  readonly permits: Option.Option<Semaphore>
  /** The size limit of a record for each output topic. */
  readonly messageLimits: MessageLimits
  /** The task's committed states, decoded (a read-through cache of its store). */
  readonly cache: StateCache
  /** Warns about state keys that span input partitions (`checkStateKeys`); unset: no check. */
  readonly stateKeys?: StateKeyCheck.StateKeyCheck | undefined
}

/** The size limit of a record per output topic: known synchronously once looked up. */
export interface MessageLimits {
  readonly known: (topic: string) => number | undefined
  readonly lookup: (topic: string) => Effect.Effect<number, KafkaError>
}

export interface TaskBatchResult<E> {
  /** Outputs and dead letters of the kept records, in processing order. */
  readonly outputs: ReadonlyArray<Topic.EncodedRecord>
  /** The final state per key reached by the kept records (one write per key). */
  readonly writes: ReadonlyArray<StoreWrite>
  /** The same final states, decoded: for the state cache once they are committed. */
  readonly states: ReadonlyMap<string, Option.Option<unknown>>
  /** Per slice (same order): the next offset to commit and how many of its records are kept. */
  readonly cuts: ReadonlyArray<{ readonly offset: number; readonly kept: number }>
  readonly processed: number
  readonly skipped: number
  readonly deadLettered: number
  readonly retries: number
  /** The fatal failure that ended processing early, if any. */
  readonly failure: Option.Option<Cause.Cause<RecordError<E>>>
  /** True when `stop` interrupted running handlers. */
  readonly interrupted: boolean
}

const text = (buffer: Buffer | null): string | null => (buffer === null ? null : buffer.toString("utf8"))

const describe = (error: unknown): string =>
  error instanceof Error ? `${error.name}: ${error.message}` : typeof error === "string" ? error : JSON.stringify(error)

/**
 * A record's copy for the dead letter topic: the original key and value, with
 * the error and the record's coordinates in headers.
 */
export const deadLetter = (
  deadLetterTopic: string,
  record: FetchedRecord,
  error: { readonly message: string; readonly part?: string }
): Topic.EncodedRecord => ({
  topic: deadLetterTopic,
  key: text(record.key),
  value: text(record.value),
  headers: {
    "skein.error": error.message,
    "skein.error.part": error.part ?? "transform",
    "skein.source.topic": record.topic,
    "skein.source.partition": String(record.partition),
    "skein.source.offset": String(record.offset),
    "skein.source.timestamp": String(record.timestamp)
  }
})

/** The bytes a record takes in a record batch (an upper bound). */
const recordBytes = (record: Topic.EncodedRecord): number => {
  let bytes = 90 + Buffer.byteLength(record.key ?? "") + Buffer.byteLength(record.value ?? "")
  if (record.headers !== undefined) {
    for (const [name, value] of Object.entries(record.headers)) bytes += 10 + Buffer.byteLength(name) + Buffer.byteLength(value)
  }
  return bytes
}

/** A record decoded ahead of processing. */
interface Entry<Inputs extends ReadonlyArray<Topic.Any>> {
  readonly record: FetchedRecord
  readonly decoded: Either.Either<RecordOf<Inputs>, DecodeError>
  readonly stateKey: string
}

/** A finished record: what it produced and the state of its key after it. */
interface Done<S> {
  readonly offset: number
  readonly stateKey: string
  readonly outputs: ReadonlyArray<Topic.EncodedRecord>
  /** `undefined`: the state was not changed; otherwise the new state (`None`: deleted). */
  readonly change: Option.Option<S> | undefined
  readonly disposition: "processed" | "skipped" | "deadLettered"
}

/** Records processed one after the other. */
interface Lane<Inputs extends ReadonlyArray<Topic.Any>, S> {
  readonly entries: ReadonlyArray<Entry<Inputs>>
  readonly done: Array<Done<S>>
}

/** What one transform attempt produced. */
interface Attempt<S> {
  readonly outputs: ReadonlyArray<Topic.EncodedRecord>
  readonly change: Option.Option<S> | undefined
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
    const encodeState = Option.map(transformer.state, (codec) => Schema.encodeEither(codec))
    const hasRules = transformer.rules.length > 0
    /** The transform's private copy of a state: its mutations never leak into other records. */
    const copy = (state: Option.Option<S>) => Option.map(state, (s) => typeof s === "object" && s !== null ? structuredClone(s) : s)
    const states = new Map<string, Option.Option<S>>()
    let retries = 0

    // Decoding (synchronous) and lanes: one per slice, or one per state key for key concurrency.
    const lanesPerSlice = slices.map((slice): ReadonlyArray<Lane<Inputs, S>> => {
      const topic = topics.get(slice.topic)
      const entries: Array<Entry<Inputs>> = []
      for (const record of slice.records) {
        if (topic === undefined) continue
        const decoded = topic.decode(text(record.key), text(record.value))
        if (Either.isLeft(decoded)) {
          const error = new DecodeError({
            topic: record.topic,
            partition: record.partition,
            offset: record.offset,
            part: decoded.left.part,
            cause: decoded.left.cause
          })
          entries.push({ record, decoded: Either.left(error), stateKey: "" })
          continue
        }
        const value = {
          topic: record.topic,
          partition: record.partition,
          offset: record.offset,
          key: decoded.right.key,
          value: decoded.right.value,
          headers: record.headers,
          timestamp: record.timestamp
        } as RecordOf<Inputs>
        entries.push({ record, decoded: Either.right(value), stateKey: StateKeyCheck.observe(options.stateKeys, transformer.stateKey(value), record.partition) })
      }
      if (topic === undefined || !topic.keyConcurrency) return [{ entries, done: [] }]
      const byKey = new Map<string, Array<Entry<Inputs>>>()
      for (const entry of entries) {
        // A poison record has no state key: its own lane.
        const key = Either.isLeft(entry.decoded) ? `\u0000poison-${entry.record.offset}` : entry.stateKey
        const lane = byKey.get(key)
        if (lane === undefined) byKey.set(key, [entry])
        else lane.push(entry)
      }
      return [...byKey.values()].map((laneEntries) => ({ entries: laneEntries, done: [] }))
    })

    yield* StateKeyCheck.logSplits(options.stateKeys, transformer.name)

    /** The state of a key when known without reading the store; `undefined` otherwise. */
    const knownState = (stateKey: string): Option.Option<S> | undefined => {
      const current = states.get(stateKey)
      if (current !== undefined) return current
      if (Option.isNone(store) || Option.isNone(decodeState)) return Option.none()
      const committed = options.cache.get(stateKey) as Option.Option<S> | undefined
      if (committed !== undefined) states.set(stateKey, committed)
      return committed
    }

    /** Decodes a stored state and remembers it for the batch and in the cache; `undefined`: no state. */
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

    const readState = (stateKey: string): Effect.Effect<Option.Option<S>, StateStoreError> => {
      if (Option.isNone(store) || Option.isNone(decodeState)) return Effect.succeed(Option.none())
      const db = store.value
      const decode = decodeState.value
      return Effect.flatMap(db.get(stateKey), (stored) =>
        Either.mapLeft(
          remember(stateKey, stored, decode),
          (cause) => new StateStoreError({ operation: `decode state of ${stateKey}`, path: db.path, cause })
        ))
    }

    /** Checks an encoded output against its topic's size limit. */
    const checkSize = (
      encoded: Topic.EncodedRecord,
      limit: number,
      source: FetchedRecord
    ): Either.Either<Topic.EncodedRecord, OutputTooLarge> => {
      if (recordSizeBound(encoded) <= limit && encoded.headers === undefined) return Either.right(encoded)
      const bytes = recordBytes(encoded)
      if (bytes <= limit) return Either.right(encoded)
      return Either.left(
        new OutputTooLarge({
          topic: encoded.topic,
          bytes,
          limit,
          source: { topic: source.topic, partition: source.partition, offset: source.offset }
        })
      )
    }

    /** Encodes a result's outputs and checks their sizes: synchronous once each topic's limit is known. */
    const encodeOutputs = (
      result: Result<S>,
      source: FetchedRecord
    ): Effect.Effect<ReadonlyArray<Topic.EncodedRecord>, EncodeError | OutputTooLarge | KafkaError> => {
      const emit = result.emit ?? []
      const outputs: Array<Topic.EncodedRecord> = []
      for (let i = 0; i < emit.length; i++) {
        const encoded = emit[i]!.encode()
        if (Either.isLeft(encoded)) return Either.left(encoded.left)
        const limit = options.messageLimits.known(encoded.right.topic)
        if (limit === undefined) {
          // The first output for this topic: look its limit up, then go on.
          const rest = emit.slice(i)
          return Effect.gen(function*() {
            for (const output of rest) {
              const next = yield* output.encode()
              outputs.push(yield* checkSize(next, yield* options.messageLimits.lookup(next.topic), source))
            }
            return outputs
          })
        }
        const checked = checkSize(encoded.right, limit, source)
        if (Either.isLeft(checked)) return Either.left(checked.left)
        outputs.push(checked.right)
      }
      return Either.right(outputs)
    }

    const changeOf = (result: Result<S>): Option.Option<S> | undefined =>
      result.state === undefined ? undefined : result.state._tag === "Set" ? Option.some(result.state.value) : Option.none()

    const attempt = (decoded: RecordOf<Inputs>, state: Option.Option<S>, source: FetchedRecord) => {
      const call = Effect.flatMap(
        Effect.suspend(() => transformer.transform(decoded, state)),
        (result) =>
          Effect.map(encodeOutputs(result, source), (outputs): Attempt<S> => ({ outputs, change: changeOf(result) }))
      )
      return Option.isSome(options.permits) ? options.permits.value.withPermits(1)(call) : call
    }

    /**
     * Whether a rule handles an error: a tagged rule by `_tag`, any other by its
     * `when`, which never sees Skein's own errors (`OutputTooLarge`, `EncodeError`).
     */
    const matches = (rule: Transformer<Inputs, S, E, R>["rules"][number], error: unknown): boolean => {
      if (rule.tag !== undefined) {
        return typeof error === "object" && error !== null && "_tag" in error && error._tag === rule.tag
      }
      if (error instanceof OutputTooLarge || error instanceof EncodeError) return false
      return (rule.when as (e: unknown) => boolean)(error)
    }

    /** Runs the transform with the error rules: retries on the rule's schedule, then its disposition. */
    const withRules = (entry: Entry<Inputs>, decoded: RecordOf<Inputs>, state: Option.Option<S>) =>
      Effect.gen(function*() {
        // Each attempt gets a fresh copy: a retry sees the state as it was before the failed attempt.
        const fresh = () => attempt(decoded, copy(state), entry.record)
        let outcome = yield* Effect.either(fresh())
        if (Either.isRight(outcome)) return { ...outcome.right, disposition: "processed" as const }
        const failed = outcome.left
        const rule = transformer.rules.find((r) => matches(r, failed))
        if (rule === undefined || failed instanceof EncodeError) return yield* Effect.fail(failed)
        if (rule.retry !== undefined) {
          const driver = yield* Schedule.driver(rule.retry as Schedule.Schedule<unknown, unknown>)
          while (Either.isLeft(outcome) && matches(rule, outcome.left)) {
            const step = yield* Effect.either(driver.next(outcome.left))
            if (Either.isLeft(step)) break
            retries++
            outcome = yield* Effect.either(fresh())
          }
        }
        if (Either.isRight(outcome)) return { ...outcome.right, disposition: "processed" as const }
        const error = outcome.left
        if (rule.then === "fail" || !matches(rule, error)) return yield* Effect.fail(error)
        if (rule.then === "skip") {
          const r = entry.record
          yield* Effect.logWarning(`skipped ${r.topic}/${r.partition}@${r.offset}: ${describe(error)}`)
          return { outputs: [], change: undefined, disposition: "skipped" as const }
        }
        if (Option.isNone(options.deadLetterTopic)) return yield* Effect.fail(error)
        return {
          outputs: [deadLetter(options.deadLetterTopic.value, entry.record, { message: describe(error) })],
          change: undefined,
          disposition: "deadLettered" as const
        }
      })

    const finish = (entry: Entry<Inputs>, finished: Attempt<S>, disposition: Done<S>["disposition"]): Done<S> => {
      if (finished.change !== undefined) states.set(entry.stateKey, finished.change)
      return {
        offset: entry.record.offset,
        stateKey: entry.stateKey,
        outputs: finished.outputs,
        change: finished.change,
        disposition
      }
    }

    const processKnown = (entry: Entry<Inputs>, decoded: RecordOf<Inputs>, state: Option.Option<S>) =>
      hasRules
        ? Effect.map(withRules(entry, decoded, state), (finished) => finish(entry, finished, finished.disposition))
        : Effect.map(attempt(decoded, copy(state), entry.record), (finished) => finish(entry, finished, "processed"))

    const processEntry = (entry: Entry<Inputs>): Effect.Effect<Done<S>, RecordError<E>, R> => {
      if (Either.isLeft(entry.decoded)) {
        // A poison record never reaches the transform: it goes to the dead letter
        // topic inside this batch's transaction, or, with none configured, fails the run.
        const error = entry.decoded.left
        if (Option.isNone(options.deadLetterTopic)) return Effect.fail(error)
        const dlq = options.deadLetterTopic.value
        return Effect.as(Effect.logWarning(`poison record sent to ${dlq}: ${error.message}`), {
          offset: entry.record.offset,
          stateKey: "",
          outputs: [deadLetter(dlq, entry.record, error)],
          change: undefined,
          disposition: "deadLettered"
        })
      }
      const decoded = entry.decoded.right
      const known = knownState(entry.stateKey)
      return known === undefined
        ? Effect.flatMap(readState(entry.stateKey), (state) => processKnown(entry, decoded, state))
        : processKnown(entry, decoded, known)
    }

    const runLane = (lane: Lane<Inputs, S>) =>
      Effect.suspend(() => {
        let index = 0
        const next: Effect.Effect<void, RecordError<E>, R> = Effect.suspend(() => {
          const entry = lane.entries[index]
          if (entry === undefined) return Effect.void
          return Effect.flatMap(processEntry(entry), (done) => {
            lane.done.push(done)
            index++
            return next
          })
        })
        return next
      })

    // The states this batch needs that are not cached: read from the store in one call.
    const missing = new Set<string>()
    for (const lanes of lanesPerSlice) {
      for (const lane of lanes) {
        for (const entry of lane.entries) {
          if (Either.isRight(entry.decoded) && knownState(entry.stateKey) === undefined) missing.add(entry.stateKey)
        }
      }
    }
    const prefetch = missing.size === 0 || Option.isNone(store) || Option.isNone(decodeState)
      ? Effect.void
      : Effect.flatMap(store.value.getMany([...missing]), (values) =>
        Effect.sync(() => {
          let i = 0
          // A state that does not decode is left for readState, which fails its record.
          for (const key of missing) remember(key, values[i++], decodeState.value)
        }))

    const work = Effect.zipRight(prefetch, Effect.forEach(
      lanesPerSlice,
      (lanes) =>
        lanes.length === 1
          ? runLane(lanes[0]!)
          : Effect.forEach(lanes, runLane, { concurrency: "unbounded", discard: true }),
      { discard: true }
    ))
    const finished = yield* Effect.race(Effect.exit(work), Effect.as(options.stop, undefined))
    const interrupted = finished === undefined
    const failure = finished !== undefined && Exit.isFailure(finished) ? Option.some(finished.cause) : Option.none()

    // The cut of each slice: its first record that did not finish (in any lane).
    const outputs: Array<Topic.EncodedRecord> = []
    const finalStates = new Map<string, Option.Option<S>>()
    const cuts: Array<{ offset: number; kept: number }> = []
    let processed = 0
    let skipped = 0
    let deadLettered = 0
    slices.forEach((slice, i) => {
      const lanes = lanesPerSlice[i]!
      let cut = slice.endOffset
      for (const lane of lanes) {
        const unfinished = lane.entries[lane.done.length]
        if (unfinished !== undefined) cut = Math.min(cut, unfinished.record.offset)
      }
      for (const lane of lanes) {
        for (const done of lane.done) {
          if (done.offset >= cut) break
          outputs.push(...done.outputs)
          if (done.change !== undefined) finalStates.set(done.stateKey, done.change)
          processed++
          if (done.disposition === "skipped") skipped++
          else if (done.disposition === "deadLettered") deadLettered++
        }
      }
      let kept = 0
      while (kept < slice.records.length && slice.records[kept]!.offset < cut) kept++
      cuts.push({ offset: cut, kept })
    })

    const writes: Array<StoreWrite> = []
    if (Option.isSome(encodeState)) {
      for (const [key, state] of finalStates) {
        if (Option.isNone(state)) {
          writes.push({ key, value: null })
          continue
        }
        const encoded = encodeState.value(state.value)
        if (Either.isLeft(encoded)) {
          const error = new EncodeError({ topic: `state of ${transformer.name}`, cause: encoded.left })
          // Nothing of this task's batch commits: the run (or partition) ends with the error.
          return {
            outputs: [],
            writes: [],
            states: new Map(),
            cuts: slices.map((slice) => ({ offset: slice.records[0]?.offset ?? slice.endOffset, kept: 0 })),
            processed: 0,
            skipped: 0,
            deadLettered: 0,
            retries,
            failure: Option.some(Cause.fail(error)),
            interrupted
          }
        }
        writes.push({ key, value: encoded.right })
      }
    }
    return { outputs, writes, states: finalStates, cuts, processed, skipped, deadLettered, retries, failure, interrupted }
  })
