/**
 * A Kafka broker for tests, as a scoped service: an existing cluster
 * (`KAFKA_BROKERS`), else a Docker container, else a real broker run locally
 * from jars fetched from Maven Central. The scope that acquires it stops
 * whatever it started.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { KafkaBroker } from "skein/testing"
 *
 * const program = Effect.gen(function*() {
 *   const { brokers } = yield* KafkaBroker.KafkaBroker
 *   // ... connect a client to `brokers`
 * }).pipe(Effect.provide(KafkaBroker.layer()))
 * ```
 *
 * @since 0.1.0
 */
import { Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import type { Scope } from "effect"
import type { SkeinConfig } from "../SkeinConfig.ts"
import { KafkaBrokerError } from "./KafkaBrokerError.ts"
import * as LocalKafka from "./LocalKafka.ts"
import * as Distribution from "./internal/distribution.ts"
import * as Docker from "./internal/docker.ts"
import { dockerAvailable, type HostEnvironment, readHostEnvironment } from "./internal/environment.ts"
import { installHint, live, localProblems } from "./internal/preflight.ts"

/**
 * How the broker was provided: an existing cluster, a container, or a
 * locally run broker.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { KafkaBroker } from "skein/testing"
 *
 * const report = Effect.gen(function*() {
 *   const { brokers, kind } = yield* KafkaBroker.KafkaBroker
 *   if (kind === "external") yield* Effect.log(`using the existing cluster at ${brokers.join(",")}`)
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Kind = "external" | "docker" | "local"

/**
 * A reachable Kafka cluster.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { SkeinConfig } from "skein"
 * import { KafkaBroker } from "skein/testing"
 *
 * const config = Layer.unwrapEffect(Effect.map(KafkaBroker.KafkaBroker, (broker: KafkaBroker.Service) =>
 *   SkeinConfig.layer({ applicationId: "word-count-test", brokers: broker.brokers })
 * ))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** Client addresses, `host:port`. */
  readonly brokers: ReadonlyArray<string>
  readonly kind: Kind
  /**
   * The Kafka version of a broker this service started (absent for an
   * external cluster, or a Docker image given by name).
   */
  readonly version?: LocalKafka.KafkaVersion
}

/**
 * The Kafka cluster tests run against.
 *
 * @example
 * ```ts
 * import { layer } from "@effect/vitest"
 * import { Effect } from "effect"
 * import { KafkaBroker } from "skein/testing"
 *
 * layer(KafkaBroker.layer(), { timeout: "3 minutes" })("word count", (it) => {
 *   it.effect("reaches the broker", () => Effect.map(KafkaBroker.KafkaBroker, ({ brokers }) => brokers))
 * })
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class KafkaBroker extends Context.Tag("skein/testing/KafkaBroker")<KafkaBroker, Service>() {}

/**
 * How to provision a broker. The environment is read through `Config`
 * (`KAFKA_BROKERS`, `SKEIN_KAFKA_PROVIDER`, `SKEIN_KAFKA_VERSION`, `PATH`,
 * `JAVA_HOME`, `SKEIN_CACHE_DIR`, `DOCKER_HOST`), so a `ConfigProvider` can
 * replace it.
 *
 * @example
 * ```ts
 * import { KafkaBroker } from "skein/testing"
 *
 * const broker = KafkaBroker.layer({
 *   version: "3.9.2",
 *   startTimeout: "5 minutes",
 *   local: { heap: "1g" }
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * The Kafka version of a broker this service starts, local or Docker
   * (`apache/kafka:<version>`). Default: `SKEIN_KAFKA_VERSION` if set, else
   * 4.4.0, locally and in Docker (apache/kafka:4.4.0). An external cluster
   * (`KAFKA_BROKERS`) runs whatever version it runs: asking for one then only
   * logs a warning.
   */
  readonly version?: LocalKafka.KafkaVersion
  /** The Docker image (default: the version's, see `version`). */
  readonly dockerImage?: string
  /** How long the broker may take to become ready (default 180 s). */
  readonly startTimeout?: Duration.DurationInput
  /** More options for a local broker. */
  readonly local?: Omit<LocalKafka.StartOptions, "nodes" | "version" | "detached" | "startTimeout">
}

const external = (brokers: ReadonlyArray<string>): Service => ({ brokers, kind: "external" })

const unavailable = (env: HostEnvironment, problems: ReadonlyArray<string>) =>
  new KafkaBrokerError({
    reason: "Unavailable",
    detail: (env.provider === "auto"
      ? "no Kafka broker for tests: KAFKA_BROKERS is not set, no Docker daemon answers, and "
      : "no local Kafka broker (SKEIN_KAFKA_PROVIDER=local): ") +
      `a local broker needs ${problems.join(" and ")}. ${installHint}`
  })

const local = (version: LocalKafka.KafkaVersion, options: Options) =>
  LocalKafka.start({
    ...options.local,
    version,
    ...(options.startTimeout === undefined ? {} : { startTimeout: options.startTimeout })
  }).pipe(Effect.map((cluster): Service => ({ brokers: cluster.brokers, kind: "local", version: cluster.version })))

