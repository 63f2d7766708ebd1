/**
 * The dead-letters example's transformer (examples/balance.ts) on TestDriver: the same
 * balances and dead letters as `npm run example:dead-letters` prints against a broker
 * (test/example.test.ts), with the retry backoff driven by TestClock instead of waiting.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, TestClock } from "effect"
import { makeBalance, payments } from "../../examples/balance.ts"
import { TestDriver } from "../../src/testing/index.ts"

describe("dead-letters example on TestDriver", () => {
  it.scoped("exact balances, the flaky payment retried to success, poison and failing payments dead-lettered", () =>
    Effect.gen(function*() {
      const { Balance, Balances, Payments, attempts } = makeBalance("test")
      const driver = yield* TestDriver.make(Balance, { deadLetterTopic: "payments-dead-letters" })
      for (const payment of payments) {
        const piped = yield* Effect.fork(driver.pipeRaw(Payments, { key: Buffer.from(payment.key), value: Buffer.from(payment.value) }))
        // The retry rule's backoff (50, 100, 200 ms) runs on the TestClock: advance it instead of waiting.
        yield* TestClock.adjust("1 second")
        yield* Fiber.join(piped)
      }
      const balances = yield* driver.outputs(Balances)
      assert.deepStrictEqual(balances.map((r) => [r.key, r.value]), [["alice", 100], ["bob", 40], ["flaky", 7], ["alice", 70]])
      assert.deepStrictEqual(yield* driver.state("alice"), Option.some(70))
      assert.deepStrictEqual(yield* driver.state("down"), Option.none())
      assert.strictEqual(attempts.get("0-3"), 3, "the flaky account's payment succeeded on its third attempt")
      assert.strictEqual(attempts.get("0-5"), 4, "the down account's payment: the first attempt and 3 retries")
      const letters = yield* driver.deadLetters
      const described = letters.map((r) => `${r.key?.toString()}: ${r.headers.find(([n]) => n === "skein.error")?.[1].toString().split("\n")[0]}`)
      assert.strictEqual(described.length, 3)
      assert.match(described[0]!, /^p3: Cannot decode the value/)
      assert.match(described[1]!, /^p6: LedgerUnavailable/)
      assert.match(described[2]!, /^p7: Cannot decode the value/)
      // Byte for byte: a poison payment's value is the one piped.
      assert.strictEqual(letters[0]!.value?.toString(), "{ not json")
    }))
})
