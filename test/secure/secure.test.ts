/**
 * Exactly-once over a secured broker (one per file: SASL_SSL with
 * SCRAM-SHA-512 and PLAIN, SSL with mutual TLS, StandardAuthorizer and ACLs),
 * and the typed failures a misconfigured run gets within seconds. No secret
 * appears in a log line, an error, the health snapshot or the metrics.
 */
import { assert, layer } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as tls from "node:tls"
import { Cause, Effect, Fiber, Redacted, Schema } from "effect"
import { SkeinError, Topic, Transformer } from "../../src/index.ts"
import { KafkaBroker, LocalKafka } from "../../src/testing/index.ts"
import { countOf } from "../helpers/counter.ts"
import {
  applicationAcls,
  createAcls,
  createTopics,
  deleteAcls,
  produce,
  readCommitted,
  runToFailure,
  startInstance,
  unique
} from "./helpers.ts"

const copyOf = (input: string, output: string) => {
  const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
  const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
  return Transformer.stateless({
    name: "copy",
    inputs: [In],
    transform: (record) => Effect.succeed({ emit: [Topic.record(Out, record.key, record.value)] })
  })
}

const records = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ key: `k${i % 10}`, value: `v${i}`, partition: i % 2 }))

/** The secrets of a run: none may appear in what it shows. */
const assertNoSecret = (texts: ReadonlyArray<string>, secrets: ReadonlyArray<string>) => {
  for (const secret of secrets) {
    for (const text of texts) assert.ok(!text.includes(secret), `a secret appears in: ${text.slice(0, 300)}`)
  }
}

