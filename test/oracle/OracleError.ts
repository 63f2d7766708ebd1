/**
 * The one error the Kafka Streams oracle (kafkaStreams.ts) fails with.
 */
import { Data } from "effect"

/**
 * Why the oracle could not give Kafka Streams' output.
 *
 * - `JavaMissing`: no Java 17+ (`JAVA_HOME` or `java` on PATH).
 * - `MavenMissing`: the oracle's jar is not built for these sources and `mvn` is not on PATH.
 * - `BuildFailed`: Maven could not build the oracle (its output is in `detail`).
 * - `RunFailed`: the oracle exited non-zero (a bad scenario: unknown topology or param, an input
 *   that does not fit the topology's serdes, a Kafka Streams exception): its stderr is in `detail`.
 * - `BadOutput`: the oracle printed a line that is not an output record.
 * - `Timeout`: the build or the run did not finish in time.
 */
export type OracleErrorReason = "JavaMissing" | "MavenMissing" | "BuildFailed" | "RunFailed" | "BadOutput" | "Timeout"

/** Running a topology in Kafka Streams' `TopologyTestDriver` failed; `detail` says why and what to do. */
export class OracleError extends Data.TaggedError("OracleError")<{
  readonly reason: OracleErrorReason
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return `Kafka Streams oracle ${this.reason}: ${this.detail}`
  }
}
