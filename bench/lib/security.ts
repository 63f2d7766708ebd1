/**
 * Connection security of the benchmark: the same SKEIN_* environment settings as Skein's
 * `SkeinConfig` (README, "Connecting to your cluster"), turned into each contender's client
 * options: kafkajs `ssl`/`sasl`, Skein's `SkeinConfig` fields, Java client properties (Kafka
 * Streams, Kafka's perf tools) and librdkafka properties (Quix). The password is `Redacted`:
 * only the client options and the 0600 config files written for the JVM and Python peers hold it.
 */
import { createPrivateKey } from "node:crypto"
import { readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Redacted } from "effect"
import type { KafkaConfig } from "kafkajs"
import type { SkeinConfig } from "../../src/index.ts"

export type Protocol = "PLAINTEXT" | "SSL" | "SASL_PLAINTEXT" | "SASL_SSL"
/** The mechanisms the benchmark supports (OAUTHBEARER needs a token provider in code). */
export type Mechanism = "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512"

/** Connection security as read from SKEIN_* (validated). */
export interface BenchSecurity {
  readonly protocol: Protocol
  /** SASL protocols only: the mechanism and its credentials. */
  readonly sasl?: { readonly mechanism: Mechanism; readonly username: string; readonly password: Redacted.Redacted }
  readonly caFile?: string
  readonly certFile?: string
  readonly keyFile?: string
  readonly rejectUnauthorized: boolean
}

export const plaintext: BenchSecurity = { protocol: "PLAINTEXT", rejectUnauthorized: true }

const PROTOCOLS: ReadonlyArray<Protocol> = ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
const MECHANISMS: ReadonlyArray<string> = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

const isTls = (p: Protocol): boolean => p === "SSL" || p === "SASL_SSL"
const isSasl = (p: Protocol): boolean => p === "SASL_PLAINTEXT" || p === "SASL_SSL"

/** `true`/`false` as Effect's `Config.boolean` (SkeinConfig) reads them. */
const parseBoolean = (name: string, value: string): boolean => {
  const v = value.trim().toLowerCase()
  if (["true", "yes", "on", "1", "y"].includes(v)) return true
  if (["false", "no", "off", "0", "n"].includes(v)) return false
  throw new Error(`${name} must be true or false, got ${value}`)
}

/**
 * Reads and checks SKEIN_SECURITY_PROTOCOL, SKEIN_SASL_*, SKEIN_SSL_* the way Skein does.
 * Throws an Error naming the setting; OAUTHBEARER is rejected (no token provider from the environment).
 */
export const securityFromEnv = (env: NodeJS.ProcessEnv = process.env): BenchSecurity => {
  const get = (name: string): string | undefined => {
    const v = env[name]
    return v === undefined || v.trim() === "" ? undefined : v
  }
  const protocolText = get("SKEIN_SECURITY_PROTOCOL")?.trim() ?? "PLAINTEXT"
  const protocol = PROTOCOLS.find((p) => p === protocolText)
  if (protocol === undefined) {
    throw new Error(`SKEIN_SECURITY_PROTOCOL must be one of ${PROTOCOLS.join(", ")}, got ${protocolText}`)
  }
  const mechanism = get("SKEIN_SASL_MECHANISM")?.trim()
  const caFile = get("SKEIN_SSL_CA_FILE")
  const certFile = get("SKEIN_SSL_CERT_FILE")
  const keyFile = get("SKEIN_SSL_KEY_FILE")
  const reject = get("SKEIN_SSL_REJECT_UNAUTHORIZED")
  const rejectUnauthorized = reject === undefined ? true : parseBoolean("SKEIN_SSL_REJECT_UNAUTHORIZED", reject)
  if (!isSasl(protocol) && mechanism !== undefined) {
    throw new Error(`SKEIN_SASL_MECHANISM is ${mechanism} but SKEIN_SECURITY_PROTOCOL is ${protocol}`)
  }
  if (!isTls(protocol) && (caFile ?? certFile ?? keyFile) !== undefined) {
    throw new Error(`SKEIN_SSL_* files are set but SKEIN_SECURITY_PROTOCOL is ${protocol}`)
  }
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new Error("mutual TLS needs both SKEIN_SSL_CERT_FILE and SKEIN_SSL_KEY_FILE (or neither)")
  }
  const files = {
    ...(caFile === undefined ? {} : { caFile }),
    ...(certFile === undefined ? {} : { certFile }),
    ...(keyFile === undefined ? {} : { keyFile }),
  }
  for (const [setting, file] of [["SKEIN_SSL_CA_FILE", caFile], ["SKEIN_SSL_CERT_FILE", certFile], ["SKEIN_SSL_KEY_FILE", keyFile]] as const) {
    if (file !== undefined) pem(file, setting)
  }
  if (!isSasl(protocol)) return { protocol, rejectUnauthorized, ...files }
  if (mechanism === "OAUTHBEARER") {
    throw new Error("SKEIN_SASL_MECHANISM=OAUTHBEARER needs a token provider in code; the benchmark supports PLAIN/SCRAM/mTLS")
  }
  if (mechanism === undefined || !MECHANISMS.includes(mechanism)) {
    throw new Error(`SKEIN_SECURITY_PROTOCOL is ${protocol}: set SKEIN_SASL_MECHANISM to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512` +
      (mechanism === undefined ? "" : ` (got ${mechanism})`))
  }
  const username = get("SKEIN_SASL_USERNAME")
  const password = env["SKEIN_SASL_PASSWORD"]
  if (username === undefined || password === undefined || password === "") {
    throw new Error(`SKEIN_SASL_MECHANISM is ${mechanism} but ${username === undefined ? "SKEIN_SASL_USERNAME" : "SKEIN_SASL_PASSWORD"} is not set`)
  }
  return {
    protocol,
    sasl: { mechanism: mechanism as Mechanism, username, password: Redacted.make(password) },
    rejectUnauthorized,
    ...files,
  }
}

