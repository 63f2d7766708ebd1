import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import * as BatchLock from "../../src/internal/BatchLock.ts"
import { isPermit } from "../../src/internal/kafka/producer.ts"
import type { FencedProducer } from "../../src/internal/kafka/producer.ts"

// The ordering proofs cannot be forged: the types reject a literal (test/types/ordering.ts),
// and the runtime rejects what a cast lets through.
describe("ordering proofs", () => {
  it.effect("a batch lock permit is valid only while its lock is held", () =>
    Effect.gen(function*() {
      const lock = yield* BatchLock.make
      const kept: Array<BatchLock.BatchLockHeld> = []
      yield* lock.withLock((held) => {
        kept.push(held)
        return BatchLock.verify(held)
      })
      const stale = yield* Effect.exit(BatchLock.verify(kept[0]!))
      assert.isTrue(Exit.isFailure(stale) && Cause.isDie(stale.cause), "a permit used after its lock was released dies")
      const forged = yield* Effect.exit(BatchLock.verify({} as BatchLock.BatchLockHeld))
      assert.isTrue(Exit.isFailure(forged) && Cause.isDie(forged.cause), "a cast object is not a permit")
    }))

  it("a restore permit must be issued by the producer module, for its own partition", () => {
    const forged = { _tag: "FencedProducer", partition: 0, transactionalId: "app-0" } as unknown as FencedProducer
    assert.isFalse(isPermit(forged, 0))
  })
})
