/**
 * A restore that makes no progress ends (issue 29, defect 1): a read of the
 * changelog reader that gets nothing for its stall timeout fails with a
 * `KafkaError` of reason `Timeout` (a task's start retries it after a
 * backoff) instead of waiting forever.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Either, Option } from "effect"
import * as ChangelogReader from "../../src/internal/kafka/changelogReader.ts"
import * as Client from "../../src/internal/kafka/client.ts"
import * as Producer from "../../src/internal/kafka/producer.ts"
import * as Helpers from "../helpers/kafka.ts"
import { brokers } from "../utils/broker.ts"

describe("changelog reader", () => {
  it.scopedLive("a read that gets nothing within its stall timeout fails with a typed Timeout", () =>
    Effect.gen(function*() {
      const topic = Helpers.unique("restore-stall")
      yield* Helpers.createTopics([{ name: topic, partitions: 1 }])
      yield* Helpers.produce(topic, [{ key: "a", value: "1" }, { key: "b", value: "2" }])
      const kafka = yield* Client.makeKafka({ clientId: "restore-stall", brokers: brokers() })
      const producer = yield* Effect.flatMap(
        Producer.make(kafka, {
          partition: 0,
          transactionalId: Helpers.unique("restore-stall-0"),
          transactionTimeout: Duration.seconds(30),
          maxMessageBytes: 1_048_576
        }),
        (transactional) => transactional.fence
      )
      const reader = yield* ChangelogReader.make(kafka, {
        topic,
        groupId: Helpers.unique("restore-stall-reader"),
        stallTimeout: Duration.seconds(3)
      })
      // The partition ends at offset 2: a read up to 100 waits for records that never come.
      let applied = 0
      const read = yield* reader.read(producer, 0, { from: 0, until: 100 }, (records) =>
        Effect.sync(() => {
          applied += records.length
        })).pipe(
          Effect.either,
          // A guard against the hang this test is about, not a measurement.
          Effect.timeout("40 seconds"),
          Effect.option
        )
      assert.isTrue(Option.isSome(read), "the read never ended")
      if (Option.isNone(read)) return
      const failure = Either.getLeft(read.value)
      assert.isTrue(Option.isSome(failure), "the read succeeded")
      const error = Option.getOrThrow(failure)
      assert.strictEqual(error._tag, "KafkaError")
      if (error._tag === "KafkaError") assert.strictEqual(error.reason, "Timeout")
      assert.strictEqual(applied, 2)
    }), { timeout: 90_000 })
})
