/**
 * The kafkajs client: the one module that builds kafkajs instances, and the
 * one place that knows how a run connects (brokers, TLS, SASL). Every
 * consumer, producer, admin client and changelog reader of a run is made
 * from the `Kafka` built here, so the connection settings are given once.
 *
 * @internal
 */
import { Effect, Redacted, Runtime } from "effect"
import type { Kafka, KafkaConfig, LogEntry, SASLOptions } from "kafkajs"
import * as fs from "node:fs/promises"
import type { SkeinConfig } from "../../SkeinConfig.ts"
import { AuthorizationFailed, ConfigurationError } from "../../SkeinError.ts"
import type { KafkaError, SecurityError } from "../../SkeinError.ts"
import { chain, securityError, toKafkaError } from "./errors.ts"
import type { Access } from "./errors.ts"
import * as PatchedKafkajs from "./patchedKafkajs.ts"

export type { Kafka }

/** kafkajs's log levels by name (its `logLevel`). */
const levels = (logLevel: PatchedKafkajs.KafkaJS["logLevel"]): Record<string, number> => ({
  nothing: logLevel.NOTHING,
  error: logLevel.ERROR,
  warn: logLevel.WARN,
  info: logLevel.INFO,
  debug: logLevel.DEBUG
})

/**
 * kafkajs logs every retried request as an error, which is noise during
 * fencing and rebalances: Skein reports failures as typed errors instead.
 * Set `SKEIN_KAFKAJS_LOG=warn|info|debug` to see the client's own log.
 */
const configuredLevel = (logLevel: PatchedKafkajs.KafkaJS["logLevel"]): number => {
  const name = typeof process === "undefined" ? undefined : process.env["SKEIN_KAFKAJS_LOG"]
  return levels(logLevel)[name ?? "nothing"] ?? logLevel.NOTHING
}

const logCreator = () => (entry: LogEntry) => {
  const { message, ...extra } = entry.log
  console.error(`[kafkajs ${entry.namespace}] ${message} ${JSON.stringify(extra)}`)
}

/** How a run connects: `SkeinConfig`'s client id, brokers and security settings. */
export type ConnectionOptions =
  & Pick<SkeinConfig, "clientId" | "brokers">
  & Partial<
    Pick<
      SkeinConfig,
      | "securityProtocol"
      | "saslMechanism"
      | "saslUsername"
      | "saslPassword"
      | "oauthBearerToken"
      | "sslCaFile"
      | "sslCertFile"
      | "sslKeyFile"
      | "sslRejectUnauthorized"
    >
  >

const readPem = (file: string, setting: string): Effect.Effect<string, ConfigurationError> =>
  Effect.tryPromise({
    try: () => fs.readFile(file, "utf8"),
    catch: (error) =>
      new ConfigurationError({
        problem: `${setting} is ${file}, which cannot be read (${
          typeof error === "object" && error !== null && "code" in error ? String(error.code) : "unreadable"
        })`,
        fix: `Point ${setting} at a readable PEM file`
      })
  })

