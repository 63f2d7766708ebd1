/**
 * A transform's outputs in their wire form: encoded with their topics'
 * Schemas and checked against each topic's record size limit before they
 * reach the transaction, so an oversized record fails its transform
 * (`OutputTooLarge`, which a rule can handle) instead of poisoning the batch.
 *
 * @internal
 */
import { Effect, Either } from "effect"
import type { EncodeError, KafkaError } from "../SkeinError.ts"
import { OutputTooLarge } from "../SkeinError.ts"
import type * as Topic from "../Topic.ts"
import type { FetchedRecord } from "./kafka/consumer.ts"
import { recordBytes, recordSizeBound } from "./recordSize.ts"

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
 * Encodes outputs and checks their sizes: synchronous (an `Either`) once each
 * topic's limit is known. A failed limit lookup is a runtime `KafkaError`,
 * never the transform's own error.
 */
export const encode = (
  emit: ReadonlyArray<Topic.OutputRecord>,
  limits: MessageLimits,
  source: FetchedRecord
): Effect.Effect<ReadonlyArray<Topic.EncodedRecord>, EncodeError | OutputTooLarge | KafkaError> => {
  const outputs: Array<Topic.EncodedRecord> = []
  for (let i = 0; i < emit.length; i++) {
    const encoded = emit[i]!.encode()
    if (Either.isLeft(encoded)) return Either.left(encoded.left)
    const limit = limits.known(encoded.right.topic)
    if (limit === undefined) {
      // The first output for this topic: look its limit up, then go on.
      const rest = emit.slice(i)
      return Effect.gen(function*() {
        for (const output of rest) {
          const next = yield* output.encode()
          outputs.push(yield* checkSize(next, yield* limits.lookup(next.topic), source))
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
