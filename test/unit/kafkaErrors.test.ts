import { assert, describe, it } from "@effect/vitest"
import kafkajs from "kafkajs"
import { Duration } from "effect"
import { KafkaError } from "../../src/SkeinError.ts"
import { consumerRetryBudget } from "../../src/internal/kafka/consumer.ts"
import { ClusterUnreachable, isUnknownTopic, toKafkaError, unreachableAfterRetries } from "../../src/internal/kafka/errors.ts"
import { runTransaction } from "../../src/internal/kafka/producer.ts"
import type { Producer, Transaction } from "kafkajs"

const protocolError = (type: string, message: string) =>
  new kafkajs.KafkaJSProtocolError(Object.assign(new Error(message), { type, code: 0, retriable: false }))

describe("kafka errors", () => {
  // The chaos run's apps ended with "Kafka consumer failed (Connection): Connection error: connect
  // ECONNREFUSED ...": nothing said that the consumer had retried for ~50 s, nor what to check.
  it("a consumer that gives up on unreachable brokers fails with ClusterUnreachable: the bound and what to check", () => {
    const refused = new kafkajs.KafkaJSConnectionError("Connection error: connect ECONNREFUSED 127.0.0.1:44693", {
      broker: "127.0.0.1:44693",
      code: "ECONNREFUSED"
    })
    const exhausted = new kafkajs.KafkaJSNumberOfRetriesExceeded(refused, { retryCount: 12, retryTime: 5000 })
    const error = toKafkaError("consumer")(unreachableAfterRetries("consumer", consumerRetryBudget)(exhausted))
    assert.instanceOf(error, KafkaError)
    assert.strictEqual(error.reason, "Connection")
    assert.instanceOf(error.cause, ClusterUnreachable)
    assert.strictEqual(Math.round(Duration.toSeconds(consumerRetryBudget)), 48)
    assert.include(error.message, "Kafka consumer failed (Connection): the consumer could not reach the Kafka brokers")
    assert.include(error.message, "about 48 s; last failure: Connection error: connect ECONNREFUSED 127.0.0.1:44693")
    assert.include(error.message, "Check that the brokers in SkeinConfig.brokers are running and reachable")
    // Anything else keeps its own error: a retriable protocol answer, or a connection error not retried out.
    const protocol = new kafkajs.KafkaJSNumberOfRetriesExceeded(protocolError("COORDINATOR_NOT_AVAILABLE", "not available"), {
      retryCount: 12,
      retryTime: 5000
    })
    assert.strictEqual(unreachableAfterRetries("consumer", consumerRetryBudget)(protocol), protocol)
    assert.strictEqual(unreachableAfterRetries("consumer", consumerRetryBudget)(refused), refused)
  })

  // Issue 11, defect 8: "not exist" anywhere in a message counted as a missing topic,
  // so the changelog's partition check could be skipped on an unrelated answer.
  it("a missing topic is recognised by the broker's error type, not by words in a message", () => {
    assert.isTrue(isUnknownTopic(protocolError("UNKNOWN_TOPIC_OR_PARTITION", "This server does not host this topic-partition")))
    assert.isTrue(isUnknownTopic(new kafkajs.KafkaJSNumberOfRetriesExceeded(
      protocolError("UNKNOWN_TOPIC_OR_PARTITION", "This server does not host this topic-partition"),
      { retryCount: 5, retryTime: 100 }
    )))
    assert.isFalse(isUnknownTopic(protocolError("GROUP_ID_NOT_FOUND", "The group id does not exist")))
    assert.isFalse(isUnknownTopic(new Error("Transactional id does not exist")))
  })

  // Issue 11, defect 8: a failed abort was swallowed (`.catch(() => undefined)`).
  it("a transaction whose send and abort both fail reports both", async () => {
    const transaction = {
      sendBatch: async () => {
        throw new Error("send failed")
      },
      sendOffsets: async () => undefined,
      commit: async () => undefined,
      abort: async () => {
        throw new Error("abort failed")
      },
      isActive: () => true
    } as unknown as Transaction
    const producer = { transaction: async () => transaction } as unknown as Producer
    const error = await runTransaction(
      producer,
      [{ topic: "out", key: "k", value: "v" }],
      { groupId: "g", offsets: [] },
      { maxMessageBytes: 1_000_000, limitOf: () => undefined }
    ).then(() => undefined, (e: unknown) => e)
    assert.instanceOf(error, Error)
    assert.match((error as Error).message, /send failed.*abort failed/)
  })
})
