/**
 * The security material of a secured local broker: a CA, a broker
 * certificate and a client certificate (for mutual TLS) made with `openssl`
 * per run, random passwords for SASL users, and the `server.properties`
 * settings of its SASL_SSL and SSL listeners (SCRAM-SHA-512, SCRAM-SHA-256,
 * PLAIN and OAUTHBEARER with unsecured tokens; `StandardAuthorizer` with the
 * admin as super user).
 *
 * @internal
 */
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Effect } from "effect"
import { KafkaBrokerError } from "../KafkaBrokerError.ts"
import * as Proc from "./process.ts"

/** A SASL user of the secured broker. */
export interface User {
  readonly username: string
  readonly password: string
}

/** Files and users of a secured cluster (JSON-friendly). */
export interface Material {
  readonly dir: string
  /** The CA that signed the broker's (and the client's) certificate, PEM. */
  readonly caFile: string
  /** A client certificate and key (PEM) for mutual TLS on the SSL listener: principal `User:CN=skein-client`. */
  readonly clientCertFile: string
  readonly clientKeyFile: string
  readonly keystoreFile: string
  readonly keystorePassword: string
  /** The super user (SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN). */
  readonly admin: User
  /** An ordinary user (SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN), allowed only what ACLs grant. */
  readonly user: User
}

/** The principal of the client certificate on the SSL (mutual TLS) listener. */
export const clientPrincipal = "User:CN=skein-client"

const secret = (): string => Crypto.randomBytes(18).toString("base64url")

const openssl = (dir: string, args: ReadonlyArray<string>) =>
  Proc.run({ command: "openssl", args, cwd: dir, timeoutMs: 60_000 }).pipe(
    Effect.filterOrFail(
      (result) => result.exitCode === 0,
      (result) =>
        new KafkaBrokerError({
          reason: "StartFailed",
          detail: `openssl ${args[0]} failed (exit ${result.exitCode}): ${result.output.slice(-2000)}`
        })
    )
  )

/**
 * Makes a CA, a broker certificate for 127.0.0.1/localhost in a PKCS12
 * keystore, a client certificate, and two users' passwords, under `dir`.
 */
export const generate = (dir: string): Effect.Effect<Material, KafkaBrokerError> =>
  Effect.gen(function*() {
    yield* Effect.try({
      try: () => Fs.mkdirSync(dir, { recursive: true, mode: 0o700 }),
      catch: (cause) => new KafkaBrokerError({ reason: "StartFailed", detail: `cannot create ${dir}`, cause })
    })
    const keystorePassword = secret()
    const run = (args: ReadonlyArray<string>) => openssl(dir, args)
    yield* run([
      "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
      "-subj", "/CN=skein-test-ca",
      "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"
    ])
    yield* Effect.sync(() =>
      Fs.writeFileSync(
        Path.join(dir, "broker.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n"
      )
    )
    yield* Effect.sync(() => Fs.writeFileSync(Path.join(dir, "client.ext"), "extendedKeyUsage=clientAuth\n"))
    const issue = (name: string, subject: string) =>
      Effect.zipRight(
        run(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", subject]),
        run([
          "x509", "-req", "-in", `${name}.csr`, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
          "-out", `${name}.pem`, "-days", "2", "-extfile", `${name}.ext`
        ])
      )
    yield* Effect.all([issue("broker", "/CN=localhost"), issue("client", "/CN=skein-client")], {
      concurrency: "unbounded"
    })
    yield* run([
      "pkcs12", "-export", "-in", "broker.pem", "-inkey", "broker.key", "-certfile", "ca.pem", "-name", "broker",
      "-out", "broker.p12", "-passout", `pass:${keystorePassword}`
    ])
    return {
      dir,
      caFile: Path.join(dir, "ca.pem"),
      clientCertFile: Path.join(dir, "client.pem"),
      clientKeyFile: Path.join(dir, "client.key"),
      keystoreFile: Path.join(dir, "broker.p12"),
      keystorePassword,
      admin: { username: "admin", password: secret() },
      user: { username: "skein", password: secret() }
    }
  })

/** The listener names of a secured node, besides CONTROLLER. */
export const listeners = {
  /** Inter-broker traffic only (PLAINTEXT on loopback; its principal ANONYMOUS is a super user). */
  internal: "INTERNAL",
  saslSsl: "SASL_SSL",
  ssl: "SSL"
} as const

const jaasPlain = (users: ReadonlyArray<User>): string =>
  "org.apache.kafka.common.security.plain.PlainLoginModule required " +
  users.map((u) => `user_${u.username}="${u.password}"`).join(" ") + ";"

/** The `server.properties` settings of the secured listeners (besides `listeners` & co). */
export const serverSettings = (material: Material): Record<string, string> => ({
  "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN,OAUTHBEARER",
  // Unsecured JWS tokens (alg "none", validated by Kafka's default unsecured handler): the
  // principal is the token's "sub". For tests of the OAUTHBEARER client path only.
  "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"admin\";",
  "listener.name.sasl_ssl.plain.sasl.jaas.config": jaasPlain([material.admin, material.user]),
  "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
  "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
  "ssl.keystore.type": "PKCS12",
  "ssl.keystore.location": material.keystoreFile,
  "ssl.keystore.password": material.keystorePassword,
  "ssl.key.password": material.keystorePassword,
  "ssl.truststore.type": "PEM",
  "ssl.truststore.location": material.caFile,
  "listener.name.ssl.ssl.client.auth": "required",
  "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
  "super.users": `User:${material.admin.username};User:ANONYMOUS`,
  "allow.everyone.if.no.acl.found": "false"
})

/**
 * An unsecured JWS token (`alg: none`) for `subject`, valid for an hour: what
 * the secured broker's OAUTHBEARER accepts. Real clusters validate signed
 * tokens from an identity provider instead.
 */
export const unsecuredToken = (subject: string, lifetimeSeconds = 3600): string => {
  const now = Math.floor(Date.now() / 1000)
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url")
  return `${part({ alg: "none" })}.${part({ sub: subject, iat: now, exp: now + lifetimeSeconds })}.`
}

/** The storage tool's `--add-scram` arguments: both users, both SCRAM mechanisms. */
export const scramArguments = (material: Material): ReadonlyArray<string> =>
  [material.admin, material.user].flatMap((u) =>
    ["SCRAM-SHA-512", "SCRAM-SHA-256"].flatMap((mechanism) => [
      "--add-scram",
      `${mechanism}=[name=${u.username},password=${u.password}]`
    ])
  )
