/**
 * Durable workflows on Kafka: an `@effect/workflow` workflow as the handler of
 * an input topic, run by Skein's runner with the contract of a transformer and
 * a run store of its own.
 *
 * - **Processing, exactly once** (`durable: true`, the default): a redelivered
 *   record whose run completed is not re-run; its result is read back from the
 *   run store. A record whose run is partial resumes: its completed activities
 *   return their stored results and do not run again. `durable: false` keeps no
 *   run store: the whole body re-runs on every retry and redelivery.
 * - **Output delivery** follows the runner's `processingGuarantee`:
 *   exactly-once (the default) commits a batch's outputs and offsets in one
 *   transaction; at-least-once produces, then commits offsets.
 * - **Poison**: a record that fails to decode (its value through the
 *   workflow's own payload schema) goes to the dead letter topic before the
 *   workflow runs; the run store never sees it.
 * - **Handler errors** (the workflow's errors, and `WorkflowSuspended`) go
 *   through the transformer's error rules: retry, then `dlq`, `skip` or `fail`.
 *   The run store's own errors (`Transformer.RuntimeError`) never reach a
 *   rule: a broker error rewinds the partition, a fenced run-store producer
 *   migrates the task, a disk error is fatal.
 * - **Results are checked before they are stored**: a result that does not
 *   decode back from its JSON (`Infinity` for `Schema.Number`) fails its
 *   record with `StateNotStorable` and stores nothing; a stored result that
 *   the success Schema no longer reads fails with `StoredStateInvalid`.
 *
 * The run store is a compacted topic (`{applicationId}-{name}-runs`, one
 * partition per input partition) written by a fenced transactional producer
 * per task, so a zombie's late step write is fenced; each task restores its
 * partition into a local store before its first record. A step's result is
 * durable before the workflow goes on; a run's completion is durable before
 * the batch that emits its outputs commits, and its outputs come from it.
 *
 * Write ordinary workflow code, with three rules of `@effect/workflow`:
 * activities are stored by name (two in one run with one name are an error),
 * code between activities re-runs on every resume (keep it pure), and
 * activities must not run concurrently (`Effect.all` with concurrency over
 * activities deadlocks on replay upstream). A run never waits inside a Kafka
 * handler: a durable sleep beyond the in-memory threshold, a deferred not yet
 * done or an interrupt fails the record with `WorkflowSuspended`.
 *
 * @since 0.3.0
 */
// Subpath imports: the package index re-exports WorkflowProxy, whose types need @effect/rpc (and DOM's Transferable).
import type * as Workflow from "@effect/workflow/Workflow"
import type * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import { Duration, Effect, Either, Exit, FiberRef, Option, Schema } from "effect"
import type { ParseResult } from "effect"
import * as Engine from "./internal/workflow/engine.ts"
import * as RunStore from "./internal/workflow/RunStore.ts"
import { EncodeError, StateNotStorable, StoredStateInvalid, WorkflowSuspended } from "./SkeinError.ts"
import * as Topic from "./Topic.ts"
import type { InputRecord, Rule, Transformer } from "./Transformer.ts"
import { defaultStateKey } from "./internal/runtime/StateKeyCheck.ts"

/**
 * The errors of a workflow's Kafka handler that its error rules see: the
 * workflow's own, and a suspended run. The run store's errors are the
 * runtime's (`Transformer.RuntimeError`): no rule sees them.
 *
 * @example
 * ```ts
 * import { ErrorRule } from "skein"
 * import type { KafkaWorkflow, Transformer } from "skein"
 *
 * class PaymentDeclined extends Error {
 *   readonly _tag = "PaymentDeclined"
 * }
 * // the rules of a workflow whose body fails with PaymentDeclined
 * const rules: ReadonlyArray<Transformer.Rule<KafkaWorkflow.HandlerError<PaymentDeclined>>> = [
 *   ErrorRule.tagged("PaymentDeclined", { then: "dlq" }),
 *   ErrorRule.tagged("WorkflowSuspended", { then: "dlq" })
 * ]
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export type HandlerError<E> = E | WorkflowSuspended

/** How long a completed run is remembered by default. */
const defaultRetention = Duration.days(7)

/** JSON text of any value, as the run store writes it (a value `JSON.stringify` rejects is a `ParseError`). */
const Json = Schema.parseJson()

/**
 * A topic whose values are a workflow's payload, as JSON decoded through the
 * workflow's own payload schema (the same decoding for a fresh record and for
 * a redelivered one). Keys are text.
 *
 * @example
 * ```ts
 * import { Workflow } from "@effect/workflow"
 * import { Schema } from "effect"
 * import { KafkaWorkflow } from "skein"
 *
 * const Ship = Workflow.make({ name: "ship", payload: { order: Schema.String }, idempotencyKey: (p) => p.order })
 * const Orders = KafkaWorkflow.topic("orders", Ship)
 * ```
 *
 * @since 0.3.0
 * @category constructors
 */
export const topic = <
  Name extends string,
  Payload extends Workflow.AnyStructSchema & Schema.Schema.AnyNoContext,
  Success extends Schema.Schema.Any,
  Error extends Schema.Schema.All
>(
  name: string,
  workflow: Workflow.Workflow<Name, Payload, Success, Error>
): Topic.Topic<string, Payload["Type"]> => Topic.make({ name, key: Schema.String, value: Topic.json(workflow.payloadSchema) })