layer(KafkaBroker.layerSecure(), { excludeTestServices: true, timeout: "180 seconds" })("a secured broker", (it) => {
  it.scoped("exactly-once copy over SASL_SSL SCRAM-SHA-512, read back by a secured read_committed reader", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      const output = unique("sec-out")
      const applicationId = unique("sec-copy")
      yield* createTopics(security, [{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const principal = `User:${security.user.username}`
      yield* createAcls(security, [
        ...applicationAcls({ principal, applicationId, inputs: [input], outputs: [output] }),
        // The reader of the test: the same user, its own groups.
        { principal, resource: "topic", name: output, operation: "READ" },
        { principal, resource: "group", name: "reader-", prefixed: true, operation: "READ" }
      ])
      yield* produce(security, input, records(200))
      const lines: Array<string> = []
      const instance = yield* startInstance(
        copyOf(input, output),
        { applicationId, ...KafkaBroker.connection(security, { mechanism: "SCRAM-SHA-512" }) },
        lines
      )
      const read = yield* readCommitted(security, output, 200)
      assert.deepStrictEqual(read.map((r) => r.value).sort(), records(200).map((r) => r.value).sort())
      const observed = yield* instance.observed
      assert.ok(observed.includes("skein_commits_total"))
      assertNoSecret([...lines, observed], [security.user.password, security.admin.password])
    }))

  it.scoped("a stateful count over SASL_SSL PLAIN: every count exactly once", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      const output = unique("sec-counts")
      const applicationId = unique("sec-count")
      yield* createTopics(security, [{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const principal = `User:${security.user.username}`
      yield* createAcls(security, [
        ...applicationAcls({ principal, applicationId, inputs: [input], outputs: [output] }),
        { principal, resource: "topic", name: output, operation: "READ" },
        { principal, resource: "group", name: "reader-", prefixed: true, operation: "READ" }
      ])
      yield* produce(security, input, records(100))
      const lines: Array<string> = []
      const instance = yield* startInstance(
        countOf(input, output),
        { applicationId, ...KafkaBroker.connection(security, { mechanism: "PLAIN" }) },
        lines
      )
      const read = yield* readCommitted(security, output, 100)
      const seen = read.map((r) => `${r.key}=${r.value}`).sort()
      const expected = Array.from({ length: 10 }, (_, k) => Array.from({ length: 10 }, (_, c) => `k${k}=${c + 1}`)).flat().sort()
      assert.deepStrictEqual(seen, expected)
      const observed = yield* instance.observed
      assertNoSecret([...lines, observed], [security.user.password, security.admin.password])
    }))

  it.scoped("exactly-once copy over SSL with mutual TLS (the certificate's principal)", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      const output = unique("sec-out")
      const applicationId = unique("sec-mtls")
      yield* createTopics(security, [{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      yield* createAcls(security, [
        ...applicationAcls({ principal: security.clientPrincipal, applicationId, inputs: [input], outputs: [output] }),
        { principal: `User:${security.user.username}`, resource: "topic", name: output, operation: "READ" },
        { principal: `User:${security.user.username}`, resource: "group", name: "reader-", prefixed: true, operation: "READ" }
      ])
      yield* produce(security, input, records(100))
      const lines: Array<string> = []
      yield* startInstance(
        copyOf(input, output),
        { applicationId, ...KafkaBroker.connection(security, { mechanism: "mTLS" }) },
        lines
      )
      const read = yield* readCommitted(security, output, 100)
      assert.deepStrictEqual(read.map((r) => r.value).sort(), records(100).map((r) => r.value).sort())
    }))

  it.scoped("exactly-once copy over SASL_SSL OAUTHBEARER: the token comes from an Effect, per connection", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      const output = unique("sec-out")
      const applicationId = unique("sec-oauth")
      yield* createTopics(security, [{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const principal = `User:${security.user.username}`
      yield* createAcls(security, [
        ...applicationAcls({ principal, applicationId, inputs: [input], outputs: [output] }),
        { principal, resource: "topic", name: output, operation: "READ" },
        { principal, resource: "group", name: "reader-", prefixed: true, operation: "READ" }
      ])
      yield* produce(security, input, records(50))
      let issued = 0
      const token = Effect.sync(() => {
        issued++
        return Redacted.make(LocalKafka.unsecuredToken(security.user.username))
      })
      const lines: Array<string> = []
      const { saslPassword: _password, saslUsername: _username, ...sasl } = KafkaBroker.connection(security, {
        mechanism: "SCRAM-SHA-512"
      })
      yield* startInstance(
        copyOf(input, output),
        { applicationId, ...sasl, saslMechanism: "OAUTHBEARER", oauthBearerToken: token },
        lines
      )
      const read = yield* readCommitted(security, output, 50)
      assert.deepStrictEqual(read.map((r) => r.value).sort(), records(50).map((r) => r.value).sort())
      assert.ok(issued > 0)
    }))

  it.scoped("a wrong password fails with AuthenticationFailed, naming the settings, not the password", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      yield* createTopics(security, [{ name: input, partitions: 1 }])
      const wrong = "not-the-password-" + unique("x")
      const lines: Array<string> = []
      const { error } = yield* runToFailure(copyOf(input, unique("sec-out")), {
        applicationId: unique("sec-auth"),
        ...KafkaBroker.connection(security, { mechanism: "SCRAM-SHA-512" }),
        saslPassword: Redacted.make(wrong)
      }, lines)
      assert.strictEqual(error._tag, "AuthenticationFailed")
      assert.ok(SkeinError.isSkeinError(error) && SkeinError.category(error) === "setup")
      assert.include(error.message, "SKEIN_SASL_PASSWORD")
      assert.include(error.message, "SKEIN_SASL_USERNAME")
      assertNoSecret(
        [...lines, error.message, String(error), JSON.stringify(error), Cause.pretty(Cause.fail(error))],
        [wrong, security.user.password]
      )
    }))

  it.scoped("a failing OAUTHBEARER token effect fails with AuthenticationFailed, without its text", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      yield* createTopics(security, [{ name: input, partitions: 1 }])
      const secret = "client-secret-" + unique("x")
      const lines: Array<string> = []
      const { saslPassword: _password, saslUsername: _username, ...sasl } = KafkaBroker.connection(security, {
        mechanism: "SCRAM-SHA-512"
      })
      const { error } = yield* runToFailure(copyOf(input, unique("sec-out")), {
        applicationId: unique("sec-oauth-fail"),
        ...sasl,
        saslMechanism: "OAUTHBEARER",
        oauthBearerToken: Effect.fail(new Error(`token endpoint refused client_secret=${secret}`))
      }, lines)
      assert.strictEqual(error._tag, "AuthenticationFailed")
      assert.include(error.message, "OAUTHBEARER")
      assertNoSecret([...lines, error.message, Cause.pretty(Cause.fail(error))], [secret])
    }))

  it.scoped("an untrusted CA fails with TlsError, naming SKEIN_SSL_CA_FILE", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      yield* createTopics(security, [{ name: input, partitions: 1 }])
      const lines: Array<string> = []
      const { sslCaFile: _trusted, ...untrusted } = KafkaBroker.connection(security, { mechanism: "SCRAM-SHA-512" })
      const { error } = yield* runToFailure(copyOf(input, unique("sec-out")), {
        applicationId: unique("sec-tls"),
        ...untrusted,
        // The client certificate is no CA of the broker's: the system's trust store does not know ours either.
        sslCaFile: security.clientCertFile
      }, lines)
      assert.strictEqual(error._tag, "TlsError")
      if (error._tag === "TlsError") {
        assert.strictEqual(error.reason, "UntrustedCertificate")
        assert.strictEqual(error.host, "127.0.0.1")
      }
      assert.include(error.message, "SKEIN_SSL_CA_FILE")
      assertNoSecret([...lines, error.message], [security.user.password])
    }))

  it.scoped("no Write ACL on the output topic fails with AuthorizationFailed (topic WRITE)", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      const output = unique("sec-out")
      const applicationId = unique("sec-nowrite")
      yield* createTopics(security, [{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const principal = `User:${security.user.username}`
      yield* createAcls(
        security,
        applicationAcls({ principal, applicationId, inputs: [input], outputs: [output], omit: ["output-write"] })
      )
      yield* produce(security, input, records(10).map((r) => ({ ...r, partition: 0 })))
      const lines: Array<string> = []
      const { error } = yield* runToFailure(copyOf(input, output), {
        applicationId,
        ...KafkaBroker.connection(security, { mechanism: "SCRAM-SHA-512" })
      }, lines)
      assert.strictEqual(error._tag, "AuthorizationFailed", String(error))
      if (error._tag === "AuthorizationFailed") {
        assert.strictEqual(error.resource, "topic")
        assert.strictEqual(error.operation, "WRITE")
        assert.deepStrictEqual(error.names, [output])
      }
      assert.include(error.message, output)
      assertNoSecret([...lines, error.message], [security.user.password])
    }))

  it.scoped("no Create ACL for the changelog fails with AuthorizationFailed (topic CREATE)", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      const output = unique("sec-out")
      const applicationId = unique("sec-nocreate")
      yield* createTopics(security, [{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const principal = `User:${security.user.username}`
      yield* createAcls(
        security,
        applicationAcls({ principal, applicationId, inputs: [input], outputs: [output], omit: ["changelog-create"] })
      )
      const lines: Array<string> = []
      const { error } = yield* runToFailure(countOf(input, output), {
        applicationId,
        ...KafkaBroker.connection(security, { mechanism: "SCRAM-SHA-512" })
      }, lines)
      assert.strictEqual(error._tag, "AuthorizationFailed", String(error))
      if (error._tag === "AuthorizationFailed") {
        assert.strictEqual(error.resource, "topic")
        assert.strictEqual(error.operation, "CREATE")
      }
      assert.include(error.message, `${applicationId}-count-changelog`)
      assertNoSecret([...lines, error.message], [security.user.password])
    }))

  it.scoped("no transactional-id ACL fails with AuthorizationFailed (transactional-id)", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      const output = unique("sec-out")
      const applicationId = unique("sec-notxn")
      yield* createTopics(security, [{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const principal = `User:${security.user.username}`
      yield* createAcls(
        security,
        applicationAcls({ principal, applicationId, inputs: [input], outputs: [output], omit: ["transactional-id"] })
      )
      const lines: Array<string> = []
      const { error } = yield* runToFailure(copyOf(input, output), {
        applicationId,
        ...KafkaBroker.connection(security, { mechanism: "SCRAM-SHA-512" })
      }, lines)
      assert.strictEqual(error._tag, "AuthorizationFailed", String(error))
      if (error._tag === "AuthorizationFailed") {
        assert.strictEqual(error.resource, "transactional-id")
        assert.deepStrictEqual(error.names, [`${applicationId}-0`])
      }
      assert.include(error.message, `${applicationId}-0`)
      assertNoSecret([...lines, error.message], [security.user.password])
    }))

  it.scoped("no Read ACL on the group fails with AuthorizationFailed (group)", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      const output = unique("sec-out")
      const applicationId = unique("sec-nogroup")
      yield* createTopics(security, [{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const principal = `User:${security.user.username}`
      yield* createAcls(
        security,
        applicationAcls({ principal, applicationId, inputs: [input], outputs: [output] }).filter((acl) =>
          acl.resource !== "group"
        )
      )
      const lines: Array<string> = []
      const { error } = yield* runToFailure(copyOf(input, output), {
        applicationId,
        ...KafkaBroker.connection(security, { mechanism: "SCRAM-SHA-512" })
      }, lines)
      assert.strictEqual(error._tag, "AuthorizationFailed", String(error))
      if (error._tag === "AuthorizationFailed") {
        assert.strictEqual(error.resource, "group")
        assert.deepStrictEqual(error.names, [applicationId])
      }
    }))

  // The restore reader is a consumer in a group of its own (`<applicationId>-restore-<id>`): Read on
  // the application's group alone, not its prefix, lets the run start but not restore. Before the
  // fix the reader's failed join left every restore waiting for it, and the run hung.
  it.scoped("Read on the application's group but not its prefix: a restore fails with AuthorizationFailed (group), naming the restore group", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      const output = unique("sec-counts")
      const applicationId = unique("sec-norestore")
      yield* createTopics(security, [{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const principal = `User:${security.user.username}`
      const acls = applicationAcls({ principal, applicationId, inputs: [input], outputs: [output] })
      yield* createAcls(security, [
        ...acls,
        { principal, resource: "topic", name: output, operation: "READ" },
        { principal, resource: "group", name: "reader-", prefixed: true, operation: "READ" }
      ])
      yield* produce(security, input, records(20))
      const connection = KafkaBroker.connection(security, { mechanism: "SCRAM-SHA-512" })
      // A first run fills the changelog.
      const first = yield* startInstance(countOf(input, output), { applicationId, ...connection }, [])
      yield* readCommitted(security, output, 20)
      yield* Fiber.interrupt(first.fiber)
      // Now Read on the application's group only; a fresh store folder must restore in full.
      const prefixed = acls.filter((acl) => acl.resource === "group")
      yield* deleteAcls(security, prefixed)
      yield* createAcls(security, prefixed.map((acl) => ({ ...acl, prefixed: false })))
      const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-norestore-"))
      const lines: Array<string> = []
      const { error } = yield* runToFailure(countOf(input, output), { applicationId, stateDir, ...connection }, lines)
      assert.strictEqual(error._tag, "AuthorizationFailed", String(error))
      if (error._tag === "AuthorizationFailed") {
        assert.strictEqual(error.resource, "group")
        assert.strictEqual(error.names.length, 1, String(error.names))
        assert.ok(error.names[0]!.startsWith(`${applicationId}-restore-`), String(error.names))
        // The fix names the prefix every restore group shares, not this run's random group.
        assert.include(error.message, `--group ${applicationId} --resource-pattern-type prefixed`)
      }
      assertNoSecret([...lines, error.message], [security.user.password])
    }))

  it.scoped("no ACL on the input topic fails with AuthorizationFailed (topic)", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      const output = unique("sec-out")
      const applicationId = unique("sec-noread")
      yield* createTopics(security, [{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const principal = `User:${security.user.username}`
      yield* createAcls(
        security,
        applicationAcls({ principal, applicationId, inputs: [], outputs: [output] })
      )
      const lines: Array<string> = []
      const { error } = yield* runToFailure(copyOf(input, output), {
        applicationId,
        ...KafkaBroker.connection(security, { mechanism: "SCRAM-SHA-512" })
      }, lines)
      assert.strictEqual(error._tag, "AuthorizationFailed", String(error))
      if (error._tag === "AuthorizationFailed") {
        assert.strictEqual(error.resource, "topic")
        assert.deepStrictEqual(error.names, [input])
      }
    }))

  it.scoped("Describe but no Read on the input topic fails with AuthorizationFailed (topic READ)", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      const output = unique("sec-out")
      const applicationId = unique("sec-describe")
      yield* createTopics(security, [{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const principal = `User:${security.user.username}`
      yield* createAcls(security, [
        ...applicationAcls({ principal, applicationId, inputs: [], outputs: [output] }),
        { principal, resource: "topic", name: input, operation: "DESCRIBE" }
      ])
      const lines: Array<string> = []
      const { error } = yield* runToFailure(copyOf(input, output), {
        applicationId,
        ...KafkaBroker.connection(security, { mechanism: "SCRAM-SHA-512" })
      }, lines)
      assert.strictEqual(error._tag, "AuthorizationFailed", `${error._tag}: ${String(error)}`)
      if (error._tag === "AuthorizationFailed") {
        assert.strictEqual(error.resource, "topic")
        assert.strictEqual(error.operation, "READ")
        assert.include(error.names, input)
      }
    }))

  it.scoped("SSL without the client certificate mutual TLS requires fails with TlsError", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const input = unique("sec-in")
      yield* createTopics(security, [{ name: input, partitions: 1 }])
      const lines: Array<string> = []
      const { sslCertFile: _cert, sslKeyFile: _key, ...noCertificate } = KafkaBroker.connection(security, { mechanism: "mTLS" })
      const { error } = yield* runToFailure(copyOf(input, unique("sec-out")), {
        applicationId: unique("sec-nocert"),
        ...noCertificate
      }, lines)
      assert.strictEqual(error._tag, "TlsError", `${error._tag}: ${String(error)}`)
      if (error._tag === "TlsError") assert.strictEqual(error.reason, "ClientCertificateRejected")
      assert.include(error.message, "SKEIN_SSL_CERT_FILE")
    }))

  it.scoped("a certificate for another host fails with TlsError (HostnameMismatch) naming the host", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      // A TLS listener whose certificate, signed by the trusted CA, names another host.
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-mismatch-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      const caKey = path.join(path.dirname(security.caFile), "ca.key")
      const openssl = (args: ReadonlyArray<string>) => execFileSync("openssl", args, { cwd: dir, stdio: "ignore" })
      fs.writeFileSync(path.join(dir, "ext"), "subjectAltName=DNS:kafka.elsewhere.example\n")
      openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-out", "c.csr", "-subj", "/CN=kafka.elsewhere.example"])
      openssl([
        "x509", "-req", "-in", "c.csr", "-CA", security.caFile, "-CAkey", caKey, "-CAcreateserial",
        "-CAserial", path.join(dir, "ca.srl"), "-out", "c.pem", "-days", "1", "-extfile", "ext"
      ])
      const server = tls.createServer({
        key: fs.readFileSync(path.join(dir, "k.pem")),
        cert: fs.readFileSync(path.join(dir, "c.pem"))
      }, (socket) => socket.destroy())
      server.on("tlsClientError", () => undefined)
      const port = yield* Effect.async<number>((resume) => {
        server.listen(0, "127.0.0.1", () => {
          const address = server.address()
          resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : 0))
        })
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => server.close()))
      const lines: Array<string> = []
      const { error } = yield* runToFailure(copyOf(unique("sec-in"), unique("sec-out")), {
        applicationId: unique("sec-host"),
        ...KafkaBroker.connection(security, { mechanism: "SCRAM-SHA-512" }),
        brokers: [`127.0.0.1:${port}`]
      }, lines)
      assert.strictEqual(error._tag, "TlsError", `${error._tag}: ${String(error)}`)
      if (error._tag === "TlsError") {
        assert.strictEqual(error.reason, "HostnameMismatch")
        assert.strictEqual(error.host, "127.0.0.1")
      }
      assert.include(error.message, "127.0.0.1")
    }))
})

