import { assert, describe, it } from "@effect/vitest"
import kafkajs from "kafkajs"
import { isUnknownTopic } from "../../src/internal/kafka/errors.ts"
import { runTransaction } from "../../src/internal/kafka/producer.ts"
import type { Producer, Transaction } from "kafkajs"

const protocolError = (type: string, message: string) =>
  new kafkajs.KafkaJSProtocolError(Object.assign(new Error(message), { type, code: 0, retriable: false }))

describe("kafka errors", () => {
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
