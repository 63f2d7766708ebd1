/**
 * Processing one task's share of a batch: decode, bucket by state key, run
 * the transform serially per bucket and concurrently across buckets, and
 * collect the outputs and the final state per key.
 *
 * @internal
 */
import { Effect, Option, Schedule, Schema } from "effect"
import type { Either } from "effect"
import { DecodeError, EncodeError, StateStoreError } from "../SkeinError.ts"
import type * as Topic from "../Topic.ts"
import type { RecordOf, Result, Transformer } from "../Transformer.ts"
import type { FetchedRecord } from "./kafka/consumer.ts"
import type { StateStore, StoreWrite } from "./StateStore.ts"

export interface TaskBatchResult {
  readonly outputs: ReadonlyArray<Topic.EncodedRecord>
  /** Records skipped, dead-lettered and transform retries, by error rules. */
  readonly skipped: number
  readonly deadLettered: number
  readonly retries: number
  /** The final state per key reached in the batch (one write per key). */
  readonly writes: ReadonlyArray<StoreWrite>
}

interface Entry {
  readonly record: FetchedRecord
  readonly topicIndex: number
}

const text = (buffer: Buffer | null): string | null => (buffer === null ? null : buffer.toString("utf8"))

/** Decodes a fetched record with its topic's Schemas; a failure is a poison record. */
export const decode = <Inputs extends ReadonlyArray<Topic.Any>>(
  topic: Topic.Any,
  record: FetchedRecord
): Effect.Effect<RecordOf<Inputs>, DecodeError> =>
  topic.decode(text(record.key), text(record.value)).pipe(
    Effect.map((decoded) =>
      ({
        topic: record.topic,
        partition: record.partition,
        offset: record.offset,
        key: decoded.key,
        value: decoded.value,
        headers: record.headers,
        timestamp: record.timestamp
      }) as RecordOf<Inputs>
    ),
    Effect.mapError((failure) =>
      new DecodeError({
        topic: record.topic,
        partition: record.partition,
        offset: record.offset,
        part: failure.part,
        cause: failure.cause
      })
    )
  )

/** Runs the transform over one task's records of a batch. */
/**
 * A poison record's copy for the dead letter topic: the original key and
 * value, with the decode error and the record's coordinates in headers.
 */
const describe = (error: unknown): string =>
  error instanceof Error ? `${error.name}: ${error.message}` : typeof error === "string" ? error : JSON.stringify(error)

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