/**
 * Declares a workflow as the handler of `input`: the runner runs it once per
 * record (the execution id is the workflow's, from its `idempotencyKey`), and
 * `emit` turns a completed run's result into records to produce.
 *
 * @example
 * ```ts
 * import { Activity, Workflow } from "@effect/workflow"
 * import { Effect, Schema } from "effect"
 * import { KafkaWorkflow, Runner, Topic } from "skein"
 *
 * const Ship = Workflow.make({
 *   name: "ship",
 *   payload: { order: Schema.String },
 *   success: Schema.String,
 *   idempotencyKey: (p) => p.order
 * })
 * const Shipped = Topic.make({ name: "shipped", key: Schema.String, value: Schema.String })
 *
 * const Shipping = KafkaWorkflow.make({
 *   name: "shipping",
 *   input: KafkaWorkflow.topic("orders", Ship),
 *   workflow: Ship,
 *   execute: (payload) =>
 *     Effect.gen(function*() {
 *       const label = yield* Activity.make({ name: "label", success: Schema.String, execute: Effect.succeed(`label-${payload.order}`) })
 *       return yield* Activity.make({ name: "pickup", success: Schema.String, execute: Effect.succeed(`${label}-picked`) })
 *     }),
 *   emit: (result, record) => [Topic.record(Shipped, record.key, result)]
 * })
 *
 * Runner.run(Shipping) // a Transformer: Runner.run, runAll and TestDriver take it
 * ```
 *
 * @since 0.3.0
 * @category constructors
 */
export const make = <
  Name extends string,
  Payload extends Workflow.AnyStructSchema,
  Success extends Schema.Schema.Any,
  Error extends Schema.Schema.All,
  R = never
>(options: {
  readonly name: string
  readonly input: Topic.Topic<string, Payload["Type"]>
  readonly workflow: Workflow.Workflow<Name, Payload, Success, Error>
  /** The workflow's body: what `workflow.toLayer` would take. */
  readonly execute: (payload: Payload["Type"], executionId: string) => Effect.Effect<Success["Type"], Error["Type"], R>
  /** The records a completed run produces (its result as read back from the run store). */
  readonly emit: (result: Success["Type"], record: InputRecord<string, Payload["Type"]>) => ReadonlyArray<Topic.OutputRecord>
  /** Keep a run store (default `true`); `false` re-runs the whole body on every retry and redelivery. */
  readonly durable?: boolean
  /**
   * How long a completed run is remembered (default 7 days): a redelivery
   * within it is read back, after it the record would run again. Keep it
   * above the input topic's retention to never run a record twice.
   */
  readonly retention?: Duration.DurationInput
  readonly rules?: ReadonlyArray<Rule<NoInfer<HandlerError<Error["Type"]>>>>
}): Transformer<
  [Topic.Topic<string, Payload["Type"]>],
  never,
  HandlerError<Error["Type"]>,
  | Exclude<R, WorkflowEngine.WorkflowEngine | WorkflowEngine.WorkflowInstance | Workflow.Execution<Name>>
  | Success["Context"]
> => {
  const { emit, execute, workflow } = options
  const durable = options.durable ?? true
  const success = workflow.successSchema as Schema.Schema<Success["Type"], Success["Encoded"], Success["Context"]>
  const encode = (value: Success["Type"]) =>
    Effect.mapError(Schema.encode(success)(value), (cause) => new EncodeError({ topic: `result of workflow ${workflow.name}`, cause }))
  /** A stored result, read with today's success Schema. */
  const decodeStored = (stored: unknown, executionId: string, partition: number, store: string) =>
    Effect.mapError(
      Schema.decodeUnknown(success)(stored),
      (cause) => new StoredStateInvalid({ transformer: options.name, kind: "workflow result", key: executionId, partition, store, cause })
    )
  /** A new result as it will be read back from the run store: one that does not is never stored. */
  const readBack = (encoded: unknown, executionId: string, source: InputRecord<string, Payload["Type"]>) => {
    const notStorable = (cause: ParseResult.ParseError) =>
      new StateNotStorable({
        transformer: options.name,
        kind: "workflow result",
        key: executionId,
        source: { topic: source.topic, partition: source.partition, offset: source.offset },
        cause
      })
    const json = Either.flatMap(Schema.encodeEither(Json)(encoded ?? null), Schema.decodeEither(Json))
    return Either.isLeft(json)
      ? Effect.fail(notStorable(json.left))
      : Effect.mapError(Schema.decodeUnknown(success)(json.right), notStorable)
  }
  return {
    name: options.name,
    inputs: [options.input],
    state: Option.none(),
    stateKey: defaultStateKey,
    ...(durable
      ? {
        runStore: {
          retention: Duration.decode(options.retention ?? defaultRetention),
          runOf: (record: InputRecord<string, Payload["Type"]>) => workflow.executionId(record.value)
        }
      }
      : {}),
    rules: options.rules ?? [],
    transform: (record) =>
      Effect.gen(function*() {
        const payload = record.value
        const executionId = yield* workflow.executionId(payload)
        const runs = durable ? yield* FiberRef.get(RunStore.current) : Option.none<RunStore.RunStore>()
        if (Option.isSome(runs)) {
          const done = yield* runs.value.completed(executionId)
          if (Option.isSome(done)) {
            return { emit: emit(yield* decodeStored(done.value, executionId, record.partition, runs.value.topic), record) }
          }
        }
        const run = yield* Engine.execute(workflow, execute, payload, executionId, runs)
        if (run._tag === "Suspended") {
          return yield* Effect.fail(new WorkflowSuspended({ workflow: workflow.name, executionId, topic: record.topic, partition: record.partition, offset: record.offset }))
        }
        if (Exit.isFailure(run.exit)) return yield* Effect.failCause(run.exit.cause)
        // The outputs come from the result as stored (checked before it is): a redelivery emits the same records.
        const encoded = yield* encode(run.exit.value)
        const result = yield* readBack(encoded, executionId, record)
        if (Option.isSome(runs)) yield* runs.value.complete(executionId, encoded)
        return { emit: emit(result, record) }
      })
  }
}
