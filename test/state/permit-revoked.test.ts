import { assert, describe, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Scope } from "effect"
import * as ChangelogReader from "../../src/internal/kafka/changelogReader.ts"
import * as Client from "../../src/internal/kafka/client.ts"
import * as Producer from "../../src/internal/kafka/producer.ts"
import * as Helpers from "../helpers/kafka.ts"
import { brokers } from "../utils/broker.ts"

// The runtime's second line behind the types (test/types/ordering.ts): a permit whose producer
// closed, or of another guarantee, restores nothing.
describe("restore permits", () => {
  it.scopedLive("a permit is revoked when its producer closes; an exactly-once reader rejects an at-least-once permit", () =>
    Effect.gen(function*() {
      const topic = Helpers.unique("permit-revoked")
      yield* Helpers.createTopics([{ name: topic, partitions: 1 }])
      const kafka = yield* Client.makeKafka({ clientId: "permit-revoked", brokers: brokers() })
      const reader = yield* ChangelogReader.make(kafka, {
        topic,
        groupId: Helpers.unique("permit-revoked-reader"),
        guarantee: "exactly-once"
      })
      const scope = yield* Scope.make()
      const fenced = yield* Effect.flatMap(
        Producer.make(kafka, {
          partition: 0,
          transactionalId: Helpers.unique("permit-revoked-0"),
          transactionTimeout: Duration.seconds(30),
          maxMessageBytes: 1_048_576
        }),
        (producer) => producer.fence
      ).pipe(Scope.extend(scope))
      const receipt = yield* fenced.commit([{ topic, key: "k", value: "v", partition: 0 }], { groupId: "", offsets: [] })
      const read = (permit: Producer.RestorePermit<0>) =>
        Effect.exit(reader.read(permit as Producer.RestorePermit<0, "exactly-once">, 0, { from: 0, until: 1 }, () => Effect.void))
      assert.isTrue(Producer.isPermit(fenced, 0), "an open fenced producer is a permit")
      const open = yield* read(fenced)
      assert.isTrue(Exit.isSuccess(open), `the open producer's permit restores: ${Exit.isFailure(open) ? Cause.pretty(open.cause) : ""}`)
      assert.deepStrictEqual(receipt.appended.map((a) => a.partition), [0])

      const atLeastOnce = yield* Producer.atLeastOnce(kafka, { partition: 0, maxMessageBytes: 1_048_576 })
      const wrongGuarantee = yield* read(atLeastOnce)
      assert.isTrue(Exit.isFailure(wrongGuarantee) && Cause.isDie(wrongGuarantee.cause), "an at-least-once permit dies at an exactly-once reader")

      yield* Scope.close(scope, Exit.void)
      assert.isFalse(Producer.isPermit(fenced, 0), "a closed producer's permit is revoked")
      const closed = yield* read(fenced)
      assert.isTrue(Exit.isFailure(closed) && Cause.isDie(closed.cause), "a closed producer's permit dies at the reader")
    }))

  it.scopedLive("a permit kept past its producer's use dies at the reader, saying that its producer closed", () =>
    Effect.gen(function*() {
      const topic = Helpers.unique("permit-used")
      yield* Helpers.createTopics([{ name: topic, partitions: 1 }])
      const kafka = yield* Client.makeKafka({ clientId: "permit-used", brokers: brokers() })
      const reader = yield* ChangelogReader.make(kafka, {
        topic,
        groupId: Helpers.unique("permit-used-reader"),
        guarantee: "exactly-once"
      })
      const options = {
        partition: 0,
        transactionalId: Helpers.unique("permit-used-0"),
        transactionTimeout: Duration.seconds(30),
        maxMessageBytes: 1_048_576
      } as const
      // The types keep the permit inside `use` (test/types/ordering.ts); this array stands for a defect that lets it out.
      const kept: Array<unknown> = []
      const inside = yield* Producer.use(kafka, options, (producer) =>
        Effect.gen(function*() {
          const fenced = yield* producer.fence
          kept.push(fenced)
          yield* fenced.commit([{ topic, key: "k", value: "v", partition: 0 }], { groupId: "", offsets: [] })
          return yield* Effect.exit(reader.read(fenced, 0, { from: 0, until: 1 }, () => Effect.void))
        }))
      assert.isTrue(Exit.isSuccess(inside), `inside use, the permit restores: ${Exit.isFailure(inside) ? Cause.pretty(inside.cause) : ""}`)
      const permit = kept[0] as Producer.FencedProducer<0>
      assert.isFalse(Producer.isPermit(permit, 0), "once use ended, its producer is closed and the permit revoked")
      const after = yield* Effect.exit(reader.read(permit, 0, { from: 0, until: 1 }, () => Effect.void))
      const died = Exit.isFailure(after) ? Cause.dieOption(after.cause) : undefined
      assert.strictEqual(
        died?._tag === "Some" && died.value instanceof Error ? died.value.message : `not a defect: ${String(after)}`,
        "Skein invariant broken: restoring partition 0 without its task's exactly-once producer (an open one, of that partition): " +
          "its producer closed (task 0's permit was kept after its producer's scope or use ended)"
      )
    }))
})
