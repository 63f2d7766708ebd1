/**
 * A transform's outputs in their wire form: encoded with their topics'
 * Schemas, stamped with the input record's timestamp unless they set their
 * own (and, when traced, with their transform's trace context: `tracing.ts`),
 * and checked against each topic's record size limit, its timestamp limits
 * and, when they name one, its partitions before they reach the
 * transaction, so an oversized record, a timestamp the broker would refuse or
 * a missing partition fails its transform (`OutputTooLarge`,
 * `TimestampOutOfRange`, `PartitionOutOfRange`, which a rule can handle)
 * instead of poisoning the batch (a delivery the broker refuses is retried).
 *
 * @internal
 */
import { Clock, Effect, Either } from "effect"
import type { EncodeError, KafkaError } from "../../SkeinError.ts"
import { OutputTooLarge, PartitionOutOfRange, TimestampOutOfRange } from "../../SkeinError.ts"
import type { OutputTopicConfig } from "../kafka/admin.ts"
import type * as Topic from "../../Topic.ts"
import type { FetchedRecord } from "../kafka/consumer.ts"
import * as PartitionCounts from "./partitionCounts.ts"
import { recordBytes, recordSizeBound } from "../kafka/recordSize.ts"
import * as Tracing from "./tracing.ts"

/** How far from the clock an output topic accepts timestamps, in ms (`Infinity`: any). */
export interface TimestampLimits {
  readonly afterMs: number
  readonly beforeMs: number
}

/**
 * `message.timestamp.after.max.ms` when a topic's configuration cannot be
 * read (not created yet, or no DescribeConfigs ACL): Kafka 4's default, one
 * hour (Kafka 3.x accepted any). A broker with a larger limit then has a
 * record refused here that it would take; one with a smaller limit still
 * refuses it at delivery.
 */
export const defaultTimestampAfterMaxMs = 3_600_000

/**
 * The limits of each output topic: the size of a record and how far from
 * the clock its timestamp may be, known synchronously once looked up.
 */
export interface MessageLimits {
  /** The topic's size limit, once looked up. */
  readonly known: (topic: string) => number | undefined
  /** The topic's size limit: the known one, or looked up (once, with its timestamp limits). */
  readonly lookup: (topic: string) => Effect.Effect<number, KafkaError>
  /** The topic's timestamp limits, once looked up. */
  readonly timestamps: (topic: string) => TimestampLimits | undefined
  /** The clock the timestamps are checked against (the broker checks against its own). */
  readonly now: () => number
  /** The clock's last reading by `now` (never later than the clock): a bound that needs no reading. */
  readonly lastNow: () => number
}

/**
 * A limit no timestamp can pass: Kafka's default `message.timestamp.before.max.ms` is Java's
 * `Long.MAX_VALUE`, past any clock. Read as a number it is finite, and every output would read the
 * clock to check it (`timestampError`), as a topic with a real limit needs.
 */
const unbounded = (limitMs: number): number => limitMs >= Number.MAX_SAFE_INTEGER ? Infinity : limitMs

const timestampLimitsOf = (config: OutputTopicConfig | undefined): TimestampLimits =>
  config?.timestampType === "LogAppendTime"
    ? { afterMs: Infinity, beforeMs: Infinity }
    : {
      afterMs: unbounded(config?.timestampAfterMaxMs ?? defaultTimestampAfterMaxMs),
      beforeMs: unbounded(config?.timestampBeforeMaxMs ?? Infinity)
    }

/**
 * The limits of a runner's output topics, looked up once per topic (one
 * DescribeConfigs): `min(maxMessageBytes, the topic's max.message.bytes)`, and
 * its `message.timestamp.after.max.ms` and `before.max.ms` (none with
 * `message.timestamp.type=LogAppendTime`), checked against `clock`.
 */
