/**
 * Fault points for Skein's own crash tests. For tests only: nothing in
 * production sets them.
 *
 * `SKEIN_FAULT=after-commit-before-store:<n>` makes the process SIGKILL
 * itself at its n-th commit of a stateful task, after the transaction
 * committed and before the task's store (with its checkpoint) is written:
 * what a crash or a power loss at that moment leaves
 * (`test/state/kill-after-commit.test.ts`).
 *
 * `SKEIN_FAULT=commit-lost:<n>` makes the process's n-th transaction abort
 * where it would commit, while its caller is told it committed (a receipt
 * as for any commit), and SIGKILLs the process once that commit's store
 * write is done: what a client is left with when a broker acknowledges a
 * commit and then loses it (test/chaos/FINDINGS.md #5 and #6), then the
 * process dies. The store then holds a commit its changelog does not.
 *
 * The variable is read once, when this module loads. Unset, the hook is
 * `Effect.void` and nothing else here ever runs; a runner that starts with
 * it set logs a warning saying which fault point is armed, or that the value
 * names none and is ignored.
 *
 * @internal
 */
import { Effect } from "effect"
import * as fs from "node:fs"

const variable = "SKEIN_FAULT"

/** A fault point armed by `SKEIN_FAULT`, at the process's `commit`-th commit (1-based). */
type FaultPoint =
  | { readonly _tag: "AfterCommitBeforeStore"; readonly commit: number }
  | { readonly _tag: "CommitLost"; readonly commit: number }

const parse = (text: string): FaultPoint | undefined => {
  const match = /^(after-commit-before-store|commit-lost):([1-9]\d{0,8})$/.exec(text.trim())
  if (match === null) return undefined
  const commit = Number(match[2])
  return match[1] === "commit-lost" ? { _tag: "CommitLost", commit } : { _tag: "AfterCommitBeforeStore", commit }
}

const setting: string | undefined = typeof process === "undefined" ? undefined : process.env[variable]
const armed: FaultPoint | undefined = setting === undefined ? undefined : parse(setting)

/** Logs at a runner's start that a fault point is armed, or that `SKEIN_FAULT` names none; nothing when unset. */
export const announce: Effect.Effect<void> = setting === undefined
  ? Effect.void
  : armed === undefined
  ? Effect.logWarning(
    `${variable}=${JSON.stringify(setting)} is not a fault point (after-commit-before-store:<n>) and is ignored; ` +
      `${variable} is for Skein's own tests only`
  )
  : Effect.logWarning(
    armed._tag === "CommitLost"
      ? `${variable}: this process aborts its transaction ${armed.commit} while reporting it committed, then SIGKILLs ` +
        `itself after the store write (for Skein's own tests only)`
      : `${variable}: this process SIGKILLs itself at its commit ${armed.commit}, after the transaction and before ` +
        `the store write (for Skein's own tests only)`
  )

/** Commits seen by the armed fault point. */
let commits = 0

/**
 * Runs between a task's committed transaction and its store write. Armed
 * with `after-commit-before-store:<n>`, the n-th call in this process
 * SIGKILLs it (no finalizer runs, no later step of the commit either).
 */
export const afterCommitBeforeStore: (partition: number) => Effect.Effect<void> = armed?._tag !== "AfterCommitBeforeStore"
  ? () => Effect.void
  : (partition) =>
    Effect.suspend(() => {
      commits++
      if (commits !== armed.commit) return Effect.void
      fs.writeSync(2, `skein fault after-commit-before-store: SIGKILL at commit ${commits} (task ${partition})\n`)
      process.kill(process.pid, "SIGKILL")
      return Effect.never
    })

/** Transactions seen by the armed `commit-lost` fault point; the task whose commit it lost. */
let transactions = 0
let lostBy: number | undefined = undefined

/**
 * Asked by task `partition`'s transaction before it commits: true when it is
 * the one `commit-lost:<n>` names, which then aborts and reports a commit.
 */
export const loseCommit = (partition: number): boolean => {
  if (armed?._tag !== "CommitLost") return false
  transactions++
  if (transactions !== armed.commit) return false
  fs.writeSync(2, `skein fault commit-lost: transaction ${transactions} aborted, reported committed (task ${partition})\n`)
  lostBy = partition
  return true
}

/**
 * Runs after task `partition`'s store write: SIGKILLs the process once the
 * commit lost for that task is in its store (other tasks' writes go on).
 */
export const afterStoreWrite = (partition: number): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (lostBy !== partition) return Effect.void
    fs.writeSync(2, `skein fault commit-lost: SIGKILL after the store write (task ${partition})\n`)
    process.kill(process.pid, "SIGKILL")
    return Effect.never
  })
