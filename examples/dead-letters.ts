/**
 * A handler with a dead letter topic and a retry rule, end to end: starts a
 * Kafka broker (or uses KAFKA_BROKERS), produces payments (some malformed,
 * some for an account whose ledger is flaky, one for an account whose ledger
 * is down), and keeps a balance per account exactly once.
 *
 * - A malformed payment (its value fails the Schema) never reaches the
 *   handler: it goes to the dead letter topic with the decode error.
 * - `LedgerUnavailable` is retried with backoff (each attempt sees the state
 *   as it was before the failed one); a payment still failing after the
 *   retries goes to the dead letter topic with its error.
 *
 *   npm run example:dead-letters
 */
import { Effect, Fiber, Layer, Option, Schedule, Schema } from "effect"
import kafkajs from "kafkajs"
import { ErrorRule, Runner, SkeinConfig, Topic, Transformer } from "../src/index.ts"
import { KafkaBroker } from "../src/testing/index.ts"

const run = `${Date.now()}`

const Payment = Schema.Struct({ account: Schema.String, amount: Schema.Number })
const Payments = Topic.make({ name: `payments-${run}`, key: Schema.String, value: Topic.json(Payment) })
const Balances = Topic.make({ name: `balances-${run}`, key: Schema.String, value: Topic.json(Schema.Number) })
const deadLetters = `payments-dead-letters-${run}`

/** The ledger service did not answer; worth retrying. */
class LedgerUnavailable extends Schema.TaggedError<LedgerUnavailable>()("LedgerUnavailable", {
  account: Schema.String
}) {}

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
export const Balance = Transformer.make({
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

const payments: ReadonlyArray<{ readonly key: string; readonly value: string }> = [
  { key: "p1", value: JSON.stringify({ account: "alice", amount: 100 }) },
  { key: "p2", value: JSON.stringify({ account: "bob", amount: 40 }) },
  { key: "p3", value: "{ not json" }, // poison: fails the value Schema
  { key: "p4", value: JSON.stringify({ account: "flaky", amount: 7 }) }, // succeeds on the 3rd attempt
  { key: "p5", value: JSON.stringify({ account: "alice", amount: -30 }) },
  { key: "p6", value: JSON.stringify({ account: "down", amount: 5 }) }, // retried, then dead-lettered
  { key: "p7", value: JSON.stringify({ account: "bob", amount: "a lot" }) } // poison: amount is not a number
]

const program = Effect.gen(function*() {
  const { brokers, kind } = yield* KafkaBroker.KafkaBroker
  yield* Effect.log(`Kafka (${kind}) at ${brokers.join(",")}, run ${run}`)
  const kafka = new kafkajs.Kafka({ brokers: [...brokers], logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  yield* Effect.promise(() => admin.connect())
  yield* Effect.promise(() =>
    admin.createTopics({
      waitForLeaders: true,
      topics: [Payments.name, Balances.name, deadLetters].map((topic) => ({ topic, numPartitions: 1 }))
    })
  )
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  yield* Effect.promise(() => producer.connect())
  yield* Effect.promise(() => producer.send({ topic: Payments.name, acks: -1, messages: [...payments] }))
  yield* Effect.promise(() => producer.disconnect())

  const runner = yield* Effect.fork(
    Runner.run(Balance).pipe(
      Effect.provide(SkeinConfig.layer({
        applicationId: `balances-${run}`,
        brokers,
        stateDir: ".skein/example-state",
        deadLetterTopic: deadLetters
      }))
    )
  )

  // Read balances and dead letters back, read_committed, until every payment is accounted for.
  const balances = new Map<string, number>()
  const dead: Array<string> = []
  let balanceUpdates = 0
  const consumer = kafka.consumer({ groupId: `reader-${run}`, readUncommitted: false })
  yield* Effect.promise(() => consumer.connect())
  yield* Effect.promise(() => consumer.subscribe({ topics: [Balances.name, deadLetters], fromBeginning: true }))
  yield* Effect.promise(() =>
    consumer.run({
      eachMessage: async ({ message, topic }) => {
        if (topic === Balances.name) {
          balanceUpdates++
          balances.set(message.key?.toString() ?? "", Number(message.value?.toString()))
        } else {
          const error = message.headers?.["skein.error"]?.toString() ?? ""
          dead.push(`${message.key?.toString()}: ${error.split("\n")[0]}`)
        }
      }
    })
  )
  while (balanceUpdates + dead.length < payments.length) {
    yield* Effect.sleep("200 millis")
  }
  yield* Effect.promise(() => consumer.disconnect())
  yield* Fiber.interrupt(runner)
  yield* Effect.promise(() => admin.disconnect())

  console.log("balances (read_committed):")
  for (const [account, balance] of [...balances].sort()) console.log(`  ${account.padEnd(6)} ${balance}`)
  console.log(`ledger attempts for the flaky account's payment: ${attempts.get("0-3")}`)
  console.log(`dead letters (${dead.length}):`)
  for (const line of dead) console.log(`  ${line.slice(0, 150)}`)
})

program.pipe(
  Effect.provide(Layer.orDie(KafkaBroker.layer())),
  Effect.timeout("5 minutes"),
  Runner.runMain // Ctrl-C: the runs stop gracefully; exit code 0, or 1 on a failure
)
