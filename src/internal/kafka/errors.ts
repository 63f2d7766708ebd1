/**
 * Maps kafkajs failures to Skein's typed errors. The only place that knows
 * kafkajs's error shapes.
 *
 * @internal
 */
import { KafkaError } from "../../SkeinError.ts"

const FENCED_TYPES = new Set(["INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED", "INVALID_PRODUCER_ID_MAPPING"])
const TIMEOUT_NAMES = new Set(["KafkaJSRequestTimeoutError", "KafkaJSTimeout"])
const CONNECTION_NAMES = new Set(["KafkaJSConnectionError", "KafkaJSNoBrokerAvailableError", "KafkaJSBrokerNotFound"])

interface ErrorLike {
  readonly name?: unknown
  readonly type?: unknown
  readonly message?: unknown
  readonly cause?: unknown
  readonly originalError?: unknown
}

const asErrorLike = (u: unknown): ErrorLike | undefined =>
  typeof u === "object" && u !== null ? (u as ErrorLike) : undefined

/** Every error in a kafkajs cause chain (retries wrap the original error). */
export const chain = (error: unknown): ReadonlyArray<ErrorLike> => {
  const out: Array<ErrorLike> = []
  let current = asErrorLike(error)
  while (current !== undefined && out.length < 16) {
    out.push(current)
    current = asErrorLike(current.cause) ?? asErrorLike(current.originalError)
  }
  return out
}

/** True when the producer's epoch was bumped by a newer owner (or by a transaction timeout). */
export const isFenced = (error: unknown): boolean =>
  chain(error).some((e) => typeof e.type === "string" && FENCED_TYPES.has(e.type))

/** True for the errors kafkajs uses to signal a group rebalance. */
export const isRebalancing = (error: unknown): boolean =>
  chain(error).some((e) =>
    e.type === "REBALANCE_IN_PROGRESS" || e.type === "NOT_COORDINATOR_FOR_GROUP" || e.type === "ILLEGAL_GENERATION" ||
    e.type === "UNKNOWN_MEMBER_ID"
  )

/** Maps any kafkajs failure to a `KafkaError` with a reason. */
export const toKafkaError = (operation: string) => (error: unknown): KafkaError => {
  const errors = chain(error)
  const reason: KafkaError["reason"] = isFenced(error)
    ? "Fenced"
    : errors.some((e) => typeof e.name === "string" && TIMEOUT_NAMES.has(e.name))
    ? "Timeout"
    : errors.some((e) => typeof e.name === "string" && CONNECTION_NAMES.has(e.name))
    ? "Connection"
    : errors.some((e) => e.name === "KafkaJSProtocolError")
    ? "Protocol"
    : "Unknown"
  return new KafkaError({ reason, operation, cause: error })
}

/**
 * True when the broker answered that a topic does not exist
 * (UNKNOWN_TOPIC_OR_PARTITION), by the error's type, never by words in a
 * message: "does not exist" in another answer (a group, a transactional id)
 * is not a missing topic.
 */
export const isUnknownTopic = (error: unknown): boolean =>
  chain(error).some((e) => e.type === "UNKNOWN_TOPIC_OR_PARTITION")
