/**
 * The secured exactly-once cases on Kafka 3.9.2 (the compatibility run,
 * vitest.compat.config.ts): a broker started by this file with SASL_SSL
 * (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN), SSL with mutual TLS and
 * StandardAuthorizer ACLs, whatever broker the run's global setup provides.
 * The same cases as the default run's secured tests (test/secure/), each
 * read back read_committed: every record exactly once.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { KafkaBroker } from "../../src/testing/index.ts"
import { exactlyOnce, saslMechanismsUsed } from "../secure/exactlyOnce.ts"

layer(KafkaBroker.layerSecure({ version: "3.9.2" }), { excludeTestServices: true, timeout: "180 seconds" })(
  "a secured Kafka 3.9.2 broker",
  (it) => {
    it.effect("is Kafka 3.9.2", () =>
      Effect.map(KafkaBroker.SecureKafkaBroker, ({ version }) => assert.strictEqual(version, "3.9.2")))

    it.scoped("exactly-once copy over SASL_SSL SCRAM-SHA-512", () =>
      Effect.gen(function*() {
        const { security } = yield* KafkaBroker.SecureKafkaBroker
        const { lines, observed } = yield* exactlyOnce(security, { kind: "copy", mechanism: "SCRAM-SHA-512", n: 200 })
        for (const text of [...lines, observed]) assert.notInclude(text, security.user.password)
      }))

    it.scoped("a stateful count over SASL_SSL SCRAM-SHA-256, every client on SCRAM-SHA-256", () =>
      Effect.gen(function*() {
        const { security } = yield* KafkaBroker.SecureKafkaBroker
        const mechanisms: Array<string> = []
        yield* saslMechanismsUsed(mechanisms)
        yield* exactlyOnce(security, { kind: "count", mechanism: "SCRAM-SHA-256", n: 100 })
        assert.isAbove(mechanisms.length, 0, "the run's clients authenticated")
        assert.deepStrictEqual([...new Set(mechanisms)], ["SCRAM SHA256"])
      }))

    it.scoped("a stateful count over SASL_SSL PLAIN", () =>
      Effect.flatMap(KafkaBroker.SecureKafkaBroker, ({ security }) =>
        exactlyOnce(security, { kind: "count", mechanism: "PLAIN", n: 100 })))

    it.scoped("exactly-once copy over SSL with mutual TLS", () =>
      Effect.flatMap(KafkaBroker.SecureKafkaBroker, ({ security }) =>
        exactlyOnce(security, { kind: "copy", mechanism: "mTLS", n: 100 })))
  }
)
