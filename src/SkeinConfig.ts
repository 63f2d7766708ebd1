/**
 * Configuration of a Skein runtime.
 *
 * @since 0.1.0
 */
import { Config, Context, Duration, Effect, Layer, Option } from "effect"
import type { ConfigError, Redacted } from "effect"

/**
 * The complete configuration of a run: every setting, defaults filled in.
 * Build one with `make`, or provide it with `layer` / `layerConfig`.
 *
 * @example
 * ```ts
 * import { SkeinConfig } from "skein"
 *
 * const config: SkeinConfig.SkeinConfig = SkeinConfig.make({
 *   applicationId: "word-count",
 *   brokers: ["localhost:9092"]
 * })
 * config.maxPollRecords // 100000
 * config.processingGuarantee // "exactly-once"
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface SkeinConfig {
  /**
   * Consumer group id, transactional id prefix and changelog prefix. One per
   * transformer: a second transformer under the same id fails at startup with
   * `ConfigurationError` (it would share the group and the transactional ids).
   */
  readonly applicationId: string
  /** Bootstrap brokers, `host:port`. */
  readonly brokers: ReadonlyArray<string>
  /** The Kafka client id. */
  readonly clientId: string
  /**
   * Records per batch across all partitions: one transaction per task per batch.
   * A batch is what is buffered (at most one fetch per partition) up to this cap.
   */
  readonly maxPollRecords: number
  /**
   * How long a task runs a batch's records before what finished commits (one
   * transaction under exactly-once; Kafka Streams commits every 100 ms under
   * exactly-once). Records running then finish; the rest continue in the next
   * transaction. Bounds how late outputs become visible and how much a crash
   * replays when handlers are slow.
   */
  readonly maxBatchDuration: Duration.Duration
  /**
   * How long a task reading several input topics (a join's stream and table)
   * waits for an input that has nothing buffered but is caught up, before it
   * processes the others without it (Kafka Streams' `max.task.idle.ms`;
   * default 0). Such a task processes its records in timestamp order across
   * its inputs, and always waits for an input whose records are on the broker
   * but not fetched yet (so a join sees the table update written before the
   * stream record). `"no-wait"` (Kafka Streams' -1): never waits, processing
   * what is buffered in timestamp order. Going ahead without an input is
   * counted (`skein_enforced_processing_total`).
   */
  readonly maxTaskIdle: Duration.Duration | "no-wait"
  /**
   * Directory of the LevelDB state stores, kept across restarts (a task that
   * finds its store restores only the changelog's tail). Give each instance
   * its own.
   */
  readonly stateDir: string
  /**
   * How long a kept store may go unused before it is deleted (Kafka Streams'
   * `state.cleanup.delay.ms`; default 10 minutes): at a runner's start, and
   * while it runs (a sweep every `stateCleanupDelay`) for the partitions no
   * longer assigned to it. A partition it is assigned keeps its store.
   */
  readonly stateCleanupDelay: Duration.Duration
  /**
   * Standby replicas per task (default 0): how many other instances keep a
   * read-only copy of a stateful task's store warm, by tailing its changelog
   * read_committed, so that a task moved to one of them restores only the
   * copy's lag. Each standby costs disk for its store; an instance with
   * standbys runs one more consumer. 0: nothing of it runs.
   */
  readonly standbyReplicas: number
  /** Consumer group session timeout. */
  readonly sessionTimeout: Duration.Duration
  /** How long the group waits for members to rejoin during a rebalance. */
  readonly rebalanceTimeout: Duration.Duration
  /** Heartbeat interval, also used while a batch is being processed. */
  readonly heartbeatInterval: Duration.Duration
  /** Broker-side transaction timeout of each task's producer. */
  readonly transactionTimeout: Duration.Duration
  /** Replication factor of created changelog topics (-1: the broker's default). */
  readonly changelogReplicationFactor: number
  /**
   * Where poison records (a key or value that fails its Schema) go, with the
   * error in headers, inside the batch's transaction. Unset: a poison record
   * fails the run with `DecodeError` (nothing is silently dropped).
   */
  readonly deadLetterTopic?: string | undefined
  /**
   * `"exactly-once"` (default): one transaction per task per batch commits
   * outputs, changelog writes and offsets together. `"at-least-once"`: no
   * transactions; outputs and changelog writes are acknowledged first, offsets
   * are committed after them every `commitInterval`, so a crash re-produces the
   * records since the last offset commit.
   */
  readonly processingGuarantee: ProcessingGuarantee
  /** At-least-once only: how often acknowledged work's offsets are committed. */
  readonly commitInterval: Duration.Duration
  /**
   * What a failed partition stops: `"run"` (default, let it crash: the run ends
   * with the error) or `"partition"` (only its task stops; the others keep
   * running; the partition is reported in health until a restart or a move).
   */
  readonly failureIsolation: FailureIsolation
  /** The most transform calls running at once across all tasks (e.g. a database pool's size). */
  readonly maxConcurrency: number | "unbounded"
  /** On revocation, how long running handlers may finish before they are interrupted. */
  readonly revocationGrace: Duration.Duration
  /** On SIGTERM/SIGINT (interruption), how long running handlers may finish before they are interrupted. */
  readonly shutdownGrace: Duration.Duration
  /**
   * The largest record the producer sends (Kafka's `max.request.size` /
   * `message.max.bytes`, default 1 MiB); an output topic's smaller
   * `max.message.bytes` also applies. A larger output fails its transform with
   * `OutputTooLarge`, which error rules can handle.
   */
  readonly maxMessageBytes: number
  /** Failed deliveries (produce, offset commit, abort) in a row on one partition before the run ends. */
  readonly maxDeliveryFailures: number
  /** First backoff after a failed delivery; it doubles per failure in a row, up to 10 seconds. */
  readonly deliveryBackoff: Duration.Duration
  /** Port of the HTTP health and Prometheus metrics endpoint; unset: no endpoint. */
  readonly healthPort?: number | undefined
  /**
   * Port of the HTTP query endpoint (interactive queries of the committed
   * state: a transformer's state by key, its `KeyValueStore`s by key, range
   * and prefix; see the README's "Queries"); unset: no endpoint. 0 picks a
   * free port.
   */
  readonly queryPort?: number | undefined
  /**
   * The address the query endpoint listens on (default `127.0.0.1`: this
   * machine only). `0.0.0.0` (or `::`) serves every interface: set
   * `queryToken` then.
   */
  readonly queryHost: string
  /**
   * A bearer token every query must carry (`Authorization: Bearer <token>`);
   * a missing or wrong one is refused with 401 and logged without the
   * token. Unset: no token asked.
   */
  readonly queryToken?: Redacted.Redacted | undefined
  /**
   * Where other instances and clients reach this instance's query endpoint
   * (`host:port`; Kafka Streams' `application.server`), announced to the
   * group: every instance learns which instance owns each partition and
   * forwards a query to it. Unset: `queryHost` and the bound port
   * (this machine's host name when `queryHost` is `0.0.0.0` or `::`).
   */
  readonly queryEndpoint?: string | undefined
  /**
   * PEM file of the query endpoint's certificate: with `queryTlsKeyFile`, the
   * endpoint serves HTTPS (and forwards to the other instances over HTTPS).
   * Unset: plain HTTP.
   */
  readonly queryTlsCertFile?: string | undefined
  /** PEM file of the certificate's private key (read into a `Redacted`, never logged). */
  readonly queryTlsKeyFile?: string | undefined
  /** PEM file of the CA(s) the endpoint trusts when it forwards to another instance (unset: the system's). */
  readonly queryTlsCaFile?: string | undefined
  /**
   * Warn (once per key) when a state key is seen on a second input partition:
   * state is per partition, so that key's state is split. Unset: on for a
   * transformer with a custom `stateKey`, off for the default (the record key).
   * Costs a `Map` lookup per record and at most 100,000 remembered keys.
   */
  readonly checkStateKeys?: boolean | undefined
  /**
   * How the client talks to the brokers: `"PLAINTEXT"` (default), `"SSL"`
   * (TLS, optionally mutual with `sslCertFile`/`sslKeyFile`),
   * `"SASL_PLAINTEXT"` or `"SASL_SSL"` (SASL authentication, over TLS for
   * the latter). Every consumer, producer, admin client and changelog reader
   * of a run uses it.
   */
  readonly securityProtocol: SecurityProtocol
  /** The SASL mechanism (`SASL_*` protocols only). */
  readonly saslMechanism?: SaslMechanism | undefined
  /** The SASL user (`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`); for Confluent Cloud, the API key. */
  readonly saslUsername?: string | undefined
  /** The SASL password, redacted: it never appears in logs, errors, health or metrics. */
  readonly saslPassword?: Redacted.Redacted | undefined
  /**
   * `OAUTHBEARER` only: yields a bearer token (a JWT) whenever the client
   * (re)authenticates, e.g. from an OIDC client-credentials flow. Given in
   * code only (there is no environment variable for it).
   */
  readonly oauthBearerToken?: Effect.Effect<Redacted.Redacted, unknown> | undefined
  /** PEM file of the CA(s) to trust (TLS protocols); unset: the system's trust store. */
  readonly sslCaFile?: string | undefined
  /** PEM file of the client certificate, for mutual TLS. */
  readonly sslCertFile?: string | undefined
  /** PEM file of the client certificate's private key, for mutual TLS. */
  readonly sslKeyFile?: string | undefined
  /**
   * Verify the brokers' certificates (default `true`). `false` accepts any
   * certificate, a man in the middle's included: for experiments only, and
   * logged as a warning at every start.
   */
  readonly sslRejectUnauthorized: boolean
}

