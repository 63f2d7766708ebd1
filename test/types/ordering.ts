/**
 * Type-level tests, checked by `npm run typecheck` (part of `npm test`): the
 * ordering rules of a task do not compile when broken. Each
 * `@ts-expect-error` fails the type check if the line below it compiles.
 * (A cast still compiles: the runtime rejects what the types let through,
 * see test/unit/proofs.test.ts.)
 */
import { Effect } from "effect"
import * as BatchLock from "../../src/internal/BatchLock.ts"
import type { ChangelogReader } from "../../src/internal/kafka/changelogReader.ts"
import type { FencedProducer, TransactionalProducer } from "../../src/internal/kafka/producer.ts"

declare const reader: ChangelogReader
declare const unfenced: TransactionalProducer
declare const lock: BatchLock.BatchLock

const range = { from: 0, until: 10 }
const apply = () => Effect.void

export const restoreWithoutFencing = () =>
  // @ts-expect-error restoring requires the FencedProducer that only fencing produces
  reader.read(unfenced, 0, range, apply)

export const restoreWithForgedProof = () =>
  // @ts-expect-error a plain object is not a fencing proof
  reader.read({ _tag: "FencedProducer", partition: 0, transactionalId: "app-0", commit: () => Effect.void }, 0, range, apply)

export const restoreAfterFencing = (fenced: FencedProducer) => reader.read(fenced, 0, range, apply)

export const teardownWithoutLock = () =>
  // @ts-expect-error teardown requires proof that the batch lock is held
  BatchLock.verify()

export const teardownWithForgedLock = () =>
  // @ts-expect-error an empty object is not a lock proof
  BatchLock.verify({})

export const teardownUnderLock = () => lock.withLock((held) => BatchLock.verify(held))