/** One line for logs (`detail`: the user and files) and the report, never the password. */
export const describeSecurity = (s: BenchSecurity, options: { readonly detail: boolean } = { detail: true }): string =>
  [
    s.protocol,
    ...(s.sasl === undefined ? [] : [options.detail ? `${s.sasl.mechanism} as ${s.sasl.username}` : s.sasl.mechanism]),
    ...(options.detail && s.caFile !== undefined ? [`CA ${s.caFile}`] : []),
    ...(s.certFile !== undefined ? [options.detail ? `client certificate ${s.certFile}` : "client certificate"] : []),
    ...(isTls(s.protocol) && !s.rejectUnauthorized ? ["certificates NOT verified"] : []),
  ].join(", ")

const pem = (file: string, setting: string): string => {
  try {
    return readFileSync(file, "utf8")
  } catch (e) {
    const code = typeof e === "object" && e !== null && "code" in e ? String(e.code) : "unreadable"
    throw new Error(`${setting} is ${file}, which cannot be read (${code})`)
  }
}

/** The kafkajs `ssl` and `sasl` options (harness clients, the kafkajs-count app). */
export const kafkajsSecurity = (s: BenchSecurity): Pick<KafkaConfig, "ssl" | "sasl"> => {
  const ssl: KafkaConfig["ssl"] = isTls(s.protocol)
    ? {
      rejectUnauthorized: s.rejectUnauthorized,
      ...(s.caFile === undefined ? {} : { ca: [pem(s.caFile, "SKEIN_SSL_CA_FILE")] }),
      ...(s.certFile === undefined ? {} : { cert: pem(s.certFile, "SKEIN_SSL_CERT_FILE") }),
      ...(s.keyFile === undefined ? {} : { key: pem(s.keyFile, "SKEIN_SSL_KEY_FILE") }),
    }
    : false
  if (s.sasl === undefined) return { ssl }
  const credentials = { username: s.sasl.username, password: Redacted.value(s.sasl.password) }
  const m = s.sasl.mechanism
  return {
    ssl,
    sasl: m === "PLAIN"
      ? { mechanism: "plain", ...credentials }
      : m === "SCRAM-SHA-256"
      ? { mechanism: "scram-sha-256", ...credentials }
      : { mechanism: "scram-sha-512", ...credentials },
  }
}

/** The same settings as `SkeinConfig` fields (skein-count), so Skein's own client boundary builds the connection. */
export const skeinSecurity = (s: BenchSecurity): Partial<SkeinConfig.SkeinConfig> => ({
  securityProtocol: s.protocol,
  sslRejectUnauthorized: s.rejectUnauthorized,
  ...(s.sasl === undefined
    ? {}
    : { saslMechanism: s.sasl.mechanism, saslUsername: s.sasl.username, saslPassword: s.sasl.password }),
  ...(s.caFile === undefined ? {} : { sslCaFile: s.caFile }),
  ...(s.certFile === undefined ? {} : { sslCertFile: s.certFile }),
  ...(s.keyFile === undefined ? {} : { sslKeyFile: s.keyFile }),
})

/** A JAAS quoted string. */
const jaasQuote = (v: string): string => `"${v.replace(/\\/g, "\\\\").replace(/"/g, "\\\"")}"`

/**
 * Java client properties (Kafka Streams, ProducerPerformance, ConsumerPerformance, EndToEndLatency).
 * The client key goes inline (`ssl.keystore.key`, PKCS#8), as Kafka's PEM keystore from a file
 * needs an encrypted key. `SKEIN_SSL_REJECT_UNAUTHORIZED=false` only turns off hostname
 * verification here: the JVM has no "trust any certificate" setting.
 */