/** A named image runs whatever it runs; else the requested version's image, else the default image. */
const docker = (requested: Option.Option<LocalKafka.KafkaVersion>, options: Options) => {
  const image = options.dockerImage ?? Option.match(requested, { onNone: () => Docker.defaultImage, onSome: Docker.imageOf })
  const version = options.dockerImage === undefined ? requested : Option.none()
  return Docker.start({
    image,
    backend: Distribution.loggingBackend(Option.getOrElse(requested, () => LocalKafka.defaultVersion)),
    startTimeout: Duration.decode(options.startTimeout ?? Duration.seconds(180))
  }).pipe(
    Effect.map((brokers): Service =>
      Option.match(version, {
        onNone: () => ({ brokers, kind: "docker" }),
        onSome: (version) => ({ brokers, kind: "docker", version })
      })
    )
  )
}

/** An existing cluster: its version is not ours to choose, so a requested one is only warned about. */
const existing = (brokers: ReadonlyArray<string>, requested: Option.Option<LocalKafka.KafkaVersion>) =>
  Effect.as(
    Option.match(requested, {
      onNone: () => Effect.void,
      onSome: (version) =>
        Effect.logWarning(
          `Kafka ${version} was asked for, but KAFKA_BROKERS is set: using ${brokers.join(",")} as is, ` +
            "whatever Kafka version it runs (unset KAFKA_BROKERS to have this version started)"
        )
    }),
    external(brokers)
  )