export const run = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  store: Option.Option<StateStore>,
  records: ReadonlyArray<FetchedRecord>,
  deadLetterTopic: Option.Option<string> = Option.none()
): Effect.Effect<TaskBatchResult, E | DecodeError | EncodeError | StateStoreError, R> =>
  Effect.gen(function*() {
    const topics = new Map(transformer.inputs.map((topic, index) => [topic.name, { topic, index }]))
    const buckets = new Map<string, Array<{ entry: Entry; decoded: RecordOf<Inputs> }>>()
    const deadLetters: Array<Topic.EncodedRecord> = []
    let skipped = 0
    let deadLettered = 0
    let retries = 0
    for (const record of records) {
      const input = topics.get(record.topic)
      if (input === undefined) continue
      const result = yield* Effect.either(decode<Inputs>(input.topic, record))
      if (result._tag === "Left") {
        // A poison record never reaches the transform: it goes to the dead letter
        // topic inside this batch's transaction, or, with none configured, fails the run.
        if (Option.isNone(deadLetterTopic)) return yield* Effect.fail(result.left)
        yield* Effect.logWarning(`poison record sent to ${deadLetterTopic.value}: ${result.left.message}`)
        deadLetters.push(deadLetter(deadLetterTopic.value, record, result.left))
        continue
      }
      const decoded = result.right
      const stateKey = transformer.stateKey(decoded)
      let bucket = buckets.get(stateKey)
      if (bucket === undefined) {
        bucket = []
        buckets.set(stateKey, bucket)
      }
      bucket.push({ entry: { record, topicIndex: input.index }, decoded })
    }

    const codec = transformer.state
    const decodeState = Option.map(codec, (c) => Schema.decode(c))
    const encodeState = Option.map(codec, (c) => Schema.encode(c))
    const writes: Array<StoreWrite> = []

    const runBucket = (stateKey: string, bucket: ReadonlyArray<{ entry: Entry; decoded: RecordOf<Inputs> }>) =>
      Effect.gen(function*() {
        const ordered = [...bucket].sort((a, b) =>
          a.entry.topicIndex - b.entry.topicIndex || a.entry.record.offset - b.entry.record.offset
        )
        let state: Option.Option<S> = Option.none()
        let loaded = false
        let changed = false
        const outputs: Array<Topic.OutputRecord> = []
        for (const { decoded, entry } of ordered) {
          if (!loaded && Option.isSome(store) && Option.isSome(decodeState)) {
            const stored = yield* store.value.get(stateKey)
            if (stored !== undefined) {
              state = Option.some(
                yield* Effect.mapError(
                  decodeState.value(stored),
                  (cause) => new StateStoreError({ operation: `decode state of ${stateKey}`, path: store.value.path, cause })
                )
              )
            }
            loaded = true
          }
          // Each attempt gets a fresh copy: a retry sees the state as it was before the failed attempt.
          const stateBefore = state
          const attempt = Effect.suspend(() => transformer.transform(decoded, Option.map(stateBefore, (s) => structuredClone(s))))
          const outcome = yield* Effect.either(attempt)
          let result: Result<S> | undefined = undefined
          if (outcome._tag === "Right") {
            result = outcome.right
          } else {
            const rule = transformer.rules.find((r) => r.when(outcome.left))
            if (rule === undefined) return yield* Effect.fail(outcome.left)
            let retried: Either.Either<Result<S>, E> = outcome
            if (rule.retry !== undefined) {
              const driver = yield* Schedule.driver(rule.retry)
              while (retried._tag === "Left" && rule.when(retried.left)) {
                const step = yield* Effect.either(driver.next(retried.left))
                if (step._tag === "Left") break
                retries++
                retried = yield* Effect.either(attempt)
              }
            }
            if (retried._tag === "Right") {
              result = retried.right
            } else if (rule.then === "fail" || !rule.when(retried.left)) {
              return yield* Effect.fail(retried.left)
            } else if (rule.then === "skip") {
              skipped++
              yield* Effect.logWarning(
                `skipped ${entry.record.topic}/${entry.record.partition}@${entry.record.offset}: ${describe(retried.left)}`
              )
            } else if (Option.isSome(deadLetterTopic)) {
              deadLettered++
              deadLetters.push(deadLetter(deadLetterTopic.value, entry.record, { message: describe(retried.left) }))
            } else {
              return yield* Effect.fail(retried.left)
            }
          }
          if (result === undefined) continue
          if (result.emit !== undefined) outputs.push(...result.emit)
          if (result.state !== undefined) {
            changed = true
            state = result.state._tag === "Set" ? Option.some(structuredClone(result.state.value)) : Option.none()
          }
        }
        if (changed && Option.isSome(encodeState)) {
          if (Option.isSome(state)) {
            const encoded = yield* Effect.mapError(
              encodeState.value(state.value),
              (cause) => new EncodeError({ topic: `state of ${transformer.name}`, cause })
            )
            writes.push({ key: stateKey, value: encoded })
          } else {
            writes.push({ key: stateKey, value: null })
          }
        }
        return outputs
      })

    const outputs = yield* Effect.forEach([...buckets], ([stateKey, bucket]) => runBucket(stateKey, bucket), {
      concurrency: "unbounded"
    })
    const encoded = yield* Effect.forEach(outputs.flat(), (output) => output.encode)
    return { outputs: [...deadLetters, ...encoded], writes, skipped, deadLettered, retries }
  })