/** The kafkajs `ssl` and `sasl` options of the given settings. */
const securityOptions = (
  options: ConnectionOptions
): Effect.Effect<Pick<KafkaConfig, "ssl" | "sasl">, ConfigurationError> =>
  Effect.gen(function*() {
    const protocol = options.securityProtocol ?? "PLAINTEXT"
    const tls = protocol === "SSL" || protocol === "SASL_SSL"
    const sasl = protocol === "SASL_PLAINTEXT" || protocol === "SASL_SSL"
    if (!sasl && options.saslMechanism !== undefined) {
      return yield* new ConfigurationError({
        problem: `SKEIN_SASL_MECHANISM is ${options.saslMechanism} but SKEIN_SECURITY_PROTOCOL is ${protocol}`,
        fix: "Set SKEIN_SECURITY_PROTOCOL to SASL_SSL (or SASL_PLAINTEXT), or unset SKEIN_SASL_MECHANISM"
      })
    }
    if (!tls && (options.sslCaFile ?? options.sslCertFile ?? options.sslKeyFile) !== undefined) {
      return yield* new ConfigurationError({
        problem: `SKEIN_SSL_* files are set but SKEIN_SECURITY_PROTOCOL is ${protocol}`,
        fix: "Set SKEIN_SECURITY_PROTOCOL to SSL or SASL_SSL, or unset the SKEIN_SSL_* settings"
      })
    }
    if ((options.sslCertFile === undefined) !== (options.sslKeyFile === undefined)) {
      return yield* new ConfigurationError({
        problem: "Only one of SKEIN_SSL_CERT_FILE and SKEIN_SSL_KEY_FILE is set",
        fix: "Mutual TLS needs both the client certificate and its key: set both, or neither"
      })
    }
    const rejectUnauthorized = options.sslRejectUnauthorized ?? true
    if (tls && !rejectUnauthorized) {
      yield* Effect.logWarning(
        "SKEIN_SSL_REJECT_UNAUTHORIZED is false: the brokers' certificates are NOT verified, so anyone on the " +
          "network path can impersonate the cluster and read the credentials and the data. Use it for experiments " +
          "only; set SKEIN_SSL_CA_FILE to the cluster's CA instead."
      )
    }
    const ssl: NonNullable<KafkaConfig["ssl"]> = tls
      ? {
        rejectUnauthorized,
        ...(options.sslCaFile === undefined ? {} : { ca: [yield* readPem(options.sslCaFile, "SKEIN_SSL_CA_FILE")] }),
        ...(options.sslCertFile === undefined ? {} : { cert: yield* readPem(options.sslCertFile, "SKEIN_SSL_CERT_FILE") }),
        ...(options.sslKeyFile === undefined ? {} : { key: yield* readPem(options.sslKeyFile, "SKEIN_SSL_KEY_FILE") })
      }
      : false
    if (!sasl) return { ssl }
    const mechanism = options.saslMechanism
    if (mechanism === undefined) {
      return yield* new ConfigurationError({
        problem: `SKEIN_SECURITY_PROTOCOL is ${protocol} but no SASL mechanism is set`,
        fix: "Set SKEIN_SASL_MECHANISM to PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"
      })
    }
    if (mechanism === "OAUTHBEARER") {
      const token = options.oauthBearerToken
      if (token === undefined) {
        return yield* new ConfigurationError({
          problem: "SKEIN_SASL_MECHANISM is OAUTHBEARER but no token provider is given",
          fix: "Set SkeinConfig.oauthBearerToken to an Effect yielding a token (e.g. an OIDC client-credentials flow)"
        })
      }
      const runtime = yield* Effect.runtime<never>()
      const provider: SASLOptions = {
        mechanism: "oauthbearer",
        oauthBearerProvider: async () => {
          // As an Exit, so that a failure is no "unhandled error" the runtime would log.
          const exit = await Runtime.runPromise(runtime)(Effect.exit(token))
          if (exit._tag === "Success") return { value: Redacted.value(exit.value) }
          // Not the failure's text: it may hold what the token request sent. Not retried by kafkajs.
          throw Object.assign(new Error("SASL OAUTHBEARER: the oauthBearerToken effect failed to produce a token"), {
            name: "KafkaJSSASLAuthenticationError",
            retriable: false
          })
        }
      }
      return { ssl, sasl: provider }
    }
    const username = options.saslUsername
    const password = options.saslPassword
    if (username === undefined || password === undefined) {
      return yield* new ConfigurationError({
        problem: `SKEIN_SASL_MECHANISM is ${mechanism} but ${username === undefined ? "SKEIN_SASL_USERNAME" : "SKEIN_SASL_PASSWORD"} is not set`,
        fix: "Set both SKEIN_SASL_USERNAME and SKEIN_SASL_PASSWORD"
      })
    }
    if (mechanism === "PLAIN" && !tls) {
      // The password itself is never logged: only the settings that send it.
      yield* Effect.logWarning(
        "SKEIN_SECURITY_PROTOCOL is SASL_PLAINTEXT with SKEIN_SASL_MECHANISM PLAIN: SKEIN_SASL_PASSWORD is sent to " +
          "the brokers in clear text, readable by anyone on the network path. Set SKEIN_SECURITY_PROTOCOL to SASL_SSL " +
          "(TLS), or use SCRAM-SHA-256 or SCRAM-SHA-512, which never send the password."
      )
    }
    const credentials = { username, password: Redacted.value(password) }
    const plain: SASLOptions = mechanism === "PLAIN"
      ? { mechanism: "plain", ...credentials }
      : mechanism === "SCRAM-SHA-256"
      ? { mechanism: "scram-sha-256", ...credentials }
      : { mechanism: "scram-sha-512", ...credentials }
    return { ssl, sasl: plain }
  })