export const makeMessageLimits = (
  maxMessageBytes: number,
  topicConfig: (topic: string) => Effect.Effect<OutputTopicConfig | undefined, KafkaError>,
  clock: Clock.Clock = Clock.make()
): MessageLimits => {
  const limits = new Map<string, number>()
  const timestamps = new Map<string, TimestampLimits>()
  let last = Number.NEGATIVE_INFINITY
  return {
    known: (topic) => limits.get(topic),
    lookup: (topic) => {
      const known = limits.get(topic)
      return known !== undefined ? Effect.succeed(known) : Effect.map(topicConfig(topic), (config) => {
        const effective = Math.min(maxMessageBytes, config?.maxMessageBytes ?? maxMessageBytes)
        timestamps.set(topic, timestampLimitsOf(config))
        limits.set(topic, effective)
        return effective
      })
    },
    timestamps: (topic) => timestamps.get(topic),
    now: () => (last = clock.unsafeCurrentTimeMillis()),
    lastNow: () => last
  }
}

/**
 * Why a stamped output's timestamp is refused by its topic, if it is: the broker refuses a record
 * past its limits (`INVALID_TIMESTAMP`), and a retry would not help.
 */
const timestampError = (
  encoded: Topic.EncodedRecord,
  limits: TimestampLimits | undefined,
  messageLimits: MessageLimits,
  source: FetchedRecord
): TimestampOutOfRange | undefined => {
  const timestamp = encoded.timestamp
  if (timestamp === undefined || limits === undefined) return undefined
  // No lower bound, and within the upper one of an earlier reading: within it of the clock now (which is
  // no earlier), without reading it (one read per output was 0.5 % of a windowed job's CPU).
  if (limits.beforeMs === Infinity && timestamp - messageLimits.lastNow() <= limits.afterMs) return undefined
  const clock = messageLimits.now()
  const bound = timestamp - clock > limits.afterMs ? "after" : clock - timestamp > limits.beforeMs ? "before" : undefined
  if (bound === undefined) return undefined
  return new TimestampOutOfRange({
    topic: encoded.topic,
    timestamp,
    now: clock,
    bound,
    limitMs: bound === "after" ? limits.afterMs : limits.beforeMs,
    source: { topic: source.topic, partition: source.partition, offset: source.offset }
  })
}

/** Why an encoded output is refused by its topic's size limit, if it is. */
const sizeError = (
  encoded: Topic.EncodedRecord,
  limit: number,
  source: FetchedRecord
): OutputTooLarge | undefined => {
  // The bound counts headers too (a name or a text value at 3 bytes a UTF-16 unit): under the limit, the record is.
  if (recordSizeBound(encoded) <= limit) return undefined
  const bytes = recordBytes(encoded)
  if (bytes <= limit) return undefined
  return new OutputTooLarge({
    topic: encoded.topic,
    bytes,
    limit,
    source: { topic: source.topic, partition: source.partition, offset: source.offset }
  })
}

/**
 * `encoded` with `timestamp`, built as one literal: a spread copy gains the
 * timestamp as an out-of-object property, an allocation more per output.
 */
const withTimestamp = (encoded: Topic.EncodedRecord, timestamp: number): Topic.EncodedRecord => {
  const { headers, key, partition, topic, value } = encoded
  if (headers === undefined) {
    return partition === undefined ? { topic, key, value, timestamp } : { topic, key, value, partition, timestamp }
  }
  return partition === undefined
    ? { topic, key, value, headers, timestamp }
    : { topic, key, value, headers, partition, timestamp }
}

/**
 * An output with `defaultTimestamp` (its input's, when the input has one), unless
 * it sets its own, and with the trace context of its transform when traced.
 */
const stamped = (
  encoded: Topic.EncodedRecord,
  defaultTimestamp: number | undefined,
  trace: Tracing.TraceHeaders | undefined
): Topic.EncodedRecord => {
  // An output of Skein's own (`Topic.record`) carries it already; another `OutputRecord` may not.
  const timed = encoded.timestamp !== undefined || defaultTimestamp === undefined ? encoded : withTimestamp(encoded, defaultTimestamp)
  return trace === undefined ? timed : Tracing.withTraceHeaders(timed, trace)
}

/** True when an output names no partition, or one its topic is known to have. */
const knownInRange = (encoded: Topic.EncodedRecord, counts: PartitionCounts.PartitionCounts): boolean => {
  if (encoded.partition === undefined) return true
  const count = counts.known(encoded.topic)
  return count !== undefined && PartitionCounts.inRange(encoded.partition, count)
}