/**
 * How the client talks to the brokers (`SkeinConfig.securityProtocol`,
 * `SKEIN_SECURITY_PROTOCOL`).
 *
 * @example
 * ```ts
 * import { SkeinConfig } from "skein"
 *
 * const tls = SkeinConfig.layer({
 *   applicationId: "word-count",
 *   brokers: ["kafka-1:9093"],
 *   securityProtocol: "SSL",
 *   sslCaFile: "/etc/kafka/ca.pem"
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type SecurityProtocol = "PLAINTEXT" | "SSL" | "SASL_PLAINTEXT" | "SASL_SSL"

/**
 * The SASL mechanism of a `SASL_PLAINTEXT` or `SASL_SSL` connection
 * (`SkeinConfig.saslMechanism`, `SKEIN_SASL_MECHANISM`).
 *
 * @example
 * ```ts
 * import { Redacted } from "effect"
 * import { SkeinConfig } from "skein"
 *
 * const scram = SkeinConfig.layer({
 *   applicationId: "word-count", brokers: ["kafka-1:9096"], securityProtocol: "SASL_SSL",
 *   saslMechanism: "SCRAM-SHA-512",
 *   saslUsername: "skein",
 *   saslPassword: Redacted.make(password)
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type SaslMechanism = "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512" | "OAUTHBEARER"

/**
 * Exactly-once (transactions, the default) or at-least-once (no
 * transactions, offsets committed every `commitInterval`).
 *
 * @example
 * ```ts
 * import { Duration } from "effect"
 * import { SkeinConfig } from "skein"
 *
 * const fast = SkeinConfig.layer({
 *   applicationId: "clicks",
 *   brokers: ["localhost:9092"],
 *   processingGuarantee: "at-least-once",
 *   commitInterval: Duration.seconds(1)
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type ProcessingGuarantee = "exactly-once" | "at-least-once"

/**
 * What a failed record or an unreadable partition stops: the whole run
 * (`"run"`, the default) or only that partition's task (`"partition"`).
 *
 * @example
 * ```ts
 * import { SkeinConfig } from "skein"
 *
 * const isolated = SkeinConfig.layer({
 *   applicationId: "word-count",
 *   brokers: ["localhost:9092"],
 *   failureIsolation: "partition"
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type FailureIsolation = "run" | "partition"

/**
 * The service tag of the configuration: `Runner.run` reads its settings
 * from it, and so can your own code.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { SkeinConfig } from "skein"
 *
 * const logSettings = Effect.gen(function*() {
 *   const config = yield* SkeinConfig.SkeinConfig
 *   yield* Effect.log(`${config.applicationId} on ${config.brokers.join(",")}`)
 * })
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export const SkeinConfig: Context.Tag<SkeinConfig, SkeinConfig> = Context.GenericTag<SkeinConfig>("skein/SkeinConfig")

/**
 * Defaults for every optional setting.
 *
 * @example
 * ```ts
 * import { Duration } from "effect"
 * import { SkeinConfig } from "skein"
 *
 * SkeinConfig.defaults.maxPollRecords // 100000
 * SkeinConfig.defaults.stateDir // ".skein/state"
 * Duration.toMillis(SkeinConfig.defaults.sessionTimeout) // 10000
 * ```
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaults = {
  clientId: "skein",
  maxPollRecords: 100_000,
  maxBatchDuration: Duration.seconds(1),
  maxTaskIdle: Duration.zero as Duration.Duration | "no-wait",
  stateDir: ".skein/state",
  stateCleanupDelay: Duration.minutes(10),
  standbyReplicas: 0,
  sessionTimeout: Duration.seconds(10),
  rebalanceTimeout: Duration.seconds(30),
  heartbeatInterval: Duration.seconds(1),
  transactionTimeout: Duration.seconds(60),
  changelogReplicationFactor: -1,
  processingGuarantee: "exactly-once" as ProcessingGuarantee,
  commitInterval: Duration.seconds(5),
  failureIsolation: "run" as FailureIsolation,
  maxConcurrency: "unbounded" as number | "unbounded",
  revocationGrace: Duration.seconds(10),
  shutdownGrace: Duration.seconds(10),
  maxMessageBytes: 1024 * 1024,
  maxDeliveryFailures: 8,
  deliveryBackoff: Duration.millis(200),
  securityProtocol: "PLAINTEXT" as SecurityProtocol,
  sslRejectUnauthorized: true,
  queryHost: "127.0.0.1"
} as const

/**
 * The settings a user must give; everything else has a default.
 *
 * @example
 * ```ts
 * import { SkeinConfig } from "skein"
 *
 * const options: SkeinConfig.Options = {
 *   applicationId: "word-count",
 *   brokers: ["localhost:9092"],
 *   deadLetterTopic: "word-count-dead-letters"
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Options = Pick<SkeinConfig, "applicationId" | "brokers"> & Partial<Omit<SkeinConfig, "applicationId" | "brokers">>

/**
 * Builds a complete configuration from options and defaults.
 *
 * @example
 * ```ts
 * import { SkeinConfig } from "skein"
 *
 * const config = SkeinConfig.make({ applicationId: "word-count", brokers: ["localhost:9092"], healthPort: 8080 })
 * config.healthPort // 8080
 * config.stateDir // ".skein/state" (the default)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): SkeinConfig => ({ ...defaults, ...options })

/**
 * A layer from explicit options.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner, SkeinConfig } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.provide(SkeinConfig.layer({ applicationId: "word-count", brokers: ["localhost:9092"] }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<SkeinConfig> => Layer.succeed(SkeinConfig, make(options))

/** An optional setting: unset is `undefined`. */
const optional = (description: string) => <A>(config: Config.Config<A>): Config.Config<A | undefined> =>
  config.pipe(Config.option, Config.map(Option.getOrUndefined), Config.withDescription(description))

