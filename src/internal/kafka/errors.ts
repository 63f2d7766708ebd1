/**
 * Maps kafkajs failures to Skein's typed errors. The only place that knows
 * kafkajs's error shapes.
 *
 * @internal
 */
import { Data, Duration } from "effect"
import { AuthenticationFailed, AuthorizationFailed, KafkaError, TlsError } from "../../SkeinError.ts"
import type { DatabaseError, SecurityError } from "../../SkeinError.ts"

const FENCED_TYPES = new Set(["INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED", "INVALID_PRODUCER_ID_MAPPING"])
const TIMEOUT_NAMES = new Set(["KafkaJSRequestTimeoutError", "KafkaJSTimeout"])
const CONNECTION_NAMES = new Set(["KafkaJSConnectionError", "KafkaJSNoBrokerAvailableError", "KafkaJSBrokerNotFound"])
/** The failures of a request whose broker could not be reached or went away. */
const UNREACHABLE_NAMES = new Set([...CONNECTION_NAMES, "KafkaJSConnectionClosedError", "KafkaJSRequestTimeoutError"])

interface ErrorLike {
  readonly name?: unknown
  readonly type?: unknown
  readonly message?: unknown
  readonly cause?: unknown
  readonly originalError?: unknown
  /** A `KafkaJSAggregateError`'s parts (e.g. createTopics' per-topic errors). */
  readonly errors?: unknown
}

const asErrorLike = (u: unknown): ErrorLike | undefined =>
  typeof u === "object" && u !== null ? (u as ErrorLike) : undefined

/**
 * Every error in a kafkajs cause chain (retries wrap the original error), the
 * parts of an aggregate error included (createTopics reports per topic).
 */
export const chain = (error: unknown): ReadonlyArray<ErrorLike> => {
  const out: Array<ErrorLike> = []
  const queue: Array<unknown> = [error]
  while (queue.length > 0 && out.length < 16) {
    const current = asErrorLike(queue.shift())
    if (current === undefined || out.includes(current)) continue
    out.push(current)
    queue.push(current.cause, current.originalError)
    if (Array.isArray(current.errors)) queue.push(...current.errors.slice(0, 8))
  }
  return out
}

/** True when the producer's epoch was bumped by a newer owner (or by a transaction timeout). */
export const isFenced = (error: unknown): boolean =>
  chain(error).some((e) => typeof e.type === "string" && FENCED_TYPES.has(e.type))

/**
 * True when a request failed because a broker could not be reached or went away
 * (refused, closed, timed out), kafkajs's retries of it included: the answer of
 * a broker being killed or restarted, whose partitions and coordinators move
 * to the others.
 */
export const lostBroker = (error: unknown): boolean =>
  chain(error).some((e) => typeof e.name === "string" && UNREACHABLE_NAMES.has(e.name))

/** True for the errors kafkajs uses to signal a group rebalance. */
export const isRebalancing = (error: unknown): boolean =>
  chain(error).some((e) =>
    e.type === "REBALANCE_IN_PROGRESS" || e.type === "NOT_COORDINATOR_FOR_GROUP" || e.type === "ILLEGAL_GENERATION" ||
    e.type === "UNKNOWN_MEMBER_ID"
  )

/**
 * What an operation touches, so that a denied one names its resource: the
 * topics (and what is done to them), the group, the transactional id.
 */
export interface Access {
  readonly topics?: ReadonlyArray<string> | undefined
  readonly topicOperation?: AuthorizationFailed["operation"] | undefined
  readonly group?: string | undefined
  readonly groupOperation?: AuthorizationFailed["operation"] | undefined
  /** A prefix covering the group's name, when the name has a per-run suffix (see `AuthorizationFailed.prefix`). */
  readonly groupPrefix?: string | undefined
  readonly transactionalId?: string | undefined
  readonly clusterOperation?: AuthorizationFailed["operation"] | undefined
}

/** The client's SASL identity, for an authentication failure's message (never the password). */
export interface Identity {
  readonly mechanism?: string | undefined
  readonly username?: string | undefined
}