/** Checks an output's partition against its topic's count, looked up again before refusing it. */
const checkPartition = (
  encoded: Topic.EncodedRecord,
  counts: PartitionCounts.PartitionCounts,
  source: FetchedRecord
): Effect.Effect<void, PartitionOutOfRange | KafkaError> => {
  const partition = encoded.partition
  if (partition === undefined) return Effect.void
  return Effect.gen(function*() {
    const count = yield* counts.lookup(encoded.topic)
    if (PartitionCounts.inRange(partition, count)) return
    const current = count === null ? count : yield* counts.refresh(encoded.topic)
    if (PartitionCounts.inRange(partition, current)) return
    return yield* Effect.fail(
      new PartitionOutOfRange({
        topic: encoded.topic,
        partition,
        partitions: current ?? 0,
        source: { topic: source.topic, partition: source.partition, offset: source.offset }
      })
    )
  })
}

/** The encoded outputs of a transform, or why they cannot be sent. */
export type Encoded = Either.Either<
  ReadonlyArray<Topic.EncodedRecord>,
  EncodeError | OutputTooLarge | TimestampOutOfRange | PartitionOutOfRange
>

const noOutputs: Encoded = Either.right(Object.freeze([]))

/**
 * Encodes outputs and checks their partitions and sizes: synchronous (an
 * `Either`) once each topic's limit (and, for an output naming its
 * partition, its partition count) is known, else an effect that looks them
 * up. A failed lookup is a runtime `KafkaError`, never the transform's own
 * error.
 */
export const encode = (
  emit: ReadonlyArray<Topic.OutputRecord>,
  limits: MessageLimits,
  counts: PartitionCounts.PartitionCounts,
  source: FetchedRecord,
  trace?: Tracing.TraceHeaders | undefined
): Encoded | Effect.Effect<
  ReadonlyArray<Topic.EncodedRecord>,
  EncodeError | OutputTooLarge | TimestampOutOfRange | PartitionOutOfRange | KafkaError
> => {
  // No outputs (most records of an aggregation): one result for them all.
  if (emit.length === 0) return noOutputs
  // The input record's timestamp, for the outputs that set none (a negative one: none, `stamped`).
  const defaultTimestamp = source.timestamp >= 0 ? source.timestamp : undefined
  // Sized once: an empty array's first push gives it room for 16 more, about 150 bytes a record.
  const outputs = new Array<Topic.EncodedRecord>(emit.length)
  for (let i = 0; i < emit.length; i++) {
    const encoded = emit[i]!.encode(defaultTimestamp)
    if (Either.isLeft(encoded)) return Either.left(encoded.left)
    const output = stamped(encoded.right, defaultTimestamp, trace)
    const limit = limits.known(output.topic)
    if (limit === undefined || !knownInRange(output, counts)) {
      // The first output for this topic (or a partition to check): look up what is missing, then go on.
      const rest = emit.slice(i)
      let filled = i
      return Effect.gen(function*() {
        for (const record of rest) {
          const next = stamped(yield* record.encode(defaultTimestamp), defaultTimestamp, trace)
          yield* checkPartition(next, counts, source)
          const tooLarge = sizeError(next, yield* limits.lookup(next.topic), source)
          if (tooLarge !== undefined) return yield* Effect.fail(tooLarge)
          const outOfRange = timestampError(next, limits.timestamps(next.topic), limits, source)
          if (outOfRange !== undefined) return yield* Effect.fail(outOfRange)
          outputs[filled++] = next
        }
        return outputs
      })
    }
    // The checks return their error, if any: no result wrapped a check an output (they pass, nearly always).
    const tooLarge = sizeError(output, limit, source)
    if (tooLarge !== undefined) return Either.left(tooLarge)
    const outOfRange = timestampError(output, limits.timestamps(output.topic), limits, source)
    if (outOfRange !== undefined) return Either.left(outOfRange)
    outputs[i] = output
  }
  return Either.right(outputs)
}
