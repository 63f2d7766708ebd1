/**
 * A fresh broker creates its group and transaction coordinators' topics
 * (`__consumer_offsets`, `__transaction_state`) on their first use and loads
 * them before it answers for them. The run's first tests met that on a busy
 * machine: kafkajs gave up with "Failed to find group coordinator" and "This
 * server does not host this topic-partition" (CI, test/kafkajs-read-committed
 * .test.ts, the run's first file, beside test/chaos.test.ts). The global setup
 * uses both coordinators once before any test runs, as a broker that has served
 * clients already would have them: the tests then see the broker every later
 * test sees.
 */
import { Duration, Effect, Schedule } from "effect"
import kafkajs from "kafkajs"
import { randomUUID } from "node:crypto"

/** Once more every second, for up to `timeout` in all (kafkajs retries inside each attempt too). */
const retried = <A>(attempt: () => Promise<A>, timeout: Duration.DurationInput) =>
  Effect.tryPromise(attempt).pipe(
    Effect.retry(Schedule.spaced("1 second").pipe(Schedule.upTo(timeout))),
    Effect.mapError((cause) => new Error(`the run's broker has no coordinator after ${Duration.format(timeout)}: ${String(cause)}`))
  )

/**
 * Finds a group coordinator (an admin's describeGroups) and a transaction
 * coordinator (a transactional producer's connect: FindCoordinator and
 * InitProducerId), retrying until the broker answers both.
 */
export const coordinatorsReady = (
  brokers: ReadonlyArray<string>,
  timeout: Duration.DurationInput = "2 minutes"
): Effect.Effect<void, Error> =>
  Effect.gen(function*() {
    const kafka = new kafkajs.Kafka({
      clientId: "skein-test-warmup",
      brokers: [...brokers],
      logLevel: kafkajs.logLevel.NOTHING,
      retry: { retries: 10, initialRetryTime: 200, maxRetryTime: 2_000 }
    })
    const id = `skein-warmup-${randomUUID().slice(0, 8)}`
    yield* retried(async () => {
      const admin = kafka.admin()
      await admin.connect()
      try {
        await admin.describeGroups([id])
      } finally {
        await admin.disconnect()
      }
    }, timeout)
    yield* retried(async () => {
      const producer = kafka.producer({ transactionalId: id, idempotent: true, maxInFlightRequests: 1 })
      try {
        await producer.connect()
      } finally {
        await producer.disconnect()
      }
    }, timeout)
  })
