/**
 * Exactly-once over SASL_SSL with SCRAM-SHA-256 (test/secure/secure.test.ts
 * covers SCRAM-SHA-512, PLAIN, OAUTHBEARER and mutual TLS): a stateful count
 * whose every client authenticated with SCRAM-SHA-256, as kafkajs reports it,
 * and whose counts read back are each exactly once. The ordinary user has
 * credentials for both SCRAM mechanisms, so a run that quietly used
 * SCRAM-SHA-512 would count right too: the mechanism is checked on its own.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { KafkaBroker } from "../../src/testing/index.ts"
import { exactlyOnce, saslMechanismsUsed } from "./exactlyOnce.ts"

layer(KafkaBroker.layerSecure(), { excludeTestServices: true, timeout: "180 seconds" })("a secured broker", (it) => {
  it.scoped("a stateful count over SASL_SSL SCRAM-SHA-256: every count exactly once, every client on SCRAM-SHA-256", () =>
    Effect.gen(function*() {
      const { security } = yield* KafkaBroker.SecureKafkaBroker
      const mechanisms: Array<string> = []
      yield* saslMechanismsUsed(mechanisms)
      const { lines, observed } = yield* exactlyOnce(security, { kind: "count", mechanism: "SCRAM-SHA-256", n: 100 })
      const used = [...new Set(mechanisms)]
      yield* Effect.log(`${mechanisms.length} SASL authentications of the run's clients: ${used.join(", ")}`)
      assert.isAbove(mechanisms.length, 0, "the run's clients authenticated")
      assert.deepStrictEqual(used, ["SCRAM SHA256"], "every client of the run authenticated with SCRAM-SHA-256")
      for (const text of [...lines, observed]) assert.notInclude(text, security.user.password)
    }))
})