/** Node's codes for a certificate no trusted CA signed. */
const UNTRUSTED_CODES = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_DECRYPT_CERT_SIGNATURE",
  "CERT_SIGNATURE_FAILURE",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "INVALID_CA"
])
const HOSTNAME_CODES = new Set(["ERR_TLS_CERT_ALTNAME_INVALID", "HOSTNAME_MISMATCH"])
const EXPIRED_CODES = new Set(["CERT_HAS_EXPIRED", "CERT_NOT_YET_VALID"])
/** The broker's TLS alerts when it wants a (trusted) client certificate. */
const CLIENT_CERTIFICATE_CODES = new Set([
  "ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE",
  "ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED",
  "ERR_SSL_SSLV3_ALERT_CERTIFICATE_UNKNOWN",
  "ERR_SSL_TLSV1_ALERT_UNKNOWN_CA"
])
const isHandshakeCode = (code: string): boolean =>
  code === "EPROTO" || code.startsWith("ERR_SSL_") || code.startsWith("ERR_TLS_")

const AUTHENTICATION_TYPES = new Set(["SASL_AUTHENTICATION_FAILED", "UNSUPPORTED_SASL_MECHANISM", "ILLEGAL_SASL_STATE"])

const text = (u: unknown): string => (typeof u === "string" ? u : "")

/**
 * The security failure in a kafkajs error's chain, if any: failed
 * authentication, a failed TLS handshake or a denied operation. These are
 * never retried (see `isFatal`).
 */
export const securityError = (
  error: unknown,
  operation: string,
  access: Access = {},
  identity: Identity = {}
): SecurityError | undefined => {
  const errors = chain(error)
  for (const e of errors) {
    if (e instanceof AuthenticationFailed || e instanceof TlsError || e instanceof AuthorizationFailed) return e
  }
  for (const e of errors) {
    const type = text(e.type)
    const name = text(e.name)
    if (name === "KafkaJSSASLAuthenticationError" || AUTHENTICATION_TYPES.has(type)) {
      return new AuthenticationFailed({
        mechanism: identity.mechanism,
        username: identity.username,
        broker: undefined,
        detail: type === "UNSUPPORTED_SASL_MECHANISM"
          ? "the broker does not enable this mechanism on the listener"
          : (text(e.message) || type),
        cause: error
      })
    }
    const denied = (
      resource: AuthorizationFailed["resource"],
      names: ReadonlyArray<string>,
      op: AuthorizationFailed["operation"],
      prefix?: string
    ) => new AuthorizationFailed({ resource, names, operation: op, during: operation, prefix, cause: error })
    switch (type) {
      case "TOPIC_AUTHORIZATION_FAILED":
        return denied("topic", access.topics ?? [], access.topicOperation ?? "DESCRIBE")
      case "GROUP_AUTHORIZATION_FAILED":
        return denied(
          "group",
          access.group === undefined ? [] : [access.group],
          access.groupOperation ?? "READ",
          access.groupPrefix
        )
      case "TRANSACTIONAL_ID_AUTHORIZATION_FAILED":
        return denied(
          "transactional-id",
          access.transactionalId === undefined ? [] : [access.transactionalId],
          "WRITE"
        )
      case "CLUSTER_AUTHORIZATION_FAILED":
        return denied("cluster", [], access.clusterOperation ?? "IDEMPOTENT_WRITE")
    }
    const code = text((e as { readonly code?: unknown }).code)
    if (code !== "" && (UNTRUSTED_CODES.has(code) || HOSTNAME_CODES.has(code) || EXPIRED_CODES.has(code) || isHandshakeCode(code))) {
      const broker = text((e as { readonly broker?: unknown }).broker)
      return new TlsError({
        reason: UNTRUSTED_CODES.has(code)
          ? "UntrustedCertificate"
          : HOSTNAME_CODES.has(code)
          ? "HostnameMismatch"
          : EXPIRED_CODES.has(code)
          ? "CertificateExpired"
          : CLIENT_CERTIFICATE_CODES.has(code)
          ? "ClientCertificateRejected"
          : "Handshake",
        host: broker === "" ? undefined : broker.replace(/:\d+$/, ""),
        code,
        detail: text(e.message).replace(/\s+/g, " "),
        cause: error
      })
    }
  }
  return undefined
}

/** The security failure a `KafkaError` carries (see `toKafkaError`), if any. */
export const securityFailure = (error: KafkaError): SecurityError | undefined =>
  error.cause instanceof AuthenticationFailed || error.cause instanceof TlsError ||
    error.cause instanceof AuthorizationFailed
    ? error.cause
    : undefined

/**
 * True for failures no retry can get past (credentials, TLS, ACLs): the
 * runtime fails at once instead of backing off and retrying.
 */
