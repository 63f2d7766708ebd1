/**
 * Waits until a broker's group and transaction coordinators answer, before
 * the first test runs. A broker that just logged "started" has no
 * `__consumer_offsets` or `__transaction_state` yet: the first transaction
 * creates them, and until their partitions are loaded a FindCoordinator or a
 * TxnOffsetCommit can fail (kafkajs gives up on `COORDINATOR_LOAD_IN_PROGRESS`
 * at once, as "Failed to find group coordinator"). Skein's runner recovers from
 * that (a recoverable commit failure: the batch is retried), but a test that
 * commits through a producer directly, or counts its runner's first
 * assignments within a bound, would fail on the broker's start instead of on
 * what it tests. So the run's setup commits one transaction with a group's
 * offset, retrying until it succeeds, and only then hands the broker to the
 * tests.
 */
import kafkajs from "kafkajs"

/** A coordinator did not answer within the bound: the broker is not usable for the run. */
export class CoordinatorsNotReady extends Error {
  override readonly name = "CoordinatorsNotReady"
}

const WARMUP = "skein-test-coordinators"

/**
 * Commits one transaction that holds a group offset (both coordinators
 * answered), trying again every 500 ms until `timeoutMs` has passed. Returns
 * how many tries it took.
 */
export const coordinatorsReady = async (brokers: ReadonlyArray<string>, timeoutMs = 120_000): Promise<number> => {
  const kafka = new kafkajs.Kafka({
    clientId: WARMUP,
    brokers: [...brokers],
    logLevel: kafkajs.logLevel.NOTHING,
    retry: { retries: 2, initialRetryTime: 200 }
  })
  const deadline = Date.now() + timeoutMs
  let lastError: unknown
  for (let attempt = 1; Date.now() < deadline; attempt++) {
    const admin = kafka.admin()
    const producer = kafka.producer({ transactionalId: `${WARMUP}-${process.pid}`, maxInFlightRequests: 1, idempotent: true })
    try {
      await admin.connect()
      // false when it exists already (a second run against the same cluster): either way it is there.
      await admin.createTopics({ waitForLeaders: true, topics: [{ topic: WARMUP, numPartitions: 1 }] })
      await producer.connect()
      const transaction = await producer.transaction()
      await transaction.send({ topic: WARMUP, messages: [{ value: "ready" }] })
      await transaction.sendOffsets({
        consumerGroupId: WARMUP,
        topics: [{ topic: WARMUP, partitions: [{ partition: 0, offset: "0" }] }]
      })
      await transaction.commit()
      return attempt
    } catch (error) {
      lastError = error
      await new Promise((resolve) => setTimeout(resolve, 500))
    } finally {
      // Closing the clients of a try that failed: its error is kept above, a close's own adds nothing.
      await producer.disconnect().catch(() => undefined)
      await admin.disconnect().catch(() => undefined)
    }
  }
  throw new CoordinatorsNotReady(
    `the broker at ${brokers.join(",")} did not answer a transaction with a group offset within ${timeoutMs / 1000} s ` +
      `(its group or transaction coordinator never became available; the last error: ${String(lastError)}): ` +
      "see the broker's server.log"
  )
}
