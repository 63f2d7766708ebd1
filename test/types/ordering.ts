/**
 * Type-level tests, checked by `npm run typecheck` (part of `npm test`): the
 * ordering rules of a task do not compile when broken. Each
 * `@ts-expect-error` fails the type check if the line below it compiles.
 * (A cast still compiles: the runtime rejects what the types let through,
 * see test/unit/proofs.test.ts.)
 */
import { Duration, Effect } from "effect"
import type * as BatchLock from "../../src/internal/runtime/BatchLock.ts"
import type { CommitReceipt } from "../../src/internal/runtime/CommitReceipt.ts"
import type { ChangelogReader } from "../../src/internal/kafka/changelogReader.ts"
import type { Kafka } from "../../src/internal/kafka/client.ts"
import { classify } from "../../src/internal/kafka/errors.ts"
import type { Recoverable } from "../../src/internal/kafka/errors.ts"
import type {
  AtLeastOnceProducer,
  FencedProducer,
  RestorePermit,
  TransactionalProducer
} from "../../src/internal/kafka/producer.ts"
import * as Producer from "../../src/internal/kafka/producer.ts"
import type { StateStore } from "../../src/internal/stores/StateStore.ts"
import { KafkaError } from "../../src/SkeinError.ts"

declare const reader: ChangelogReader
declare const exactlyOnceReader: ChangelogReader<"exactly-once">
declare const unfenced: TransactionalProducer<0>
declare const fenced0: FencedProducer<0, "app-0">
declare const atLeastOnce0: AtLeastOnceProducer<0>
declare const lock: BatchLock.BatchLock<"tasks">
declare const otherLock: BatchLock.BatchLock<"standbys">
declare const store: StateStore<0>
declare const storeOfSomeTask: StateStore
declare const receipt: CommitReceipt<0>

const range = { from: 0, until: 10 }
const apply = () => Effect.void
const writes = [{ key: "k", value: "1" }]

// Fencing before restore.

export const restoreWithoutFencing = () =>
  // @ts-expect-error restoring requires the FencedProducer that only fencing produces
  reader.read(unfenced, 0, range, apply)

export const restoreWithForgedProof = () =>
  // @ts-expect-error a plain object is not a fencing proof
  reader.read({ _tag: "FencedProducer", partition: 0, transactionalId: "app-0", commit: () => Effect.die("forged") }, 0, range, apply)

export const restoreAfterFencing = () => reader.read(fenced0, 0, range, apply)

export const restoreOtherPartition = () =>
  // @ts-expect-error task 0's permit does not restore partition 1
  reader.read(fenced0, 1, range, apply)

export const atLeastOnceAsExactlyOncePermit = () =>
  // @ts-expect-error an at-least-once producer is no exactly-once restore permit: it fenced nothing
  exactlyOnceReader.read(atLeastOnce0, 0, range, apply)

export const atLeastOnceAsExactlyOnceType = (permit: AtLeastOnceProducer<0>) => {
  // @ts-expect-error an at-least-once producer is no exactly-once restore permit
  const wanted: RestorePermit<0, "exactly-once"> = permit
  return wanted
}

export const exactlyOnceRestore = () => exactlyOnceReader.read(fenced0, 0, range, apply)

export const permitOfAnotherTransactionalId = (permit: FencedProducer<0, "app-0">) => {
  // @ts-expect-error the permit says which transactional id it fenced
  const wanted: FencedProducer<0, "other-0"> = permit
  return wanted
}

// A permit of a closed producer: a producer lent by `use` (and its fenced producer, the permit) has
// the call's own lifetime type, so no permit of it is used after it closed.

declare const kafka: Kafka
const options = { partition: 0, transactionalId: "app-0", transactionTimeout: Duration.minutes(1), maxMessageBytes: 1024 } as const

export const restoreWhileItsProducerIsOpen = () =>
  Producer.use(kafka, options, (producer) =>
    Effect.flatMap(producer.fence, (fenced) => exactlyOnceReader.read(fenced, 0, range, apply)))

