/**
 * The security settings and the error mapping, without a broker: env
 * parsing (the password stays Redacted), incomplete settings, the loud
 * warning of `sslRejectUnauthorized: false`, and kafkajs/node error shapes
 * mapped to typed errors.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Logger, Redacted } from "effect"
import { SkeinConfig, SkeinError } from "../../src/index.ts"
import { makeKafka } from "../../src/internal/kafka/client.ts"
import { isFatal, securityError, surface, toKafkaError } from "../../src/internal/kafka/errors.ts"

const base = { clientId: "test", brokers: ["127.0.0.1:1"] }

describe("security settings", () => {
  it.effect("are read from the environment; the password is Redacted", () =>
    Effect.gen(function*() {
      const config = yield* SkeinConfig.config.pipe(
        Effect.withConfigProvider(ConfigProvider.fromMap(
          new Map([
            ["SKEIN_APPLICATION_ID", "app"],
            ["KAFKA_BROKERS", "b1:9093"],
            ["SKEIN_SECURITY_PROTOCOL", "SASL_SSL"],
            ["SKEIN_SASL_MECHANISM", "SCRAM-SHA-512"],
            ["SKEIN_SASL_USERNAME", "alice"],
            ["SKEIN_SASL_PASSWORD", "s3cr3t-value"],
            ["SKEIN_SSL_CA_FILE", "/etc/ca.pem"]
          ])
        ))
      )
      assert.strictEqual(config.securityProtocol, "SASL_SSL")
      assert.strictEqual(config.saslMechanism, "SCRAM-SHA-512")
      assert.strictEqual(config.saslUsername, "alice")
      assert.strictEqual(config.sslCaFile, "/etc/ca.pem")
      assert.strictEqual(config.sslRejectUnauthorized, true)
      assert.ok(config.saslPassword !== undefined && Redacted.value(config.saslPassword) === "s3cr3t-value")
      assert.notInclude(JSON.stringify(config), "s3cr3t-value")
      assert.notInclude(String(config.saslPassword), "s3cr3t-value")
    }))

  it.effect("default to PLAINTEXT; an unknown protocol or mechanism is a config error", () =>
    Effect.gen(function*() {
      const read = (entries: ReadonlyArray<readonly [string, string]>) =>
        SkeinConfig.config.pipe(
          Effect.withConfigProvider(
            ConfigProvider.fromMap(new Map([["SKEIN_APPLICATION_ID", "app"], ["KAFKA_BROKERS", "b:1"], ...entries]))
          )
        )
      assert.strictEqual((yield* read([])).securityProtocol, "PLAINTEXT")
      const protocol = yield* Effect.flip(read([["SKEIN_SECURITY_PROTOCOL", "TLS"]]))
      assert.include(String(protocol), "SKEIN_SECURITY_PROTOCOL")
      const mechanism = yield* Effect.flip(read([["SKEIN_SASL_MECHANISM", "GSSAPI"]]))
      assert.include(String(mechanism), "SKEIN_SASL_MECHANISM")
    }))

  it.effect("incomplete settings fail with ConfigurationError naming the setting", () =>
    Effect.gen(function*() {
      const noMechanism = yield* Effect.flip(makeKafka({ ...base, securityProtocol: "SASL_SSL" }))
      assert.strictEqual(noMechanism._tag, "ConfigurationError")
      assert.include(noMechanism.message, "SKEIN_SASL_MECHANISM")
      const noPassword = yield* Effect.flip(
        makeKafka({ ...base, securityProtocol: "SASL_SSL", saslMechanism: "PLAIN", saslUsername: "u" })
      )
      assert.include(noPassword.message, "SKEIN_SASL_PASSWORD")
      const noToken = yield* Effect.flip(makeKafka({ ...base, securityProtocol: "SASL_SSL", saslMechanism: "OAUTHBEARER" }))
      assert.include(noToken.message, "oauthBearerToken")
      const missingCa = yield* Effect.flip(makeKafka({ ...base, securityProtocol: "SSL", sslCaFile: "/nonexistent/ca.pem" }))
      assert.include(missingCa.message, "SKEIN_SSL_CA_FILE")
      const halfMtls = yield* Effect.flip(makeKafka({ ...base, securityProtocol: "SSL", sslCertFile: "/x.pem" }))
      assert.include(halfMtls.message, "SKEIN_SSL_KEY_FILE")
      const plaintextSasl = yield* Effect.flip(makeKafka({ ...base, saslMechanism: "PLAIN" }))
      assert.include(plaintextSasl.message, "SKEIN_SECURITY_PROTOCOL")
    }))

  it.effect("sslRejectUnauthorized: false logs a loud warning", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const capture = Logger.replace(Logger.defaultLogger, Logger.make(({ logLevel, message }) => {
        lines.push(`${logLevel.label} ${String(message)}`)
      }))
      // Nothing listens on port 1: the first connection is refused, which is no security failure.
      yield* makeKafka({ ...base, securityProtocol: "SSL", sslRejectUnauthorized: false }).pipe(
        Effect.provide(Layer.mergeAll(capture))
      )
      assert.ok(lines.some((line) => line.startsWith("WARN") && line.includes("NOT verified")), lines.join("\n"))
    }))

  it.effect("SASL_PLAINTEXT with PLAIN warns that the password crosses the network in clear, never logging it", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const capture = Logger.replace(Logger.defaultLogger, Logger.make(({ logLevel, message }) => {
        lines.push(`${logLevel.label} ${String(message)}`)
      }))
      const sasl = (securityProtocol: "SASL_PLAINTEXT" | "SASL_SSL", saslMechanism: "PLAIN" | "SCRAM-SHA-512") =>
        makeKafka({
          ...base,
          securityProtocol,
          saslMechanism,
          saslUsername: "alice",
          saslPassword: Redacted.make("s3cr3t-value")
        }).pipe(Effect.provide(capture))
      const warnings = () => lines.filter((line) => line.startsWith("WARN"))
      // Nothing listens on port 1: the first connection is refused, which is no security failure.
      yield* sasl("SASL_PLAINTEXT", "PLAIN")
      const clear = warnings()
      assert.strictEqual(clear.length, 1, `one warning for SASL_PLAINTEXT with PLAIN; logged:\n${lines.join("\n")}`)
      assert.include(clear[0], "SASL_SSL")
      assert.include(clear[0], "SCRAM")
      assert.notInclude(lines.join("\n"), "s3cr3t-value")
      lines.length = 0
      yield* sasl("SASL_PLAINTEXT", "SCRAM-SHA-512")
      yield* sasl("SASL_SSL", "PLAIN")
      assert.deepStrictEqual(warnings(), [], "SCRAM never sends the password; SASL_SSL encrypts it")
    }))
})

describe("kafkajs and node errors", () => {
  const protocolError = (type: string) => Object.assign(new Error(type), { name: "KafkaJSProtocolError", type })

  it("node TLS codes map to TlsError reasons, with the host", () => {
    const tls = (code: string) =>
      securityError(
        Object.assign(new Error(`Connection error: ${code}`), { name: "KafkaJSConnectionError", code, broker: "b1.example.com:9093" }),
        "connect"
      )
    const untrusted = tls("UNABLE_TO_VERIFY_LEAF_SIGNATURE")
    assert.strictEqual(untrusted?._tag, "TlsError")
    if (untrusted?._tag === "TlsError") {
      assert.strictEqual(untrusted.reason, "UntrustedCertificate")
      assert.strictEqual(untrusted.host, "b1.example.com")
      assert.include(untrusted.message, "SKEIN_SSL_CA_FILE")
    }
    const mismatch = tls("ERR_TLS_CERT_ALTNAME_INVALID")
    assert.ok(mismatch?._tag === "TlsError" && mismatch.reason === "HostnameMismatch")
    assert.include(mismatch?.message ?? "", "b1.example.com")
    assert.ok(tls("SELF_SIGNED_CERT_IN_CHAIN")?._tag === "TlsError")
    assert.strictEqual(tls("ECONNREFUSED"), undefined)
  })

  it("SASL failures map to AuthenticationFailed naming the settings", () => {
    const sasl = Object.assign(new Error("SASL PLAIN authentication failed: bad"), { name: "KafkaJSSASLAuthenticationError" })
    const error = securityError(sasl, "connect", {}, { mechanism: "PLAIN", username: "key" })
    assert.strictEqual(error?._tag, "AuthenticationFailed")
    for (const name of ["SKEIN_SASL_USERNAME", "SKEIN_SASL_PASSWORD", "SKEIN_SASL_MECHANISM"]) {
      assert.include(error?.message ?? "", name)
    }
    assert.strictEqual(securityError(protocolError("UNSUPPORTED_SASL_MECHANISM"), "connect")?._tag, "AuthenticationFailed")
  })

  it("authorization failures name the resource and operation, also through retries", () => {
    const wrapped = Object.assign(new Error("retries exceeded"), {
      name: "KafkaJSNumberOfRetriesExceeded",
      cause: protocolError("GROUP_AUTHORIZATION_FAILED")
    })
    const group = securityError(wrapped, "consumer", { group: "app", groupOperation: "READ" })
    assert.ok(group?._tag === "AuthorizationFailed" && group.resource === "group" && group.operation === "READ")
    assert.include(group?.message ?? "", "--group app")
    const cluster = securityError(protocolError("CLUSTER_AUTHORIZATION_FAILED"), "send", { clusterOperation: "IDEMPOTENT_WRITE" })
    assert.include(cluster?.message ?? "", "IdempotentWrite")
    const topic = securityError(protocolError("TOPIC_AUTHORIZATION_FAILED"), "consumer", { topics: ["in"], topicOperation: "READ" })
    assert.ok(topic?._tag === "AuthorizationFailed" && topic.resource === "topic" && topic.names[0] === "in")
  })

  it("a security KafkaError is fatal and surfaces as its typed error, also inside DeliveryFailed", () => {
    const kafkaError = toKafkaError("commit", { topics: ["out"], topicOperation: "WRITE" })(
      protocolError("TOPIC_AUTHORIZATION_FAILED")
    )
    assert.ok(isFatal(kafkaError))
    const surfaced = surface(kafkaError)
    assert.strictEqual(surfaced._tag, "AuthorizationFailed")
    const delivery = new SkeinError.DeliveryFailed({ partition: 0, attempts: 1, cause: kafkaError })
    assert.strictEqual(surface(delivery)._tag, "AuthorizationFailed")
    if (SkeinError.isSkeinError(surfaced)) assert.strictEqual(SkeinError.category(surfaced), "setup")
    const plain = toKafkaError("commit")(protocolError("NOT_LEADER_FOR_PARTITION"))
    assert.ok(!isFatal(plain))
    assert.strictEqual(surface(plain), plain)
  })
})