/**
 * Provides a broker for the life of the scope: `KAFKA_BROKERS` if set (and
 * nothing is stopped), else a Docker container if a daemon answers, else a
 * local broker. Fails at once with `reason: "Unavailable"`, whose message
 * says what to install or set, when none of these is possible.
 * `SKEIN_KAFKA_PROVIDER=external|docker|local` forces one way;
 * `options.version`, else `SKEIN_KAFKA_VERSION`, picks the version of a
 * broker it starts.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { KafkaBroker } from "skein/testing"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const { brokers, kind } = yield* KafkaBroker.make({ version: "3.9.2" })
 *   yield* Effect.log(`Kafka (${kind}) at ${brokers.join(",")}`)
 * })) // the broker is stopped here, if this started it
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<Service, KafkaBrokerError, Scope.Scope> =>
  Effect.gen(function*() {
    const env = yield* readHostEnvironment
    const requested = options.version !== undefined
      ? Option.some(options.version)
      : yield* Effect.transposeOption(Option.map(env.kafkaVersion, LocalKafka.parseVersion))
    const version = Option.getOrElse(requested, () => LocalKafka.defaultVersion)
    const service = yield* Effect.suspend((): Effect.Effect<Service, KafkaBrokerError, Scope.Scope> => {
      switch (env.provider) {
        case "external":
          return Option.match(env.kafkaBrokers, {
            onSome: (brokers) => existing(brokers, requested),
            onNone: () =>
              Effect.fail(
                new KafkaBrokerError({
                  reason: "Unavailable",
                  detail: "SKEIN_KAFKA_PROVIDER=external but KAFKA_BROKERS is not set (host:port,...)"
                })
              )
          })
        case "docker":
          return docker(requested, options)
        case "local": {
          const problems = localProblems(env, version)
          return problems.length === 0 ? local(version, options) : Effect.fail(unavailable(env, problems))
        }
        case "auto":
          return Effect.gen(function*() {
            if (Option.isSome(env.kafkaBrokers)) return yield* existing(env.kafkaBrokers.value, requested)
            if (yield* dockerAvailable(env)) return yield* docker(requested, options)
            const problems = localProblems(env, version)
            if (problems.length > 0) return yield* unavailable(env, problems)
            return yield* local(version, options)
          })
      }
    })
    yield* Effect.logDebug(
      `Kafka broker (${service.kind}${service.version === undefined ? "" : ` ${service.version}`}): ${service.brokers.join(",")}`
    )
    return service
  }).pipe(live)

/**
 * The broker as a layer: acquired when the layer is built, stopped when its
 * scope closes. See `make`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { KafkaBroker } from "skein/testing"
 *
 * const program = Effect.gen(function*() {
 *   const { brokers } = yield* KafkaBroker.KafkaBroker
 *   yield* Effect.log(brokers.join(","))
 * }).pipe(Effect.provide(KafkaBroker.layer()))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<KafkaBroker, KafkaBrokerError> =>
  Layer.scoped(KafkaBroker, make(options))

/**
 * A broker that already runs elsewhere (nothing is started or stopped).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { KafkaBroker } from "skein/testing"
 *
 * const program = Effect.map(KafkaBroker.KafkaBroker, ({ brokers }) => brokers).pipe(
 *   Effect.provide(KafkaBroker.layerExternal(["localhost:9092"]))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerExternal = (brokers: ReadonlyArray<string>): Layer.Layer<KafkaBroker> =>
  Layer.succeed(KafkaBroker, external(brokers))

/**
 * A secured broker: a `Service` whose cluster also has SASL_SSL and SSL
 * (mutual TLS) listeners, a CA, users and ACLs (see
 * `LocalKafka.StartOptions.secure`).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { KafkaBroker } from "skein/testing"
 *
 * const program = Effect.gen(function*() {
 *   const broker: KafkaBroker.SecureService = yield* KafkaBroker.SecureKafkaBroker
 *   yield* Effect.log(`SASL_SSL at ${broker.security.saslSslBrokers.join(",")}, CA ${broker.security.caFile}`)
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface SecureService extends Service {
  readonly security: LocalKafka.SecurityInfo
}

/**
 * The secured broker tests run against.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { SkeinConfig } from "skein"
 * import { KafkaBroker } from "skein/testing"
 *
 * const mutualTls = Effect.map(KafkaBroker.SecureKafkaBroker, ({ security }) =>
 *   SkeinConfig.layer({ applicationId: "secure-test", ...KafkaBroker.connection(security, { mechanism: "mTLS" }) })
 * )
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class SecureKafkaBroker extends Context.Tag("skein/testing/SecureKafkaBroker")<SecureKafkaBroker, SecureService>() {}

/**
 * Starts a secured local broker for the life of the scope (always local:
 * `KAFKA_BROKERS` carries no credentials). `options.version`, else
 * `SKEIN_KAFKA_VERSION`, picks its version.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { KafkaBroker } from "skein/testing"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const { security } = yield* KafkaBroker.makeSecure({ version: "3.9.2" })
 *   yield* Effect.log(`admin ${security.admin.username}, user ${security.user.username}`)
 * }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeSecure = (options: Options = {}): Effect.Effect<SecureService, KafkaBrokerError, Scope.Scope> =>
  Effect.gen(function*() {
    const env = yield* readHostEnvironment
    const version = options.version !== undefined
      ? options.version
      : yield* Option.match(env.kafkaVersion, {
        onNone: () => Effect.succeed(LocalKafka.defaultVersion),
        onSome: LocalKafka.parseVersion
      })
    const problems = localProblems(env, version)
    if (problems.length > 0) return yield* unavailable(env, problems)
    const cluster = yield* LocalKafka.start({
      ...options.local,
      secure: true,
      version,
      ...(options.startTimeout === undefined ? {} : { startTimeout: options.startTimeout })
    })
    const security = cluster.security
    if (security === undefined) {
      return yield* new KafkaBrokerError({ reason: "StartFailed", detail: "the secured broker reported no security" })
    }
    return { brokers: cluster.brokers, kind: "local" as const, version: cluster.version, security }
  }).pipe(live)

/**
 * The secured broker as a layer. See `makeSecure`.
 *
 * @example
 * ```ts
 * import { layer } from "@effect/vitest"
 * import { Effect } from "effect"
 * import { KafkaBroker } from "skein/testing"
 *
 * layer(KafkaBroker.layerSecure(), { timeout: "3 minutes" })("secured cluster", (it) => {
 *   it.effect("has a CA", () => Effect.map(KafkaBroker.SecureKafkaBroker, ({ security }) => security.caFile))
 * })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSecure = (options: Options = {}): Layer.Layer<SecureKafkaBroker, KafkaBrokerError> =>
  Layer.scoped(SecureKafkaBroker, makeSecure(options))

/**
 * The `SkeinConfig` connection settings for a secured broker: SASL_SSL with
 * `mechanism` as its admin or ordinary user, or `"mTLS"` (SSL with the
 * client certificate, principal `User:CN=skein-client`).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { SkeinConfig } from "skein"
 * import { KafkaBroker } from "skein/testing"
 *
 * const config = Effect.map(KafkaBroker.SecureKafkaBroker, ({ security }) =>
 *   SkeinConfig.layer({ applicationId: "orders", ...KafkaBroker.connection(security, { mechanism: "SCRAM-SHA-512" }) }))
 * ```
 *
 * @since 0.1.0
 * @category utils
 */
export const connection = (
  security: LocalKafka.SecurityInfo,
  options: {
    readonly mechanism: "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512" | "mTLS"
    readonly as?: "admin" | "user"
  }
): Pick<SkeinConfig, "brokers" | "securityProtocol" | "sslCaFile"> & Partial<SkeinConfig> => {
  if (options.mechanism === "mTLS") {
    return {
      brokers: security.sslBrokers,
      securityProtocol: "SSL",
      sslCaFile: security.caFile,
      sslCertFile: security.clientCertFile,
      sslKeyFile: security.clientKeyFile
    }
  }
  const user = options.as === "admin" ? security.admin : security.user
  return {
    brokers: security.saslSslBrokers,
    securityProtocol: "SASL_SSL",
    sslCaFile: security.caFile,
    saslMechanism: options.mechanism,
    saslUsername: user.username,
    saslPassword: Redacted.make(user.password)
  }
}