/**
 * The configuration read from environment variables (`SKEIN_APPLICATION_ID`,
 * `SKEIN_BROKERS` or `KAFKA_BROKERS`, `SKEIN_MAX_POLL_RECORDS`, ...).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { SkeinConfig } from "skein"
 *
 * // SKEIN_APPLICATION_ID=word-count SKEIN_BROKERS=kafka-1:9092,kafka-2:9092
 * const program = Effect.gen(function*() {
 *   const config = yield* SkeinConfig.config
 *   yield* Effect.log(`${config.applicationId} on ${config.brokers.join(",")}`)
 * })
 * ```
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<SkeinConfig> = Config.all({
  applicationId: Config.string("SKEIN_APPLICATION_ID").pipe(
    Config.withDescription("Consumer group id and transactional id prefix")
  ),
  brokers: Config.string("SKEIN_BROKERS").pipe(
    Config.orElse(() => Config.string("KAFKA_BROKERS")),
    Config.map((value) => value.split(",").map((broker) => broker.trim()).filter((broker) => broker.length > 0)),
    Config.withDescription("Comma-separated bootstrap brokers, host:port")
  ),
  clientId: Config.string("SKEIN_CLIENT_ID").pipe(Config.withDefault(defaults.clientId)),
  maxPollRecords: Config.integer("SKEIN_MAX_POLL_RECORDS").pipe(
    Config.validate({ message: "SKEIN_MAX_POLL_RECORDS must be a positive integer", validation: (n) => n > 0 }),
    Config.withDefault(defaults.maxPollRecords),
    Config.withDescription("Records per batch across partitions")
  ),
  maxBatchDuration: Config.duration("SKEIN_MAX_BATCH_DURATION").pipe(
    Config.withDefault(defaults.maxBatchDuration),
    Config.withDescription("How long a task runs a batch's records before what finished commits")
  ),
  maxTaskIdle: Config.literal("no-wait")("SKEIN_MAX_TASK_IDLE").pipe(
    Config.orElse(() => Config.duration("SKEIN_MAX_TASK_IDLE")),
    Config.withDefault(defaults.maxTaskIdle),
    Config.withDescription(
      "How long a task with several inputs waits for a caught-up input with nothing buffered (Kafka Streams' max.task.idle.ms), or no-wait"
    )
  ),
  stateDir: Config.string("SKEIN_STATE_DIR").pipe(
    Config.withDefault(defaults.stateDir),
    Config.withDescription("Directory of the LevelDB state stores")
  ),
  stateCleanupDelay: Config.duration("SKEIN_STATE_CLEANUP_DELAY").pipe(
    Config.withDefault(defaults.stateCleanupDelay),
    Config.withDescription("How long a kept state store of a partition not assigned to this instance may go unused before it is deleted")
  ),
  standbyReplicas: Config.integer("SKEIN_STANDBY_REPLICAS").pipe(
    Config.validate({ message: "SKEIN_STANDBY_REPLICAS must be an integer of at least 0", validation: (n) => n >= 0 }),
    Config.withDefault(defaults.standbyReplicas),
    Config.withDescription("Standby replicas per stateful task: other instances keeping its store warm (0: none)")
  ),
  sessionTimeout: Config.duration("SKEIN_SESSION_TIMEOUT").pipe(Config.withDefault(defaults.sessionTimeout)),
  rebalanceTimeout: Config.duration("SKEIN_REBALANCE_TIMEOUT").pipe(Config.withDefault(defaults.rebalanceTimeout)),
  heartbeatInterval: Config.duration("SKEIN_HEARTBEAT_INTERVAL").pipe(Config.withDefault(defaults.heartbeatInterval)),
  transactionTimeout: Config.duration("SKEIN_TRANSACTION_TIMEOUT").pipe(
    Config.withDefault(defaults.transactionTimeout)
  ),
  changelogReplicationFactor: Config.integer("SKEIN_CHANGELOG_REPLICATION_FACTOR").pipe(
    Config.withDefault(defaults.changelogReplicationFactor)
  ),
  deadLetterTopic: Config.string("SKEIN_DEAD_LETTER_TOPIC").pipe(
    optional("Dead letter topic for poison records (unset: a poison record fails the run)")
  ),
  processingGuarantee: Config.literal("exactly-once", "at-least-once")("SKEIN_PROCESSING_GUARANTEE").pipe(
    Config.withDefault(defaults.processingGuarantee)
  ),
  commitInterval: Config.duration("SKEIN_COMMIT_INTERVAL").pipe(Config.withDefault(defaults.commitInterval)),
  failureIsolation: Config.literal("run", "partition")("SKEIN_FAILURE_ISOLATION").pipe(
    Config.withDefault(defaults.failureIsolation)
  ),
  maxConcurrency: Config.integer("SKEIN_MAX_CONCURRENCY").pipe(
    Config.validate({ message: "SKEIN_MAX_CONCURRENCY must be a positive integer", validation: (n) => n > 0 }),
    Config.map((n): number | "unbounded" => n),
    Config.withDefault(defaults.maxConcurrency)
  ),
  revocationGrace: Config.duration("SKEIN_REVOCATION_GRACE").pipe(Config.withDefault(defaults.revocationGrace)),
  shutdownGrace: Config.duration("SKEIN_SHUTDOWN_GRACE").pipe(Config.withDefault(defaults.shutdownGrace)),
  maxMessageBytes: Config.integer("SKEIN_MAX_MESSAGE_BYTES").pipe(Config.withDefault(defaults.maxMessageBytes)),
  maxDeliveryFailures: Config.integer("SKEIN_MAX_DELIVERY_FAILURES").pipe(
    Config.withDefault(defaults.maxDeliveryFailures)
  ),
  deliveryBackoff: Config.duration("SKEIN_DELIVERY_BACKOFF").pipe(Config.withDefault(defaults.deliveryBackoff)),
  healthPort: Config.integer("SKEIN_HEALTH_PORT").pipe(Config.option, Config.map(Option.getOrUndefined)),
  queryPort: Config.integer("SKEIN_QUERY_PORT").pipe(
    Config.validate({ message: "SKEIN_QUERY_PORT must be a port, 0 to 65535", validation: (n) => n >= 0 && n <= 65535 }),
    optional("Port of the HTTP query endpoint (unset: no endpoint; 0: any free port)")
  ),
  queryHost: Config.string("SKEIN_QUERY_HOST").pipe(
    Config.withDefault(defaults.queryHost),
    Config.withDescription("Address the query endpoint listens on (default 127.0.0.1: this machine only)")
  ),
  queryToken: Config.redacted("SKEIN_QUERY_TOKEN").pipe(
    optional("Bearer token every query must carry (unset: none); never logged")
  ),
  queryEndpoint: Config.string("SKEIN_QUERY_ENDPOINT").pipe(
    optional("host:port where other instances reach this query endpoint (unset: queryHost and the bound port)")
  ),
  queryTlsCertFile: Config.string("SKEIN_QUERY_TLS_CERT_FILE").pipe(
    optional("PEM file of the query endpoint's certificate (with the key file: HTTPS; unset: plain HTTP)")
  ),
  queryTlsKeyFile: Config.string("SKEIN_QUERY_TLS_KEY_FILE").pipe(
    optional("PEM file of the query endpoint's private key; never logged")
  ),
  queryTlsCaFile: Config.string("SKEIN_QUERY_TLS_CA_FILE").pipe(
    optional("PEM file of the CA(s) trusted when forwarding a query to another instance (unset: the system's)")
  ),
  checkStateKeys: Config.boolean("SKEIN_CHECK_STATE_KEYS").pipe(
    optional("Warn when a state key spans input partitions (unset: on for a custom stateKey)")
  ),
  securityProtocol: Config.literal("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")("SKEIN_SECURITY_PROTOCOL").pipe(
    Config.withDefault(defaults.securityProtocol),
    Config.withDescription("PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
  ),
  saslMechanism: Config.literal("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")("SKEIN_SASL_MECHANISM").pipe(
    optional("SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
  ),
  saslUsername: Config.string("SKEIN_SASL_USERNAME").pipe(
    optional("SASL user (an API key for Confluent Cloud)")
  ),
  saslPassword: Config.redacted("SKEIN_SASL_PASSWORD").pipe(
    optional("SASL password (an API secret for Confluent Cloud); never logged")
  ),
  oauthBearerToken: Config.succeed(undefined),
  sslCaFile: Config.string("SKEIN_SSL_CA_FILE").pipe(
    optional("PEM file of the CA(s) to trust (unset: the system's trust store)")
  ),
  sslCertFile: Config.string("SKEIN_SSL_CERT_FILE").pipe(
    optional("PEM file of the client certificate (mutual TLS)")
  ),
  sslKeyFile: Config.string("SKEIN_SSL_KEY_FILE").pipe(
    optional("PEM file of the client certificate's private key (mutual TLS)")
  ),
  sslRejectUnauthorized: Config.boolean("SKEIN_SSL_REJECT_UNAUTHORIZED").pipe(
    Config.withDefault(defaults.sslRejectUnauthorized),
    Config.withDescription("Verify the brokers' certificates (false: accept any, logged as a warning)")
  )
})

/**
 * A layer reading the configuration from the environment, with overrides.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner, SkeinConfig } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.provide(SkeinConfig.layerConfig({ stateDir: "/var/lib/word-count" })),
 *   Runner.runMain
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  overrides: Partial<SkeinConfig> = {}
): Layer.Layer<SkeinConfig, ConfigError.ConfigError> =>
  Layer.effect(SkeinConfig, Effect.map(config, (base) => ({ ...base, ...overrides })))