export const isFatal = (error: KafkaError): boolean => securityFailure(error) !== undefined

const recoverableBrand: unique symbol = Symbol("skein/Recoverable")

/**
 * A broker (or a `DatabaseSink`'s database) failure the runner recovers from:
 * it rewinds or restarts the task after a backoff. Only `classify` and
 * `classifyDatabase` make one (its brand is a symbol this module does not
 * export), so a retry of a fatal failure does not compile.
 */
export interface Recoverable {
  readonly [recoverableBrand]: true
  readonly _tag: "Recoverable"
  readonly error: KafkaError | DatabaseError
}

/** A broker failure no retry gets past (credentials, TLS, ACLs): the run fails with it at once. */
export interface Fatal {
  readonly _tag: "Fatal"
  readonly error: KafkaError
  readonly security: SecurityError
}

/** Whether the runner can recover from `error`, as a type: `Recoverable` or `Fatal`. */
export const classify = (error: KafkaError): Recoverable | Fatal => {
  const security = securityFailure(error)
  return security === undefined
    ? { [recoverableBrand]: true, _tag: "Recoverable", error }
    : { _tag: "Fatal", error, security }
}

/**
 * A `DatabaseSink`'s database failure: recoverable (the task rolls back and
 * restarts from the database's positions after a backoff) unless a fix is
 * needed first (`Refused`: credentials, a missing database, permissions).
 */
export const classifyDatabase = (
  error: DatabaseError
): Recoverable | { readonly _tag: "Fatal"; readonly error: DatabaseError } =>
  error.reason === "Refused" ? { _tag: "Fatal", error } : { [recoverableBrand]: true, _tag: "Recoverable", error }

/**
 * A run's failure as the user should see it: a `KafkaError` (or a
 * `DeliveryFailed`) caused by a security failure is that failure.
 */
export const surface = <E>(error: E): E | SecurityError => {
  if (error instanceof KafkaError) return securityFailure(error) ?? error
  if (
    typeof error === "object" && error !== null && "_tag" in error && error._tag === "DeliveryFailed" &&
    "cause" in error && error.cause instanceof KafkaError
  ) {
    return securityFailure(error.cause) ?? error
  }
  return error
}

/**
 * Maps any kafkajs failure to a `KafkaError` with a reason. A security
 * failure (see `securityError`) becomes the `KafkaError`'s cause, typed.
 */
export const toKafkaError = (operation: string, access?: Access) => (error: unknown): KafkaError => {
  const security = securityError(error, operation, access)
  if (security !== undefined) {
    return new KafkaError({ reason: security._tag === "TlsError" ? "Connection" : "Protocol", operation, cause: security })
  }
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

/**
 * A kafkajs client kept failing to reach the brokers it needed for longer than
 * its retries last (`retryBudget`), e.g. the whole cluster down or cut off from
 * this host. One broker of a replicated cluster going down does not cause it:
 * its partitions and coordinators move to the others. The cause of the run's
 * `KafkaError` (reason "Connection").
 */
export class ClusterUnreachable extends Data.TaggedError("ClusterUnreachable")<{
  readonly client: string
  readonly retryBudget: Duration.Duration
  readonly cause: unknown
}> {
  override get message(): string {
    const last = chain(this.cause).find((e) => typeof e.name === "string" && UNREACHABLE_NAMES.has(e.name))
    return `the ${this.client} could not reach the Kafka brokers it needs for longer than its retries last ` +
      `(about ${Math.round(Duration.toSeconds(this.retryBudget))} s; last failure: ${text(last?.message)}). ` +
      "Check that the brokers in SkeinConfig.brokers are running and reachable from this host (addresses, ports, " +
      "firewalls, the brokers' advertised.listeners) and that the cluster has a leader for the internal topics " +
      "(__consumer_offsets, __transaction_state)"
  }
}

/**
 * `error` as a `ClusterUnreachable` when it is kafkajs giving up after its
 * retries on unreachable brokers; otherwise `error` itself.
 */
export const unreachableAfterRetries = (client: string, retryBudget: Duration.Duration) => (error: unknown): unknown => {
  const errors = chain(error)
  const exhausted = errors.some((e) => e.name === "KafkaJSNumberOfRetriesExceeded")
  const unreachable = errors.some((e) => typeof e.name === "string" && UNREACHABLE_NAMES.has(e.name))
  return exhausted && unreachable ? new ClusterUnreachable({ client, retryBudget, cause: error }) : error
}
