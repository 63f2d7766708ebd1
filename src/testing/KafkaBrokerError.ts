/**
 * The one error that provisioning a Kafka broker for tests can fail with.
 *
 * @since 0.1.0
 */
import { Data } from "effect"

/**
 * Why provisioning a broker failed.
 *
 * - `Unavailable`: no way to get a broker here (no `KAFKA_BROKERS`, no Docker
 *   daemon, no java/mvn); the message says what to install or set.
 * - `FetchFailed`: Maven could not assemble the Kafka jars.
 * - `StartFailed`: a broker process could not be formatted or exited early.
 * - `PortInUse`: a chosen port was taken before the broker bound it (retried).
 * - `Timeout`: a broker did not become ready in time.
 * - `StopFailed`: a broker process could not be signalled.
 * - `DockerFailed`: the Kafka container could not be started.
 * - `InvalidArgument`: a bad option (unknown version, node index, ...).
 *
 * @example
 * ```ts
 * import { KafkaBrokerError } from "skein/testing"
 *
 * const isEnvironmentProblem = (reason: KafkaBrokerError.KafkaBrokerErrorReason): boolean =>
 *   reason === "Unavailable" || reason === "FetchFailed" || reason === "DockerFailed"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export type KafkaBrokerErrorReason =
  | "Unavailable"
  | "FetchFailed"
  | "StartFailed"
  | "PortInUse"
  | "Timeout"
  | "StopFailed"
  | "DockerFailed"
  | "InvalidArgument"

/**
 * Provisioning, starting or stopping a test broker failed. `reason`
 * classifies it, `detail` says what happened and what to do, `cause` keeps
 * the original error when there is one.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LocalKafka } from "skein/testing"
 *
 * const canRunLocally = LocalKafka.preflight().pipe(
 *   Effect.as(true),
 *   Effect.catchTag("KafkaBrokerError", (error) =>
 *     error.reason === "Unavailable" ? Effect.as(Effect.logWarning(error.detail), false) : Effect.fail(error)
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class KafkaBrokerError extends Data.TaggedError("KafkaBrokerError")<{
  readonly reason: KafkaBrokerErrorReason
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return `Kafka broker ${this.reason}: ${this.detail}`
  }
}
