import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as BatchLock from "../../src/internal/runtime/BatchLock.ts"
import * as CommitReceipt from "../../src/internal/runtime/CommitReceipt.ts"
import { classify } from "../../src/internal/kafka/errors.ts"
import { isPermit } from "../../src/internal/kafka/producer.ts"
import type { FencedProducer } from "../../src/internal/kafka/producer.ts"
import * as MemoryStore from "../../src/internal/stores/memoryStore.ts"
import type { StateStore } from "../../src/internal/stores/StateStore.ts"
import { AuthorizationFailed, KafkaError } from "../../src/SkeinError.ts"

const dies = (exit: Exit.Exit<unknown, unknown>): boolean => Exit.isFailure(exit) && Cause.isDie(exit.cause)

/** The message of the defect an exit died with (`undefined` unless it died). */
const defect = (exit: Exit.Exit<unknown, unknown>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const died = Cause.dieOption(exit.cause)
  return died._tag === "Some" && died.value instanceof Error ? died.value.message : undefined
}

// The ordering proofs cannot be forged: the types reject a literal (test/types/ordering.ts),
// and the runtime rejects what a cast lets through.
describe("ordering proofs", () => {
  it.effect("a batch lock permit is valid only for its own lock, while it is held", () =>
    Effect.gen(function*() {
      const lock = yield* BatchLock.make("tasks")
      const other = yield* BatchLock.make("tasks")
      const kept: Array<BatchLock.BatchLockHeld<"tasks">> = []
      yield* lock.withLock((held) => {
        kept.push(held)
        return lock.verify(held)
      })
      const held = kept[0]!
      assert.isTrue(dies(yield* Effect.exit(lock.verify(held))), "a permit used after its lock was released dies")
      const another = yield* Effect.exit(lock.withLock(() => other.withLock((otherHeld) => lock.verify(otherHeld))))
      assert.isTrue(dies(another), "another lock's permit (same name, so same type) dies")
      const forged = yield* Effect.exit(lock.withLock(() => lock.verify({ lock: "tasks" } as unknown as BatchLock.BatchLockHeld<"tasks">)))
      assert.isTrue(dies(forged), "a cast object is not a permit")
    }))

  it("a restore permit must be issued by the producer module, for its own partition", () => {
    const forged = { _tag: "FencedProducer", partition: 0, transactionalId: "app-0" } as unknown as FencedProducer
    assert.isFalse(isPermit(forged, 0))
  })

  it.effect("a store write needs a receipt issued by a commit, spent once", () =>
    Effect.gen(function*() {
      const store = MemoryStore.make("memory:proofs", 0)
      const receipt = CommitReceipt.issue(0, [])
      yield* store.write(receipt, [{ key: "a", value: "1" }])
      assert.strictEqual(yield* store.get("a"), "1")
      const again = yield* Effect.exit(store.write(receipt, [{ key: "a", value: "2" }]))
      assert.isTrue(dies(again), "a spent receipt dies")
      const elsewhere = CommitReceipt.issue(0, [{ topic: "app-changelog", partition: 0, baseOffset: 5, records: 1 }])
      const checkpoint = { topic: "app-changelog", partition: 1, offset: 5 }
      assert.isTrue(dies(yield* Effect.exit(store.write(elsewhere, [], checkpoint))), "a checkpoint the commit did not append dies")
      yield* store.write(elsewhere, [{ key: "a", value: "1" }], { ...checkpoint, partition: 0 })
      assert.deepStrictEqual(yield* store.checkpoint, { ...checkpoint, partition: 0 })
      const forged = { partition: 0, appended: [] } as unknown as CommitReceipt.CommitReceipt<0>
      assert.isTrue(dies(yield* Effect.exit(store.write(forged, [{ key: "a", value: "3" }]))), "a cast receipt dies")
      assert.strictEqual(yield* store.get("a"), "1", "neither write reached the store")
    }))

  it.effect("a store write needs a receipt of its own task's commit", () =>
    Effect.gen(function*() {
      // A partition known at run time only: the store's type takes any task's receipt (the types reject task 1's
      // receipt for a store typed by its task, test/types/ordering.ts).
      const partition: number = 0
      const store: StateStore<number> = MemoryStore.make("memory:proofs/0", partition)
      const other = yield* Effect.exit(store.write(CommitReceipt.issue(1, []), [{ key: "a", value: "1" }]))
      assert.strictEqual(
        defect(other),
        "Skein invariant broken: a write to task 0's store at memory:proofs/0 with the receipt of task 1's commit"
      )
      const noTask = MemoryStore.make("memory:proofs/replay-only")
      const forged = CommitReceipt.issue(0, []) as unknown as CommitReceipt.CommitReceipt<never>
      assert.strictEqual(
        defect(yield* Effect.exit(noTask.write(forged, [{ key: "a", value: "1" }]))),
        "Skein invariant broken: a write to the store at memory:proofs/replay-only, which was opened for no task (read and replay only)"
      )
      assert.strictEqual(yield* store.get("a"), undefined, "no write reached the store")
      yield* store.write(CommitReceipt.issue(0, []), [{ key: "a", value: "1" }])
      assert.strictEqual(yield* store.get("a"), "1", "its own task's receipt writes it")
    }))

  it("only the producer module and the in-memory commit issue receipts", () => {
    const files = (dir: string): Array<string> =>
      fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
        entry.isDirectory() ? files(path.join(dir, entry.name)) : entry.name.endsWith(".ts") ? [path.join(dir, entry.name)] : []
      )
    const issuers = files("src").filter((file) => fs.readFileSync(file, "utf8").includes("CommitReceipt.issue("))
    assert.deepStrictEqual(issuers.sort(), [path.join("src", "internal", "kafka", "producer.ts"), path.join("src", "testing", "TestDriver.ts")])
  })

  it("a security failure is fatal, any other broker failure recoverable", () => {
    const timeout = new KafkaError({ reason: "Timeout", operation: "commit", cause: "timeout" })
    assert.strictEqual(classify(timeout)._tag, "Recoverable")
    const denied = new KafkaError({
      reason: "Protocol",
      operation: "commit",
      cause: new AuthorizationFailed({ resource: "topic", names: ["out"], operation: "WRITE", during: "commit", cause: "denied" })
    })
    assert.strictEqual(classify(denied)._tag, "Fatal")
  })
})
