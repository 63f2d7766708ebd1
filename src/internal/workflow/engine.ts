/**
 * One execution of a durable workflow on a task's run store: a
 * `WorkflowEngine` of `@effect/workflow` (built with its `makeUnsafe`, over
 * Skein's storage) that lives for one run of the body.
 *
 * - An activity whose success is in the run store is not run: its stored
 *   result is returned. Otherwise it runs, and a success is made durable before
 *   the body goes on; a failure is never stored.
 * - Two activities with one name and attempt in one run are a defect that
 *   names them: `@effect/workflow` keys results by name, so the second would
 *   silently return the first one's result on replay.
 * - Nothing wakes a run up in a Kafka handler: a durable sleep longer than the
 *   in-memory threshold, a `DurableDeferred` not yet done, or the body
 *   interrupting itself suspends the run, and the caller turns `Suspended`
 *   into an error.
 * - Child workflows are not supported yet (a defect that says so).
 *
 * @internal
 */
import type * as Activity from "@effect/workflow/Activity"
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import { Cause, Effect, Exit, Option } from "effect"
import type { Schema } from "effect"
import type { RunStore, RunStoreWriteError } from "./RunStore.ts"

/** A run-store write failed inside an activity; the run's caller fails with `error`. */
class RunStoreFailed {
  constructor(readonly error: RunStoreWriteError) {}
}

/** How one execution of the body ended. */
export type Execution<A, E> =
  | { readonly _tag: "Complete"; readonly exit: Exit.Exit<A, E> }
  | { readonly _tag: "Suspended" }

/**
 * Runs `body` once for `executionId` with the activities' results of `runs`
 * (`None`: nothing is stored, every activity runs). Fails only when the run
 * store could not be written.
 */
export const execute = <
  Name extends string,
  Payload extends Workflow.AnyStructSchema,
  Success extends Schema.Schema.Any,
  Error extends Schema.Schema.All,
  R
>(
  workflow: Workflow.Workflow<Name, Payload, Success, Error>,
  body: (payload: Payload["Type"], executionId: string) => Effect.Effect<Success["Type"], Error["Type"], R>,
  payload: Payload["Type"],
  executionId: string,
  runs: Option.Option<RunStore>
): Effect.Effect<
  Execution<Success["Type"], Error["Type"]>,
  RunStoreWriteError,
  Exclude<R, WorkflowEngine.WorkflowEngine | WorkflowEngine.WorkflowInstance | Workflow.Execution<Name>>
> =>
  Effect.suspend(() => {
    let storeFailure: RunStoreWriteError | undefined
    const started = new Set<string>()

    const runActivity = (activity: Activity.Any, attempt: number) =>
      Effect.gen(function*() {
        const instance = yield* WorkflowEngine.WorkflowInstance
        const id = `${activity.name}/${attempt}`
        if (started.has(id)) {
          return yield* Effect.dieMessage(
            `workflow ${workflow.name} ran two activities named "${activity.name}" in one run: ` +
              `results are stored by name, so each activity of a workflow needs a name of its own`
          )
        }
        started.add(id)
        if (Option.isSome(runs)) {
          const stored = yield* Effect.orDie(runs.value.step(instance.executionId, activity.name, attempt))
          if (Option.isSome(stored)) return new Workflow.Complete({ exit: Exit.succeed(stored.value) })
        }
        const own = WorkflowEngine.WorkflowInstance.initial(instance.workflow, instance.executionId)
        own.interrupted = instance.interrupted
        const result: Workflow.Result<unknown, unknown> = yield* activity.executeEncoded.pipe(
          Workflow.intoResult,
          Effect.provideService(WorkflowEngine.WorkflowInstance, own)
        )
        if (Option.isSome(runs) && result._tag === "Complete" && Exit.isSuccess(result.exit)) {
          const saved = yield* Effect.either(runs.value.saveStep(instance.executionId, activity.name, attempt, result.exit.value))
          if (saved._tag === "Left") {
            storeFailure = saved.left
            return yield* Effect.die(new RunStoreFailed(saved.left))
          }
        }
        return result
      })

    const engine = WorkflowEngine.makeUnsafe({
      register: () => Effect.void,
      execute: () => Effect.dieMessage(`workflow ${workflow.name}: child workflows are not supported in a Kafka workflow yet`),
      poll: () => Effect.succeed(undefined),
      interrupt: () => Effect.void,
      resume: () => Effect.void,
      activityExecute: runActivity,
      // Nothing completes a deferred from outside a Kafka handler's run: awaiting one suspends.
      deferredResult: () => Effect.succeed(undefined),
      deferredDone: () => Effect.void,
      scheduleClock: () => Effect.void
    })

    const instance = WorkflowEngine.WorkflowInstance.initial(workflow, executionId)
    return body(payload, executionId).pipe(
      Workflow.intoResult,
      Effect.provideService(WorkflowEngine.WorkflowInstance, instance),
      Effect.provideService(WorkflowEngine.WorkflowEngine, engine),
      Effect.exit,
      Effect.flatMap((exit): Effect.Effect<Execution<Success["Type"], Error["Type"]>, RunStoreWriteError> => {
        if (storeFailure !== undefined) return Effect.fail(storeFailure)
        // The body interrupted itself (`Effect.interrupt`): nothing resumes it here, so it is a
        // suspended run, not an interruption of the handler (that one still interrupts this fiber).
        if (Exit.isFailure(exit)) {
          return Cause.isInterruptedOnly(exit.cause) ? Effect.succeed({ _tag: "Suspended" }) : Effect.failCause(exit.cause)
        }
        const result = exit.value
        return Effect.succeed(result._tag === "Suspended" ? { _tag: "Suspended" } : { _tag: "Complete", exit: result.exit })
      })
    ) as Effect.Effect<
      Execution<Success["Type"], Error["Type"]>,
      RunStoreWriteError,
      Exclude<R, WorkflowEngine.WorkflowEngine | WorkflowEngine.WorkflowInstance | Workflow.Execution<Name>>
    >
  })