/**
 * Connects once, without retries, so that wrong credentials, an untrusted
 * certificate or a listener of another protocol fail the run within seconds
 * with a typed error instead of a long retry loop. Any other failure (a
 * broker not up yet) is left to the run's own connections and their retries.
 */
const preflight = (
  { Kafka: KafkaClass, logLevel }: PatchedKafkajs.KafkaJS,
  config: KafkaConfig,
  options: ConnectionOptions
): Effect.Effect<void, SecurityError> =>
  Effect.async<void, SecurityError>((resume) => {
    const admin = new KafkaClass({ ...config, retry: { retries: 0 }, logLevel: logLevel.NOTHING }).admin()
    admin.connect().then(
      () => {
        admin.disconnect().catch(() => undefined)
        resume(Effect.void)
      },
      (error: unknown) => {
        admin.disconnect().catch(() => undefined)
        const security = securityError(error, "connect", {}, {
          mechanism: options.saslMechanism,
          username: options.saslUsername
        })
        resume(security === undefined ? Effect.void : Effect.fail(security))
      }
    )
  })

/**
 * A kafkajs client for the given brokers and security settings. Fails with
 * `ConfigurationError` when the installed kafkajs lacks Skein's patch (see
 * `patchedKafkajs.ts`: no client is ever built on an unpatched kafkajs) or the
 * security settings are incomplete, and with a `SecurityError` when a first
 * connection cannot authenticate or verify the brokers.
 */
export const makeKafka = (
  options: ConnectionOptions
): Effect.Effect<Kafka, ConfigurationError | SecurityError> =>
  Effect.gen(function*() {
    const kafkajs = yield* PatchedKafkajs.load
    const security = yield* securityOptions(options)
    const config: KafkaConfig = {
      clientId: options.clientId,
      brokers: [...options.brokers],
      logLevel: configuredLevel(kafkajs.logLevel),
      logCreator,
      retry: { initialRetryTime: 100, retries: 8 },
      ...security
    }
    const secured = (options.securityProtocol ?? "PLAINTEXT") !== "PLAINTEXT"
    if (secured) yield* preflight(kafkajs, config, options)
    const kafka = new kafkajs.Kafka(config)
    if (secured) securedClients.add(kafka)
    return kafka
  })

/** Clients with security settings: only their coordinators are asked for directly (see `deniedCoordinator`). */
const securedClients = new WeakSet<Kafka>()

/** The parts of a kafkajs 2.2.4 cluster the probe uses (kafkajs's own, not public API). */
interface ProbeCluster {
  readonly connect: () => Promise<void>
  readonly disconnect: () => Promise<void>
  readonly refreshMetadata: () => Promise<void>
  readonly findControllerBroker: () => Promise<{
    readonly findGroupCoordinator: (request: { groupId: string; coordinatorType: number }) => Promise<unknown>
  }>
}

const COORDINATOR_TYPES = { group: 0, transaction: 1 } as const

/** kafkajs's private cluster factory of a client, if this kafkajs has it (2.2.4 does). */
const clusterFactory = (kafka: Kafka): (() => ProbeCluster) | undefined => {
  const symbol = Object.getOwnPropertySymbols(kafka).find((s) => s.description === "private:Kafka:createCluster")
  const create: unknown = symbol === undefined ? undefined : Reflect.get(kafka, symbol)
  return typeof create === "function"
    ? () => Reflect.apply(create, kafka, [{ allowAutoTopicCreation: false }]) as ProbeCluster
    : undefined
}

