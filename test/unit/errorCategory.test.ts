import { assert, describe, it } from "@effect/vitest"
import { Data } from "effect"
import { SkeinError } from "../../src/index.ts"

class Invalid extends Data.TaggedError("Invalid")<{}> {}

describe("SkeinError.category", () => {
  it("setup, transient and record errors are told apart", () => {
    const kafka = new SkeinError.KafkaError({ reason: "Connection", operation: "connect", cause: "down" })
    assert.strictEqual(SkeinError.category(kafka), "transient")
    assert.isTrue(SkeinError.isTransient(new SkeinError.DeliveryFailed({ partition: 0, attempts: 8, cause: kafka })))
    assert.strictEqual(SkeinError.category(new SkeinError.TopicNotFound({ topic: "t" })), "setup")
    assert.strictEqual(
      SkeinError.category(new SkeinError.OffsetOutOfRange({ topic: "t", partition: 0, committed: 1, earliest: 5 })),
      "setup"
    )
    assert.strictEqual(
      SkeinError.category(
        new SkeinError.OutputTooLarge({ topic: "t", bytes: 2, limit: 1, source: { topic: "i", partition: 0, offset: 0 } })
      ),
      "record"
    )
    const outOfRange = new SkeinError.PartitionOutOfRange({
      topic: "t",
      partition: 3,
      partitions: 2,
      source: { topic: "i", partition: 0, offset: 7 }
    })
    assert.strictEqual(SkeinError.category(outOfRange), "record")
    assert.isTrue(SkeinError.isSkeinError(outOfRange))
    assert.include(outOfRange.message, "partition 3, but the topic has 2")
    assert.isFalse(SkeinError.isTransient(new SkeinError.ConfigurationError({ problem: "p", fix: "f" })))
  })

  it("isSkeinError tells the runtime's errors from the transform's", () => {
    assert.isTrue(SkeinError.isSkeinError(new SkeinError.TopicNotFound({ topic: "t" })))
    assert.isFalse(SkeinError.isSkeinError(new Invalid()))
    assert.isFalse(SkeinError.isSkeinError({ _tag: "TopicNotFound" }))
  })
})