export const permitUsedAfterItsProducerClosed = () =>
  // @ts-expect-error the permit is returned past `use`, which closed its producer: its lifetime type does not leave
  Effect.flatMap(Producer.use(kafka, options, (producer) => producer.fence), (kept) => reader.read(kept, 0, range, apply))

export const permitKeptPastItsProducer = () => {
  let kept: FencedProducer<0, "app-0"> | undefined
  return Producer.use(kafka, options, (producer) =>
    Effect.map(producer.fence, (fenced) => {
      // @ts-expect-error a permit lent by `use` is not stored for after its producer closed
      kept = fenced
    })).pipe(Effect.map(() => kept))
}

// Teardown under the batch lock.

export const teardownWithoutLock = () =>
  // @ts-expect-error teardown requires proof that the batch lock is held
  lock.verify()

export const teardownWithForgedLock = () =>
  // @ts-expect-error an object literal is not a lock proof: the brand's symbol is not exported
  lock.verify({ lock: "tasks" })

export const teardownUnderAnotherLock = () =>
  // @ts-expect-error a permit of another lock does not prove this one is held
  otherLock.withLock((held) => lock.verify(held))

export const teardownUnderLock = () => lock.withLock((held) => lock.verify(held))

// A store write after its commit.

export const storeWriteWithoutReceipt = () =>
  // @ts-expect-error a store write requires the commit's receipt
  store.write(writes)

export const storeWriteWithForgedReceipt = () =>
  // @ts-expect-error a receipt is only what a commit yields: the brand's symbol is not exported
  store.write({ partition: 0, appended: [] }, writes)

export const receiptOfAnotherPartition = (other: CommitReceipt<1>) => {
  // @ts-expect-error a receipt says which task committed
  const wanted: CommitReceipt<0> = other
  return wanted
}

export const storeWriteWithAnotherPartitionsReceipt = (other: CommitReceipt<1>) =>
  // @ts-expect-error partition 0's store takes only a receipt of partition 0's commit
  store.write(other, writes)

export const storeWriteAfterAnotherPartitionsCommit = (fenced1: FencedProducer<1, "app-1">) =>
  Effect.flatMap(fenced1.commit([], { groupId: "app", offsets: [] }), (committed) =>
    // @ts-expect-error partition 1's commit does not write partition 0's store
    store.write(committed, writes))

// In a task's code the partition is a type parameter (a number known at run time): still its own.
export const storeWriteOfAnotherTask = <P extends number, Q extends number>(own: StateStore<P>, other: FencedProducer<Q>) =>
  Effect.flatMap(other.commit([], { groupId: "app", offsets: [] }), (committed) =>
    // @ts-expect-error task Q's receipt does not write task P's store
    own.write(committed, writes))

export const storeWriteOfItsOwnTask = <P extends number>(own: StateStore<P>, producer: FencedProducer<P>) =>
  Effect.flatMap(producer.commit([], { groupId: "app", offsets: [] }), (committed) => own.write(committed, writes))

export const storeWriteOfNoTask = () =>
  // @ts-expect-error a store whose type names no task reads and replays; no receipt writes it
  storeOfSomeTask.write(receipt, writes)

export const anyTaskStoreReads = (): StateStore => store

export const storeWriteAfterCommit = () => store.write(receipt, writes)

export const storeWriteAfterFencedCommit = () =>
  Effect.flatMap(fenced0.commit([], { groupId: "app", offsets: [] }), (committed) => store.write(committed, writes))

// Recoverable versus fatal.

declare const retry: (failure: Recoverable) => Effect.Effect<void>
const error = new KafkaError({ reason: "Timeout", operation: "commit", cause: "timeout" })

export const retryUnclassified = () =>
  // @ts-expect-error only `classify` says a failure is recoverable
  retry(error)

export const retryForged = () =>
  // @ts-expect-error a recoverable failure's brand is not exported
  retry({ _tag: "Recoverable", error })

export const retryFatal = () => {
  const failure = classify(error)
  // @ts-expect-error a fatal failure is not retried
  return retry(failure)
}

export const retryRecoverable = () => {
  const failure = classify(error)
  return failure._tag === "Recoverable" ? retry(failure) : Effect.fail(failure.error)
}
