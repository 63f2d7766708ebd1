/**
 * Proof that a task's commit happened: the receipt its transaction's commit
 * (or, at-least-once, its acknowledged sends) yields, with what the broker
 * appended. Writing a task's state store after processing requires one, so
 * a store never holds state its commit lacks.
 *
 * The brand is a symbol this module does not export: no value made
 * elsewhere has the type without a cast, and `spend` rejects a cast one.
 * Only the producer module (`kafka/producer.ts`) and the in-memory commit of
 * `TestDriver` call `issue` (test/unit/proofs.test.ts checks the callers).
 *
 * @internal
 */
import { Effect } from "effect"
import type { Appended } from "../kafka/producer.ts"

const receiptOf: unique symbol = Symbol("skein/CommitReceipt")

/** A commit of task `P` happened; `appended`: where the broker appended its records. */
export interface CommitReceipt<P extends number = number> {
  readonly [receiptOf]: P
  readonly partition: P
  readonly appended: ReadonlyArray<Appended>
}

/** The receipts issued and not spent yet. */
const unspent = new WeakSet<CommitReceipt>()

/** The receipt of a commit of task `partition` that happened (the producer module's, or memory's). */
export const issue = <P extends number>(partition: P, appended: ReadonlyArray<Appended>): CommitReceipt<P> => {
  const receipt: CommitReceipt<P> = { [receiptOf]: partition, partition, appended }
  unspent.add(receipt)
  return receipt
}

/**
 * True once for a receipt `issue` made (the store write it allows spends
 * it), when it is a receipt of the store's own task `partition` and the
 * write's checkpoint, if any, is a batch that commit appended (the store's
 * own changelog partition); false for a spent receipt, a value `issue` did
 * not make (a cast), another task's receipt, another commit's checkpoint,
 * or a store of no task (`partition` undefined).
 */
export const spend = (
  receipt: CommitReceipt,
  partition: number | undefined,
  checkpoint?: { readonly topic: string; readonly partition: number; readonly offset: number }
): boolean =>
  receipt.partition === partition &&
  (checkpoint === undefined || receipt.appended.some((a) =>
    a.topic === checkpoint.topic && a.partition === checkpoint.partition && a.baseOffset === checkpoint.offset
  )) && unspent.delete(receipt)

/**
 * A write to task `partition`'s store at `path` without a receipt `spend`
 * accepts (a spent one, a cast, another task's or commit's): a defect.
 */
export const missing = (path: string, partition: number | undefined, receipt: CommitReceipt): Effect.Effect<never> =>
  Effect.dieMessage(
    partition === undefined
      ? `Skein invariant broken: a write to the store at ${path}, which was opened for no task (read and replay only)`
      : receipt.partition !== partition
      ? `Skein invariant broken: a write to task ${partition}'s store at ${path} with the receipt of task ${receipt.partition}'s commit`
      : `Skein invariant broken: a write to task ${partition}'s store at ${path} without its commit's receipt`
  )