export const javaProperties = (s: BenchSecurity): Record<string, string> => {
  if (s.protocol === "PLAINTEXT") return {}
  const p: Record<string, string> = { "security.protocol": s.protocol }
  if (s.sasl !== undefined) {
    const module = s.sasl.mechanism === "PLAIN"
      ? "org.apache.kafka.common.security.plain.PlainLoginModule"
      : "org.apache.kafka.common.security.scram.ScramLoginModule"
    p["sasl.mechanism"] = s.sasl.mechanism
    p["sasl.jaas.config"] = `${module} required username=${jaasQuote(s.sasl.username)} password=${
      jaasQuote(Redacted.value(s.sasl.password))
    };`
  }
  if (isTls(s.protocol)) {
    p["ssl.endpoint.identification.algorithm"] = s.rejectUnauthorized ? "https" : ""
    if (s.caFile !== undefined) {
      p["ssl.truststore.type"] = "PEM"
      p["ssl.truststore.location"] = s.caFile
    }
    if (s.certFile !== undefined && s.keyFile !== undefined) {
      p["ssl.keystore.type"] = "PEM"
      p["ssl.keystore.certificate.chain"] = pem(s.certFile, "SKEIN_SSL_CERT_FILE")
      p["ssl.keystore.key"] = createPrivateKey(pem(s.keyFile, "SKEIN_SSL_KEY_FILE"))
        .export({ type: "pkcs8", format: "pem" })
        .toString()
    }
  }
  return p
}

/** librdkafka properties (Quix Streams' `ConnectionConfig.from_librdkafka_dict`). */
export const librdkafkaProperties = (s: BenchSecurity): Record<string, string> => {
  if (s.protocol === "PLAINTEXT") return {}
  const p: Record<string, string> = { "security.protocol": s.protocol.toLowerCase() }
  if (s.sasl !== undefined) {
    p["sasl.mechanisms"] = s.sasl.mechanism
    p["sasl.username"] = s.sasl.username
    p["sasl.password"] = Redacted.value(s.sasl.password)
  }
  if (isTls(s.protocol)) {
    p["enable.ssl.certificate.verification"] = String(s.rejectUnauthorized)
    if (!s.rejectUnauthorized) p["ssl.endpoint.identification.algorithm"] = "none"
    if (s.caFile !== undefined) p["ssl.ca.location"] = s.caFile
    if (s.certFile !== undefined) p["ssl.certificate.location"] = s.certFile
    if (s.keyFile !== undefined) p["ssl.key.location"] = s.keyFile
  }
  return p
}

/** A `java.util.Properties` line's escaping (ISO-8859-1 file: other characters as \uXXXX). */
const propertiesEscape = (v: string, key: boolean): string => {
  let out = ""
  for (let i = 0; i < v.length; i++) {
    const ch = v.charAt(i)
    const c = v.charCodeAt(i)
    if (ch === "\\") out += "\\\\"
    else if (ch === "\n") out += "\\n"
    else if (ch === "\r") out += "\\r"
    else if (ch === "\t") out += "\\t"
    else if (key && "=: #!".includes(ch)) out += `\\${ch}`
    else if (c < 0x20 || c > 0x7e) out += `\\u${c.toString(16).padStart(4, "0")}`
    else out += ch
  }
  return !key && out.startsWith(" ") ? `\\${out}` : out
}

/** Where the JVM and Python peers find their connection settings (absent for PLAINTEXT). */
export interface ClientConfigFiles {
  /** Java client properties (`--producer.config`, `--command-config`, the Streams peer's `--client-config`). */
  readonly java: string
  /** JSON object of librdkafka properties (the Quix peer's `--client-config`). */
  readonly librdkafka: string
}

/** Writes the peers' config files into `dir` (mode 0600: they hold the password); PLAINTEXT: none. */
export const writeClientConfigFiles = (s: BenchSecurity, dir: string): ClientConfigFiles | undefined => {
  if (s.protocol === "PLAINTEXT") return undefined
  const java = join(dir, "client.properties")
  const librdkafka = join(dir, "client-librdkafka.json")
  const lines = Object.entries(javaProperties(s)).map(([k, v]) => `${propertiesEscape(k, true)}=${propertiesEscape(v, false)}`)
  writeFileSync(java, `# written by bench/lib/security.ts from SKEIN_* (${describeSecurity(s)})\n${lines.join("\n")}\n`, { mode: 0o600 })
  writeFileSync(librdkafka, `${JSON.stringify(librdkafkaProperties(s), null, 2)}\n`, { mode: 0o600 })
  return { java, librdkafka }
}

/** Deletes the files of `writeClientConfigFiles`. */
export const removeClientConfigFiles = (files: ClientConfigFiles): void => {
  for (const f of [files.java, files.librdkafka]) rmSync(f, { force: true })
}
