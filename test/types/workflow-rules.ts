/**
 * Type-level tests of a durable workflow's error rules, checked by `npm run
 * typecheck`: rules see only the workflow's own errors and `WorkflowSuspended`
 * (and `StateNotStorable` by its tag, as for any transformer). The run store's
 * errors are the runtime's (`Transformer.RuntimeError`): a rule for one of
 * their tags does not compile, and a predicate rule's error type does not
 * contain them. Each `@ts-expect-error` fails the type check if the line
 * below it compiles.
 */
import { Workflow } from "@effect/workflow"
import { Effect, Schema } from "effect"
import { ErrorRule, KafkaWorkflow, Topic } from "../../src/index.ts"
import type { SkeinError, Transformer } from "../../src/index.ts"

class Declined extends Schema.TaggedError<Declined>()("Declined", { order: Schema.String }) {}

const Ship = Workflow.make({
  name: "ship",
  payload: { order: Schema.String },
  success: Schema.String,
  error: Declined,
  idempotencyKey: (p) => p.order
})
const Orders = KafkaWorkflow.topic("orders", Ship)
const Shipped = Topic.make({ name: "shipped", key: Schema.String, value: Schema.String })

const base = {
  name: "shipping",
  input: Orders,
  workflow: Ship,
  execute: (payload: { readonly order: string }) => Effect.succeed(payload.order),
  emit: (result: string, record: { readonly key: string | null }) => [Topic.record(Shipped, record.key, result)]
}

/** The workflow's own errors, a suspended run and an unstorable result: rules for them compile. */
export const ownErrors = KafkaWorkflow.make({
  ...base,
  rules: [
    ErrorRule.tagged("Declined", { then: "dlq" }),
    ErrorRule.tagged("WorkflowSuspended", { then: "dlq" }),
    ErrorRule.tagged("StateNotStorable", { then: "dlq" }),
    ErrorRule.make({ when: (_: unknown) => true, then: "skip" })
  ]
})

export const diskError = KafkaWorkflow.make({
  ...base,
  rules: [
    // @ts-expect-error a disk error of the run store is the runtime's, not the workflow's
    ErrorRule.tagged("StateStoreError", { then: "skip" })
  ]
})

export const migrated = KafkaWorkflow.make({
  ...base,
  rules: [
    // @ts-expect-error a fenced run-store producer migrates the task; no rule sees it
    ErrorRule.tagged("TaskMigrated", { then: "skip" })
  ]
})

export const brokerError = KafkaWorkflow.make({
  ...base,
  rules: [
    // @ts-expect-error a broker error rewinds the partition; no rule sees it
    ErrorRule.tagged("KafkaError", { then: "dlq" })
  ]
})

export const storedResult = KafkaWorkflow.make({
  ...base,
  rules: [
    // @ts-expect-error a stored result the Schema no longer reads is fatal; no rule sees it
    ErrorRule.tagged("StoredStateInvalid", { then: "skip" })
  ]
})

/** A predicate rule over the handler's errors cannot even name a runtime error. */
export const predicate = (error: KafkaWorkflow.HandlerError<Declined>): boolean =>
  // @ts-expect-error the handler's error type has no StateStoreError
  error._tag === "StateStoreError"

/** The runtime's errors are the transform's, beside `E`: the transformer's error type is the workflow's own. */
export const errorType: Transformer.ErrorOf<typeof ownErrors> extends Declined | SkeinError.WorkflowSuspended ? true
  : never = true
