/**
 * A single-node Kafka in Docker (the `apache/kafka` image) through
 * testcontainers, loaded only when this path is taken, so users without
 * Docker need not install testcontainers.
 *
 * @internal
 */
import { Duration, Effect } from "effect"
import type { Scope } from "effect"
import { KafkaBrokerError } from "../KafkaBrokerError.ts"
import { defaultVersion, type KafkaVersion, type LoggingBackend } from "./distribution.ts"
import * as NodeConfig from "./nodeConfig.ts"
import { freePorts } from "./ports.ts"

/** The official image of a Kafka version. */
export const imageOf = (version: KafkaVersion): string => `apache/kafka:${version}`

/**
 * The image used when neither an image nor a version is given: the default
 * version's, the same Kafka a local broker runs, so a test run's broker does
 * not depend on whether the host has Docker.
 */
export const defaultImage = imageOf(defaultVersion)

/** `log.dirs` → `KAFKA_LOG_DIRS`, as the apache/kafka image expects. */
const envName = (property: string): string =>
  `KAFKA_${property.replace(/_/g, "__").replace(/-/g, "___").replace(/\./g, "_").toUpperCase()}`

const dockerError = (detail: string) => (cause: unknown) =>
  new KafkaBrokerError({
    reason: "DockerFailed",
    detail: `${detail}: ${cause instanceof Error ? cause.message : String(cause)}`,
    cause
  })

/**
 * Starts a Kafka container for the life of the scope and returns its client
 * address. The container listens on the same port inside and outside, so the
 * advertised address works from the host.
 */
export const start = (options: {
  readonly image: string
  /** The image's logging backend: which settings its Kafka version knows (log4j2: Kafka 4). */
  readonly backend: LoggingBackend
  readonly startTimeout: Duration.Duration
}): Effect.Effect<ReadonlyArray<string>, KafkaBrokerError, Scope.Scope> =>
  Effect.gen(function*() {
    const testcontainers = yield* Effect.tryPromise({
      try: () => import("testcontainers"),
      catch: dockerError("the testcontainers package is needed to run Kafka in Docker (npm install -D testcontainers)")
    })
    const client = yield* Effect.tryPromise({
      try: () => testcontainers.getContainerRuntimeClient(),
      catch: dockerError("no container runtime")
    })
    const host = client.info.containerRuntime.host
    const [port = 0] = yield* freePorts("127.0.0.1", 1)
    const settings = NodeConfig.testSettings(1, options.backend)
    const environment: Record<string, string> = {
      KAFKA_NODE_ID: "1",
      KAFKA_PROCESS_ROLES: "broker,controller",
      KAFKA_CONTROLLER_QUORUM_VOTERS: "1@localhost:9093",
      KAFKA_LISTENERS: `PLAINTEXT://0.0.0.0:${port},CONTROLLER://0.0.0.0:9093`,
      KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://${host}:${port}`,
      KAFKA_INTER_BROKER_LISTENER_NAME: "PLAINTEXT",
      KAFKA_CONTROLLER_LISTENER_NAMES: "CONTROLLER",
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
      KAFKA_LOG_DIRS: "/tmp/kraft-combined-logs",
      KAFKA_HEAP_OPTS: "-Xmx512m -Xms512m"
    }
    for (const [key, value] of Object.entries(settings)) environment[envName(key)] = value
    const container = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          new testcontainers.GenericContainer(options.image)
            .withEnvironment(environment)
            .withExposedPorts({ container: port, host: port })
            .withWaitStrategy(testcontainers.Wait.forLogMessage(/Kafka Server started/))
            .withStartupTimeout(Duration.toMillis(options.startTimeout))
            .start(),
        catch: dockerError(`cannot start ${options.image}`)
      }),
      (started) =>
        Effect.tryPromise(() => started.stop({ timeout: 10_000 })).pipe(
          Effect.catchAll((cause) => Effect.logWarning("cannot stop the Kafka container", cause))
        )
    )
    return [`${container.getHost()}:${port}`]
  })
