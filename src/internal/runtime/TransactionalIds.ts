/**
 * The transactional ids the runs of this process use: a run claims its ids at
 * startup, before any producer fences, and releases them when it ends. Two
 * different users of one id would fence each other for ever (a workflow
 * "orders" keeps its run store under `{applicationId}-orders-runs-{partition}`,
 * which is also what the tasks of a transformer "orders-runs" use), so a
 * claim of an id another user holds fails with a `ConfigurationError` naming
 * both. Instances of one application in one process are one user: they share
 * their ids on purpose (a new owner fences the old one).
 *
 * @internal
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import { ConfigurationError } from "../../SkeinError.ts"

/** A user of transactional ids: who (e.g. `workflow "orders"`), and of which application. */
export interface User {
  readonly applicationId: string
  /** Names the user in messages: `transformer "count"`, `the run store of workflow "orders"`, `extractor "feed"`. */
  readonly description: string
}

interface Claim {
  readonly user: User
  /** The process's runs holding it (instances of one application). */
  holders: number
}

const claims = new Map<string, Claim>()

const same = (a: User, b: User): boolean => a.applicationId === b.applicationId && a.description === b.description

/**
 * Claims `ids` for `user` until the scope closes; fails with a
 * `ConfigurationError` when another user of this process holds one of them.
 */
export const claim = (user: User, ids: ReadonlyArray<string>): Effect.Effect<void, ConfigurationError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.suspend(() => {
      for (const id of ids) {
        const held = claims.get(id)
        if (held !== undefined && !same(held.user, user)) {
          return Effect.fail(
            new ConfigurationError({
              problem: `Transactional id ${id} is used by both ${held.user.description} (application id ` +
                `${held.user.applicationId}) and ${user.description} (application id ${user.applicationId}): ` +
                `they would fence each other for ever`,
              fix: held.user.applicationId === user.applicationId
                ? "Give each transformer its own applicationId (SKEIN_APPLICATION_ID), e.g. " +
                  `"${user.applicationId}-{name}": one applicationId is one consumer group and one set of transactional ids`
                : "Rename one of them: a transactional id is {applicationId}-{partition} for a task, " +
                  "{applicationId}-runs-{partition} for a workflow's run store and " +
                  "{applicationId}-extract-{extractor}-{token} for an extractor, and runAll's application id of a " +
                  "transformer is {applicationId}-{name} (a rename also renames its consumer group and topics)"
            })
          )
        }
      }
      for (const id of ids) {
        const held = claims.get(id)
        if (held === undefined) claims.set(id, { user, holders: 1 })
        else held.holders++
      }
      return Effect.void
    }),
    () =>
      Effect.sync(() => {
        for (const id of ids) {
          const held = claims.get(id)
          if (held === undefined || !same(held.user, user)) continue
          held.holders--
          if (held.holders === 0) claims.delete(id)
        }
      })
  )