/**
 * Asks one broker for the coordinator of a group or a transactional id and
 * returns the `KafkaError` (carrying `AuthorizationFailed`) if that was denied.
 * kafkajs swallows a GROUP_/TRANSACTIONAL_ID_AUTHORIZATION_FAILED answer to
 * FindCoordinator ("Failed to find group coordinator") and retries it for
 * many seconds; this request gets the broker's real answer. Any other outcome
 * is `undefined`. Only for secured clients (a cluster with ACLs).
 */
const deniedCoordinator = (
  kafka: Kafka,
  coordinator: { readonly type: "group" | "transaction"; readonly key: string; readonly prefix?: string | undefined },
  operation: string
): Effect.Effect<KafkaError | undefined> => {
  const factory = securedClients.has(kafka) ? clusterFactory(kafka) : undefined
  if (factory === undefined) return Effect.succeed(undefined)
  const access: Access = coordinator.type === "group"
    ? { group: coordinator.key, groupOperation: "READ", groupPrefix: coordinator.prefix }
    : { transactionalId: coordinator.key }
  return Effect.promise(async (): Promise<KafkaError | undefined> => {
    const cluster = factory()
    try {
      await cluster.connect()
      await cluster.refreshMetadata()
      const broker = await cluster.findControllerBroker()
      await broker.findGroupCoordinator({ groupId: coordinator.key, coordinatorType: COORDINATOR_TYPES[coordinator.type] })
      return undefined
    } catch (error) {
      const failure = toKafkaError(operation, access)(error)
      return failure.cause instanceof AuthorizationFailed ? failure : undefined
    } finally {
      await cluster.disconnect().catch(() => undefined)
    }
  }).pipe(
    // A broker that does not answer is no denial: the caller's own request will wait and retry.
    Effect.timeoutTo({ duration: "5 seconds", onSuccess: (failure) => failure, onTimeout: () => undefined })
  )
}

/**
 * Checks, before a producer fences with `transactionalId`, that the id is
 * allowed: a denied one fails at once instead of after kafkajs's retries.
 */
export const probeTransactionalId = (kafka: Kafka, transactionalId: string): Effect.Effect<void, KafkaError> =>
  Effect.flatMap(
    deniedCoordinator(kafka, { type: "transaction", key: transactionalId }, "fence"),
    (failure) => (failure === undefined ? Effect.void : Effect.fail(failure))
  )

/**
 * Explains a failure to find a group's coordinator: the `AuthorizationFailed`
 * behind it if the group was denied, else the failure as it was. `prefix`
 * covers a group named with a per-run suffix: the fix grants on it.
 */
export const explainGroupFailure = (kafka: Kafka, groupId: string, prefix?: string) =>
(error: KafkaError): Effect.Effect<never, KafkaError> =>
  chain(error.cause).some((e) => e.name === "KafkaJSGroupCoordinatorNotFound")
    ? Effect.flatMap(deniedCoordinator(kafka, { type: "group", key: groupId, prefix }, error.operation), (denied) =>
      Effect.fail(denied ?? error))
    : Effect.fail(error)

/** A kafkajs producer, consumer or admin: what `connectOrDisconnect` needs of it. */
interface Connectable {
  readonly connect: () => Promise<void>
  readonly disconnect: () => Promise<void>
}

/**
 * Connects `client`, then runs `then` (a consumer's subscribe and run); when
 * either fails, disconnects it before failing. A connect can fail after its
 * cluster connected (a producer's InitProducerId, a consumer's join), and the
 * acquire of a scoped client that failed registers no release: without this
 * its sockets stayed open.
 */
export const connectOrDisconnect = async (client: Connectable, then?: () => Promise<void>): Promise<void> => {
  try {
    await client.connect()
    if (then !== undefined) await then()
  } catch (error) {
    await client.disconnect().catch(() => undefined)
    throw error
  }
}
