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
 *
 * The transformer is in examples/balance.ts; test/testing/dead-letters-example.test.ts runs it
 * with TestDriver, no broker.
 */
import { Effect, Fiber, Layer } from "effect"
import kafkajs from "kafkajs"
import { Runner, SkeinConfig } from "../src/index.ts"
import { KafkaBroker } from "../src/testing/index.ts"
import { makeBalance, payments } from "./balance.ts"

const run = `${Date.now()}`

const { Balance, Balances, Payments, attempts } = makeBalance(run)
const deadLetters = `payments-dead-letters-${run}`

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
