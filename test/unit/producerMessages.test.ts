/**
 * An output is sent as it is (no copy per record), except where kafkajs would read its timestamp
 * differently from the text it was sent as before: a falsy number (0) is none to kafkajs.
 */
import { assert, describe, it } from "@effect/vitest"
import { toMessage } from "../../src/internal/kafka/producer.ts"
import type { EncodedRecord } from "../../src/Topic.ts"

describe("producer messages", () => {
  it("an output is its own message, headers and partition included", () => {
    const outputs: ReadonlyArray<EncodedRecord> = [
      { topic: "t", key: "k", value: "1", timestamp: 1_764_547_200_000 },
      { topic: "t", key: null, value: Buffer.from([0xff]), partition: 2, timestamp: 1 },
      { topic: "t", key: "k", value: null, headers: { a: "1", b: ["2", Buffer.from("3")] } }
    ]
    for (const output of outputs) assert.strictEqual(toMessage(output), output)
  })

  it("a timestamp of 0 is sent as the text kafkajs reads as a time, not as none", () => {
    for (const timestamp of [0, -0]) {
      const output: EncodedRecord = { topic: "t", key: "k", value: "v", partition: 1, timestamp }
      const expected: Record<string, unknown> = { topic: "t", key: "k", value: "v", partition: 1, timestamp: "0" }
      assert.deepStrictEqual(toMessage(output), expected)
    }
  })
})
