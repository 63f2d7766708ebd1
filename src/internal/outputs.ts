/**
 * A transform's outputs in their wire form: encoded with their topics'
 * Schemas, stamped with the input record's timestamp unless they set their
 * own (and, when traced, with their transform's trace context: `tracing.ts`),
 * and checked against each topic's record size limit and, when they name
 * one, its partitions before they reach the transaction, so an oversized
 * record or a missing partition fails its transform (`OutputTooLarge`,
 * `PartitionOutOfRange`, which a rule can handle) instead of poisoning the
 * batch.
 *
 * @internal
 */
import { Effect, Either } from "effect"
import type { EncodeError, KafkaError } from "../SkeinError.ts"
import { OutputTooLarge, PartitionOutOfRange } from "../SkeinError.ts"
import type * as Topic from "../Topic.ts"
import type { FetchedRecord } from "./kafka/consumer.ts"
import * as PartitionCounts from "./partitionCounts.ts"
import { recordBytes, recordSizeBound } from "./recordSize.ts"
import * as Tracing from "./tracing.ts"

/** The size limit of a record per output topic: known synchronously once looked up. */
export interface MessageLimits {
  readonly known: (topic: string) => number | undefined
  /** The topic's limit: the known one, or looked up (once). */
  readonly lookup: (topic: string) => Effect.Effect<number, KafkaError>
}

/**
 * The limits of a runner's output topics: `min(maxMessageBytes, the topic's
 * max.message.bytes)`, looked up once per topic.
 */
export const makeMessageLimits = (
  maxMessageBytes: number,
  topicLimit: (topic: string) => Effect.Effect<number | undefined, KafkaError>
): MessageLimits => {
  const limits = new Map<string, number>()
  return {
    known: (topic) => limits.get(topic),
    lookup: (topic) => {
      const known = limits.get(topic)
      return known !== undefined ? Effect.succeed(known) : Effect.map(topicLimit(topic), (limit) => {
        const effective = Math.min(maxMessageBytes, limit ?? maxMessageBytes)
        limits.set(topic, effective)
        return effective
      })
    }
  }
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
 * An output with its input's timestamp, unless it sets its own (or the input
 * has none: -1), and with the trace context of its transform when traced.
 */
const stamped = (encoded: Topic.EncodedRecord, source: FetchedRecord, trace: Tracing.TraceHeaders | undefined): Topic.EncodedRecord => {
  const timed = encoded.timestamp !== undefined || !(source.timestamp >= 0) ? encoded : withTimestamp(encoded, source.timestamp)
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
export type Encoded = Either.Either<ReadonlyArray<Topic.EncodedRecord>, EncodeError | OutputTooLarge | PartitionOutOfRange>

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
  EncodeError | OutputTooLarge | PartitionOutOfRange | KafkaError
> => {
  const outputs: Array<Topic.EncodedRecord> = []
  for (let i = 0; i < emit.length; i++) {
    const encoded = emit[i]!.encode()
    if (Either.isLeft(encoded)) return Either.left(encoded.left)
    const output = stamped(encoded.right, source, trace)
    const limit = limits.known(output.topic)
    if (limit === undefined || !knownInRange(output, counts)) {
      // The first output for this topic (or a partition to check): look up what is missing, then go on.
      const rest = emit.slice(i)
      return Effect.gen(function*() {
        for (const record of rest) {
          const next = stamped(yield* record.encode(), source, trace)
          yield* checkPartition(next, counts, source)
          outputs.push(yield* checkSize(next, yield* limits.lookup(next.topic), source))
        }
        return outputs
      })
    }
    const checked = checkSize(output, limit, source)
    if (Either.isLeft(checked)) return Either.left(checked.left)
    outputs.push(checked.right)
  }
  return Either.right(outputs)
}
