/**
 * The transformer of the dead-letters example (examples/dead-letters.ts), on
 * its own so that a test can run it with `TestDriver`
 * (test/testing/dead-letters-example.test.ts): a balance per account, a flaky
 * ledger retried with backoff, payments that still fail dead-lettered.
 */
import { Effect, Option, Schedule, Schema } from "effect"
import { ErrorRule, Topic, Transformer } from "../src/index.ts"

export const Payment = Schema.Struct({ account: Schema.String, amount: Schema.Number })

/** The ledger service did not answer; worth retrying. */
export class LedgerUnavailable extends Schema.TaggedError<LedgerUnavailable>()("LedgerUnavailable", {
  account: Schema.String
}) {}

/** The example's topics and transformer over topics named `payments-{run}` and `balances-{run}`. */
export const makeBalance = (run: string) => {
  const Payments = Topic.make({ name: `payments-${run}`, key: Schema.String, value: Topic.json(Payment) })
  const Balances = Topic.make({ name: `balances-${run}`, key: Schema.String, value: Topic.json(Schema.Number) })

  /** A stand-in for a remote ledger: "flaky" fails twice per payment, "down" always fails. */
  const attempts = new Map<string, number>()
  const recordInLedger = (paymentId: string, account: string) =>
    Effect.suspend(() => {
      const attempt = (attempts.get(paymentId) ?? 0) + 1
      attempts.set(paymentId, attempt)
      const fails = account === "down" || (account === "flaky" && attempt <= 2)
      return fails ? Effect.fail(new LedgerUnavailable({ account })) : Effect.void
    })

  /** Keeps a balance per account; the balance is changelog-backed state. */
  const Balance = Transformer.make({
    name: "balance",
    inputs: [Payments],
    state: Schema.Number,
    stateKey: (payment) => payment.value.account,
    transform: (payment, balance) =>
      Effect.gen(function*() {
        yield* recordInLedger(`${payment.partition}-${payment.offset}`, payment.value.account)
        const next = Option.getOrElse(balance, () => 0) + payment.value.amount
        return {
          emit: [Topic.record(Balances, payment.value.account, next)],
          state: Transformer.set(next)
        }
      }),
    rules: [
      // Retried up to 3 times with exponential backoff, then dead-lettered with the error.
      ErrorRule.tagged("LedgerUnavailable", {
        retry: Schedule.exponential("50 millis").pipe(Schedule.intersect(Schedule.recurs(3))),
        then: "dlq"
      })
    ]
  })
  return { Payments, Balances, Balance, attempts }
}

/** The example's input: good payments, poison ones, a flaky account and one whose ledger is down. */
export const payments: ReadonlyArray<{ readonly key: string; readonly value: string }> = [
  { key: "p1", value: JSON.stringify({ account: "alice", amount: 100 }) },
  { key: "p2", value: JSON.stringify({ account: "bob", amount: 40 }) },
  { key: "p3", value: "{ not json" }, // poison: fails the value Schema
  { key: "p4", value: JSON.stringify({ account: "flaky", amount: 7 }) }, // succeeds on the 3rd attempt
  { key: "p5", value: JSON.stringify({ account: "alice", amount: -30 }) },
  { key: "p6", value: JSON.stringify({ account: "down", amount: 5 }) }, // retried, then dead-lettered
  { key: "p7", value: JSON.stringify({ account: "bob", amount: "a lot" }) } // poison: amount is not a number
]
