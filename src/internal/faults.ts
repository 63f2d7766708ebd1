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

/** A fault point armed by `SKEIN_FAULT`: the process dies at its `commit`-th commit (1-based). */
interface AfterCommitBeforeStore {
  readonly _tag: "AfterCommitBeforeStore"
  readonly commit: number
}

const parse = (text: string): AfterCommitBeforeStore | undefined => {
  const match = /^after-commit-before-store:([1-9]\d{0,8})$/.exec(text.trim())
  return match === null ? undefined : { _tag: "AfterCommitBeforeStore", commit: Number(match[1]) }
}

const setting: string | undefined = typeof process === "undefined" ? undefined : process.env[variable]
const armed: AfterCommitBeforeStore | undefined = setting === undefined ? undefined : parse(setting)

/** Logs at a runner's start that a fault point is armed, or that `SKEIN_FAULT` names none; nothing when unset. */
export const announce: Effect.Effect<void> = setting === undefined
  ? Effect.void
  : armed === undefined
  ? Effect.logWarning(
    `${variable}=${JSON.stringify(setting)} is not a fault point (after-commit-before-store:<n>) and is ignored; ` +
      `${variable} is for Skein's own tests only`
  )
  : Effect.logWarning(
    `${variable}: this process SIGKILLs itself at its commit ${armed.commit}, after the transaction and before ` +
      `the store write (for Skein's own tests only)`
  )

/** Commits seen by the armed fault point. */
let commits = 0

/**
 * Runs between a task's committed transaction and its store write. Armed
 * with `after-commit-before-store:<n>`, the n-th call in this process
 * SIGKILLs it (no finalizer runs, no later step of the commit either).
 */
export const afterCommitBeforeStore: (partition: number) => Effect.Effect<void> = armed === undefined
  ? () => Effect.void
  : (partition) =>
    Effect.suspend(() => {
      commits++
      if (commits !== armed.commit) return Effect.void
      fs.writeSync(2, `skein fault after-commit-before-store: SIGKILL at commit ${commits} (task ${partition})\n`)
      process.kill(process.pid, "SIGKILL")
      return Effect.never
    })
