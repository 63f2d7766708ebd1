/**
 * The errors a Skein runtime can fail with.
 *
 * Recoverable errors (`TaskMigrated`) are handled by the runtime itself and
 * never end a run; every other error here is fatal and ends the run with a
 * precise, typed reason.
 *
 * @since 0.1.0
 */
import { Data } from "effect"
import type { ParseResult } from "effect"
import { bounded, describe, formatParseError } from "./internal/util/errorText.ts"

/**
 * A failure talking to Kafka. `reason` classifies it; `cause` keeps the
 * original client error.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner, SkeinError } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("KafkaError", (error: SkeinError.KafkaError) =>
 *     Effect.logError(`Kafka ${error.operation} failed (${error.reason})`, error.cause)
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class KafkaError extends Data.TaggedError("KafkaError")<{
  readonly reason: "Fenced" | "Timeout" | "Connection" | "Protocol" | "Crashed" | "Unknown"
  readonly operation: string
  readonly cause: unknown
}> {
  override get message(): string {
    return `Kafka ${this.operation} failed (${this.reason}): ${detailOf(this.cause)}`
  }
}

/** A cause's message; one that gathers answers (kafkajs's "Topic creation errors") names the first few, with their topics. */
const detailOf = (cause: unknown): string => {
  const detail = cause instanceof Error ? cause.message : String(cause)
  const errors: unknown = typeof cause === "object" && cause !== null && "errors" in cause ? cause.errors : undefined
  if (!Array.isArray(errors) || errors.length === 0) return detail
  const each = errors.slice(0, 3).map((error: unknown) => {
    const topic: unknown = typeof error === "object" && error !== null && "topic" in error ? error.topic : undefined
    const message = error instanceof Error ? error.message : String(error)
    return typeof topic === "string" ? `${topic}: ${message}` : message
  })
  return `${detail} (${each.join("; ")}${errors.length > 3 ? `; and ${errors.length - 3} more` : ""})`
}

/**
 * A live member's task lost its partition: its transaction was fenced by a
 * newer owner of the same transactional id. The runtime aborts, tears the
 * task down and rejoins the group (Kafka Streams' TaskMigratedException).
 * Recoverable: it never ends a run.
 *
 * @example
 * ```ts
 * import { SkeinError } from "skein"
 *
 * // Handled inside the runner: `Runner.run` never fails with it.
 * const migrated = new SkeinError.TaskMigrated({ partition: 3, cause: fencedError })
 * migrated.message // "Task 3 was fenced by a newer owner; it migrated to another instance"
 * SkeinError.isSkeinError(migrated) // false: not a RunnerError
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class TaskMigrated extends Data.TaggedError("TaskMigrated")<{
  readonly partition: number
  readonly cause: unknown
}> {
  override get message(): string {
    return `Task ${this.partition} was fenced by a newer owner; it migrated to another instance`
  }
}

/**
 * A durable workflow's run paused (a durable sleep beyond the in-memory
 * threshold, a `DurableDeferred` not yet done, an interrupt): nothing resumes
 * a run inside a Kafka handler, so the record fails at once instead of
 * stalling its partition. The transformer's error rules decide what follows
 * (retry, then `dlq`, `skip` or `fail`).
 *
 * @example
 * ```ts
 * import { ErrorRule } from "skein"
 *
 * const rules = [ErrorRule.tagged("WorkflowSuspended", { then: "dlq" })]
 * ```
 *
 * @since 0.3.0
 * @category errors
 */
export class WorkflowSuspended extends Data.TaggedError("WorkflowSuspended")<{
  readonly workflow: string
  readonly executionId: string
  readonly topic: string
  readonly partition: number
  readonly offset: number
}> {
  override get message(): string {
    return `Workflow ${this.workflow} (execution ${this.executionId}) paused at ${this.topic}/${this.partition}@${this.offset}: ` +
      `a Kafka handler's run cannot wait (a durable sleep, a deferred, an interrupt). ` +
      `Sleep at most the in-memory threshold (DurableClock.sleep's inMemoryThreshold), or route the record with an ErrorRule for "WorkflowSuspended"`
  }
}

/**
 * An agent's run used all of its `maxTurns` LLM turns and its last turn still
 * called tools (`KafkaAgent`): the loop stops instead of calling the model
 * again. The record fails with it; the transformer's error rules decide what
 * follows. A retry replays the stored turns and fails the same way without an
 * LLM call, so route it to the dead letter topic or raise `maxTurns`.
 *
 * @example
 * ```ts
 * import { ErrorRule } from "skein"
 *
 * const rules = [ErrorRule.tagged("AgentMaxTurnsExceeded", { then: "dlq" })]
 * ```
 *
 * @since 0.3.0
 * @category errors
 */
export class AgentMaxTurnsExceeded extends Data.TaggedError("AgentMaxTurnsExceeded")<{
  readonly agent: string
  readonly maxTurns: number
  readonly executionId: string
  readonly topic: string
  readonly partition: number
  readonly offset: number
}> {
  override get message(): string {
    const turns = this.maxTurns === 1 ? "its 1 turn" : `all ${this.maxTurns} turns`
    return `Agent ${this.agent} used ${turns} on ${this.topic}/${this.partition}@${this.offset} ` +
      `(execution ${this.executionId}) and its last turn still called tools. ` +
      `Raise maxTurns in KafkaAgent.make, or route the record with an ErrorRule for "AgentMaxTurnsExceeded" ` +
      `(then: "dlq" with a dead letter topic)`
  }
}

/**
 * A tool's handler failed in an agent's run (`KafkaAgent`), for a tool whose
 * `failureMode` is `"error"` (the default of `Tool.make`); `cause` is the
 * handler's own error. The record fails with it and the transformer's error
 * rules decide what follows: a retry resumes the run, so only this tool call
 * runs again (the turns and tool calls before it are stored). A tool with
 * `failureMode: "return"` never fails this way: its failure is stored as its
 * result and the model sees it on the next turn.
 *
 * @example
 * ```ts
 * import { Schedule } from "effect"
 * import { ErrorRule } from "skein"
 *
 * const rules = [ErrorRule.tagged("AgentToolFailed", { retry: Schedule.recurs(3), then: "dlq" })]
 * ```
 *
 * @since 0.3.0
 * @category errors
 */
export class AgentToolFailed extends Data.TaggedError("AgentToolFailed")<{
  readonly agent: string
  readonly tool: string
  /** The model's id of the tool call. */
  readonly callId: string
  /** The turn whose response made the call (from 1). */
  readonly turn: number
  readonly topic: string
  readonly partition: number
  readonly offset: number
  readonly cause: unknown
}> {
  override get message(): string {
    return `Tool ${this.tool} of agent ${this.agent} failed (turn ${this.turn}, call ${this.callId}, ` +
      `${this.topic}/${this.partition}@${this.offset}): ${describe(this.cause)}. ` +
      `Retry it with an ErrorRule for "AgentToolFailed", or give the tool failureMode "return" so that the model sees the failure`
  }
}

/**
 * The input topics of a transformer have different partition counts.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("PartitionCountMismatch", (error) =>
 *     Effect.logError(error.counts.map(({ topic, partitions }) => `${topic}: ${partitions}`).join(", "))
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class PartitionCountMismatch extends Data.TaggedError("PartitionCountMismatch")<{
  readonly counts: ReadonlyArray<{ readonly topic: string; readonly partitions: number }>
}> {
  override get message(): string {
    const list = this.counts.map((c) => `${c.topic}=${c.partitions}`).join(", ")
    return `Input topics must have equal partition counts, found ${list}. ` +
      `Repartition the topics so that every input topic has the same number of partitions.`
  }
}

/**
 * An existing changelog topic has a partition count other than the inputs'.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("ChangelogPartitionMismatch", (error) =>
 *     Effect.logError(`${error.changelog}: ${error.actual} partitions, inputs have ${error.expected}`)
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ChangelogPartitionMismatch extends Data.TaggedError("ChangelogPartitionMismatch")<{
  readonly changelog: string
  readonly expected: number
  readonly actual: number
}> {
  override get message(): string {
    return `Changelog topic ${this.changelog} has ${this.actual} partitions but the input topics have ` +
      `${this.expected}. Repartitioning requires a state migration: use a new applicationId or ` +
      `migrate the state, then delete ${this.changelog}.`
  }
}

/**
 * A topic the runtime needs does not exist.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("TopicNotFound", (error) => Effect.logError(`create ${error.topic} first`))
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class TopicNotFound extends Data.TaggedError("TopicNotFound")<{
  readonly topic: string
}> {
  override get message(): string {
    return `Topic ${this.topic} does not exist. Create it (the runtime never auto-creates input topics).`
  }
}

/**
 * A record's key or value does not match its topic's Schema (a poison record).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * // Without a deadLetterTopic, a poison record ends the run with it.
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("DecodeError", (error) =>
 *     Effect.logError(`poison ${error.part} at ${error.topic}/${error.partition}@${error.offset}`)
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class DecodeError extends Data.TaggedError("DecodeError")<DecodeError.Fields> {
  constructor(fields: DecodeError.Fields) {
    // The cause's texts are bounded: it embeds untrusted input (see internal/util/errorText.ts).
    super({ ...fields, cause: bounded(fields.cause) })
  }
  /** At most about 1 KiB, whatever the record (never throws). */
  override get message(): string {
    return `Cannot decode the ${this.part} of ${this.topic}/${this.partition}@${this.offset}: ${formatParseError(this.cause)}`
  }
}

/**
 * The types of `DecodeError`.
 *
 * @example
 * ```ts
 * import { SkeinError } from "skein"
 *
 * const where = (fields: SkeinError.DecodeError.Fields): string =>
 *   `${fields.topic}/${fields.partition}@${fields.offset}`
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export declare namespace DecodeError {
  /**
   * What a `DecodeError` carries: the record's position, the part that failed
   * to decode and the Schema's `ParseError`.
   *
   * @example
   * ```ts
   * import { SkeinError } from "skein"
   *
   * const where = ({ topic, partition, offset, part }: SkeinError.DecodeError.Fields): string =>
   *   `the ${part} of ${topic}/${partition}@${offset}`
   * ```
   *
   * @since 0.1.0
   * @category errors
   */
  export interface Fields {
    readonly topic: string
    readonly partition: number
    readonly offset: number
    readonly part: "key" | "value"
    readonly cause: ParseResult.ParseError
  }
}

/**
 * An output record or a state value does not match its Schema.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("EncodeError", (error) =>
 *     Effect.logError(`an output for ${error.topic} does not encode`, error.cause)
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class EncodeError extends Data.TaggedError("EncodeError")<EncodeError.Fields> {
  constructor(fields: EncodeError.Fields) {
    super({ ...fields, cause: bounded(fields.cause) })
  }
  /** At most about 1 KiB, whatever the output (never throws). */
  override get message(): string {
    return `Cannot encode a record for ${this.topic}: ${formatParseError(this.cause)}`
  }
}

/**
 * The types of `EncodeError`.
 *
 * @example
 * ```ts
 * import { SkeinError } from "skein"
 *
 * const topicOf = (fields: SkeinError.EncodeError.Fields): string => fields.topic
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export declare namespace EncodeError {
  /**
   * What an `EncodeError` carries: the topic written to and the Schema's
   * `ParseError`.
   *
   * @example
   * ```ts
   * import { ParseResult } from "effect"
   * import { SkeinError } from "skein"
   *
   * const describe = ({ topic, cause }: SkeinError.EncodeError.Fields): string =>
   *   `${topic}: ${ParseResult.TreeFormatter.formatErrorSync(cause)}`
   * ```
   *
   * @since 0.1.0
   * @category errors
   */
  export interface Fields {
    readonly topic: string
    readonly cause: ParseResult.ParseError
  }
}

/**
 * The local state store failed.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("StateStoreError", (error) =>
 *     Effect.logError(`state store ${error.operation} at ${error.path} failed`, error.cause)
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class StateStoreError extends Data.TaggedError("StateStoreError")<{
  readonly operation: string
  readonly path: string
  readonly cause: unknown
}> {
  override get message(): string {
    const detail = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `State store ${this.operation} at ${this.path} failed: ${detail}`
  }
}

/**
 * A new state (or a durable workflow's result) does not decode back from the
 * JSON it would be stored as: `Schema.Number` accepts `NaN` and `Infinity`,
 * which JSON writes as `null`, and a Schema whose decode is not the inverse
 * of its encode loses the value the same way. Raised as the failure of the
 * record that produced the value, before anything of it is committed, so the
 * key keeps its last stored state; an error rule for its tag can take it
 * (`ErrorRule.tagged("StateNotStorable", { then: "dlq" })`); unhandled, it is
 * fatal.
 *
 * @example
 * ```ts
 * import { ErrorRule } from "skein"
 *
 * const rules = [ErrorRule.tagged("StateNotStorable", { then: "dlq" })]
 * ```
 *
 * @since 0.3.0
 * @category errors
 */
export class StateNotStorable extends Data.TaggedError("StateNotStorable")<StateNotStorable.Fields> {
  constructor(fields: StateNotStorable.Fields) {
    super({ ...fields, cause: bounded(fields.cause) })
  }
  /** At most about 1 KiB, whatever the value (never throws). */
  override get message(): string {
    const what = this.kind === "state" ? `The new state of key ${this.key}` : `The result of run ${this.key}`
    return `${what} (${this.transformer}, from ${this.source.topic}/${this.source.partition}@${this.source.offset}) ` +
      `does not decode back from the JSON it is stored as: ${formatParseError(this.cause)}. JSON has no NaN or ` +
      `Infinity (they are stored as null). Return a value the Schema reads back, or route the record with ` +
      `ErrorRule.tagged("StateNotStorable", { then: "dlq" }).`
  }
}

/**
 * The types of `StateNotStorable`.
 *
 * @example
 * ```ts
 * import { SkeinError } from "skein"
 *
 * const where = (fields: SkeinError.StateNotStorable.Fields): string => `${fields.kind} of ${fields.key}`
 * ```
 *
 * @since 0.3.0
 * @category errors
 */
export declare namespace StateNotStorable {
  /**
   * What a `StateNotStorable` carries: the transformer, what was stored (a
   * state, or a workflow run's result), its key (the state key, or the run's
   * execution id), the record that produced it and the decode's `ParseError`.
   *
   * @example
   * ```ts
   * import { SkeinError } from "skein"
   *
   * const where = ({ key, source }: SkeinError.StateNotStorable.Fields): string =>
   *   `${key} from ${source.topic}/${source.partition}@${source.offset}`
   * ```
   *
   * @since 0.3.0
   * @category errors
   */
  export interface Fields {
    readonly transformer: string
    readonly kind: "state" | "workflow result"
    readonly key: string
    readonly source: { readonly topic: string; readonly partition: number; readonly offset: number }
    readonly cause: ParseResult.ParseError
  }
}

/**
 * A stored state (or a durable workflow's stored result) does not decode
 * with the current Schema: the Schema changed incompatibly, or the value was
 * stored before Skein checked values (a `NaN` stored as `null`). Fatal; not
 * seen by error rules. The message names the key, the partition and the fix.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("StoredStateInvalid", (error) =>
 *     Effect.logError(`key ${error.key} of partition ${error.partition} needs a migration`)
 *   )
 * )
 * ```
 *
 * @since 0.3.0
 * @category errors
 */
export class StoredStateInvalid extends Data.TaggedError("StoredStateInvalid")<StoredStateInvalid.Fields> {
  constructor(fields: StoredStateInvalid.Fields) {
    super({ ...fields, cause: bounded(fields.cause) })
  }
  /** At most about 1 KiB, whatever the value (never throws). */
  override get message(): string {
    const what = this.kind === "state" ? `state of key ${this.key}` : `result of run ${this.key}`
    const reset = this.kind === "state"
      ? `or start from empty state (a new applicationId, or delete the changelog topic and the state directory)`
      : `or forget the stored runs (a new applicationId, or delete the run-store topic and the state directory)`
    return `The stored ${what} in partition ${this.partition} (${this.transformer}, in ${this.store}) does not ` +
      `decode with the current Schema: ${formatParseError(this.cause)}. The Schema changed incompatibly, or the value ` +
      `was stored before Skein checked values (NaN or Infinity stored as null). Make the Schema read the stored form ` +
      `(a Schema.Union of the old and new forms, or a Schema.transform from the old one), ${reset}.`
  }
}

/**
 * The types of `StoredStateInvalid`.
 *
 * @example
 * ```ts
 * import { SkeinError } from "skein"
 *
 * const where = (fields: SkeinError.StoredStateInvalid.Fields): string => `${fields.key}@${fields.partition}`
 * ```
 *
 * @since 0.3.0
 * @category errors
 */
export declare namespace StoredStateInvalid {
  /**
   * What a `StoredStateInvalid` carries: the transformer, what was stored,
   * its key (the state key, or the run's execution id), the partition, where
   * it is stored (the local store's path, or the run-store topic) and the
   * decode's `ParseError`.
   *
   * @example
   * ```ts
   * import { SkeinError } from "skein"
   *
   * const where = ({ key, partition, store }: SkeinError.StoredStateInvalid.Fields): string => `${key}@${partition} in ${store}`
   * ```
   *
   * @since 0.3.0
   * @category errors
   */
  export interface Fields {
    readonly transformer: string
    readonly kind: "state" | "workflow result"
    readonly key: string
    readonly partition: number
    readonly store: string
    readonly cause: ParseResult.ParseError
  }
}

/**
 * The committed offset of a partition is no longer readable: deleted by
 * retention (before `earliest`), or beyond the partition's `end` (an unclean
 * leader election truncated the log, or the offsets were set past it). The
 * runtime never silently resets an offset.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("OffsetOutOfRange", (error) =>
 *     Effect.logError(`${error.topic}/${error.partition}: committed ${error.committed}, earliest ${error.earliest}`)
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class OffsetOutOfRange extends Data.TaggedError("OffsetOutOfRange")<{
  readonly topic: string
  readonly partition: number
  readonly committed: number
  readonly earliest: number
  /** The partition's end offset, set when the committed offset is beyond it. */
  readonly end?: number | undefined
}> {
  override get message(): string {
    const reset = "Reset the group's offsets deliberately (kafka-consumer-groups --reset-offsets) to continue."
    if (this.end !== undefined && this.committed > this.end) {
      return `Committed offset ${this.committed} of ${this.topic}/${this.partition} is beyond the end offset ` +
        `${this.end}: the log was truncated below it (an unclean leader election) or the offsets were set past ` +
        `its end, and records written there later would be skipped. ${reset}`
    }
    return `Committed offset ${this.committed} of ${this.topic}/${this.partition} is before the earliest ` +
      `available offset ${this.earliest}: records were deleted before they were processed. ${reset}`
  }
}

/**
 * The query endpoint (`queryPort`) could not listen on its port. `reason`
 * classifies the cause; the message says which setting to change.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("QueryServerError", (error) => Effect.logError(error.message))
 * )
 * ```
 *
 * @since 0.5.0
 * @category errors
 */
export class QueryServerError extends Data.TaggedError("QueryServerError")<{
  readonly reason: "PortInUse" | "PermissionDenied" | "AddressUnavailable" | "Unknown"
  readonly port: number
  readonly host: string
  readonly cause: unknown
}> {
  override get message(): string {
    const where = `${this.host}:${this.port}`
    const fix = "Set queryPort in SkeinConfig (or SKEIN_QUERY_PORT)"
    switch (this.reason) {
      case "PortInUse":
        return `The query endpoint cannot listen on ${where}: the port is already in use. ` +
          `${fix} to a free port (0 picks any free port), or unset it to run without the endpoint.`
      case "PermissionDenied":
        return `The query endpoint cannot listen on ${where}: permission denied. ${fix} to a port above 1023.`
      case "AddressUnavailable":
        return `The query endpoint cannot listen on ${where}: the address is not available on this machine. ` +
          "Set queryHost (SKEIN_QUERY_HOST) to a local address."
      case "Unknown": {
        const detail = this.cause instanceof Error ? this.cause.message : String(this.cause)
        return `The query endpoint cannot listen on ${where}: ${detail}. Check queryPort and queryHost.`
      }
    }
  }
}

/**
 * The health endpoint could not listen on its port. `reason` classifies the
 * cause; the message says which setting to change.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("HealthServerError", (error) =>
 *     error.reason === "PortInUse" ? Effect.logError(`port ${error.port} is taken`) : Effect.fail(error)
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class HealthServerError extends Data.TaggedError("HealthServerError")<{
  readonly reason: "PortInUse" | "PermissionDenied" | "AddressUnavailable" | "Unknown"
  readonly port: number
  readonly host: string | undefined
  readonly cause: unknown
}> {
  override get message(): string {
    const where = this.host === undefined ? `port ${this.port}` : `${this.host}:${this.port}`
    const fix = "Set healthPort in SkeinConfig (or SKEIN_HEALTH_PORT)"
    switch (this.reason) {
      case "PortInUse":
        return `The health endpoint cannot listen on ${where}: the port is already in use. ` +
          `${fix} to a free port (0 picks any free port), or unset it to run without the endpoint.`
      case "PermissionDenied":
        return `The health endpoint cannot listen on ${where}: permission denied. ` +
          `${fix} to a port above 1023.`
      case "AddressUnavailable":
        return `The health endpoint cannot listen on ${where}: the address is not available on this machine. ` +
          `Listen on a local address, or unset the host.`
      case "Unknown": {
        const detail = this.cause instanceof Error ? this.cause.message : String(this.cause)
        return `The health endpoint cannot listen on ${where}: ${detail}. Check healthPort (SKEIN_HEALTH_PORT).`
      }
    }
  }
}

/**
 * The runtime is configured in a way that cannot work; the message says how
 * to fix it.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("ConfigurationError", (error) => Effect.logError(error.problem, error.fix))
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ConfigurationError extends Data.TaggedError("ConfigurationError")<{
  readonly problem: string
  readonly fix: string
}> {
  override get message(): string {
    return `${this.problem}. ${this.fix}`
  }
}

/**
 * A stream record's event time is negative: the record's own timestamp, or
 * what the source's timestamp extractor returned (`KStream.fromTopics`). A
 * record error: the transformer's rules handle it (`ErrorRule.tagged
 * ("InvalidTimestamp", { then: "dlq" })` sends it to the dead letter topic);
 * without a rule it ends the run, as Kafka Streams' default
 * `FailOnInvalidTimestamp` does.
 *
 * @example
 * ```ts
 * import { ErrorRule } from "skein"
 *
 * const rules = [ErrorRule.tagged("InvalidTimestamp", { then: "dlq" })]
 * ```
 *
 * @since 0.4.0
 * @category errors
 */
export class InvalidTimestamp extends Data.TaggedError("InvalidTimestamp")<{
  readonly topic: string
  readonly partition: number
  readonly offset: number
  readonly timestamp: number
}> {
  override get message(): string {
    return `${this.topic}/${this.partition}@${this.offset} has the event time ${this.timestamp}, which is negative: ` +
      "give the source a timestamp extractor that returns milliseconds since the epoch (KStream.fromTopics)"
  }
}

/**
 * A function given to a stream operator threw on a record: a `groupBy` or
 * `selectKey` key function, a `map`, `filter` or `flatMap` function (or one
 * building its effect), a source's timestamp extractor, an aggregation's
 * `add`, `combine` or `merge`. A record error, as a typed failure of an
 * effectful operator is: the topology's rules handle it
 * (`ErrorRule.tagged("OperatorFailed", { then: "dlq" })` sends the record to
 * the dead letter topic, whose `skein.error` header then carries this
 * message); without a rule it ends the run. Nothing of the record commits.
 *
 * @example
 * ```ts
 * import { ErrorRule, Topology } from "skein"
 *
 * Topology.run(topology, { rules: [ErrorRule.tagged("OperatorFailed", { then: "dlq" })] })
 * ```
 *
 * @since 0.4.0
 * @category errors
 */
export class OperatorFailed extends Data.TaggedError("OperatorFailed")<{
  /** The operator's name, as `Topology.describe` prints it. */
  readonly operator: string
  /** What the operator is (`selectKey`, `map`, `aggregate`, `timestamp extractor`, ...). */
  readonly kind: string
  readonly source: { readonly topic: string; readonly partition: number; readonly offset: number }
  /** What the function threw. */
  readonly cause: unknown
}> {
  override get message(): string {
    return `The ${this.kind} function of the operator ${this.operator} threw on ` +
      `${this.source.topic}/${this.source.partition}@${this.source.offset}: ${thrownText(this.cause)}. ` +
      "Make the function total (return a value for every record), or add an error rule for OperatorFailed " +
      "(e.g. to the dead letter topic)"
  }
}

/** What a function threw, as short text (never throws). */
const thrownText = (cause: unknown): string => {
  try {
    const text = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause)
    return text.length > 300 ? `${text.slice(0, 300)}…` : text
  } catch {
    return "a value that cannot be shown"
  }
}

/**
 * A stream record arrived after every window it belongs to had closed
 * (stream time had passed the window's end plus its grace), for a windowed
 * aggregation whose `late` option is `"error"`: the rules decide (the dead
 * letter topic's `skein.error` header then carries this message). With the
 * default (`"drop"`) late records are dropped, logged and counted
 * (`skein_streams_late_records_total`), as Kafka Streams drops them.
 *
 * @example
 * ```ts
 * import { ErrorRule } from "skein"
 *
 * const rules = [ErrorRule.tagged("LateRecord", { then: "dlq" })]
 * ```
 *
 * @since 0.4.0
 * @category errors
 */
export class LateRecord extends Data.TaggedError("LateRecord")<{
  readonly operator: string
  readonly timestamp: number
  readonly streamTime: number
  readonly graceMs: number
}> {
  override get message(): string {
    return `late record: event time ${this.timestamp} is past the grace period (${this.graceMs} ms) of every window ` +
      `of ${this.operator} it belongs to (stream time ${this.streamTime})`
  }
}

/**
 * An output record is larger than the producer's `maxMessageBytes` or its
 * topic's `max.message.bytes`. Raised as the transform's failure before the
 * record reaches the transaction, so an error rule can handle it
 * (`ErrorRule.tagged("OutputTooLarge", { then: "dlq" })`); unhandled, it is
 * fatal.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ErrorRule, Topic, Transformer } from "skein"
 *
 * const Enrich = Transformer.stateless({
 *   name: "enrich",
 *   inputs: [Orders],
 *   rules: [ErrorRule.tagged("OutputTooLarge", { then: "dlq" })],
 *   transform: (order) => Effect.succeed({ emit: [Topic.record(Enriched, order.key, order.value)] })
 * })
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class OutputTooLarge extends Data.TaggedError("OutputTooLarge")<{
  readonly topic: string
  readonly bytes: number
  readonly limit: number
  readonly source: { readonly topic: string; readonly partition: number; readonly offset: number }
}> {
  override get message(): string {
    return `An output for ${this.topic} of ${this.bytes} bytes exceeds the limit of ${this.limit} bytes ` +
      `(from ${this.source.topic}/${this.source.partition}@${this.source.offset}). Make the output smaller, ` +
      `raise the topic's max.message.bytes and SkeinConfig.maxMessageBytes, or add an error rule for OutputTooLarge.`
  }
}

/**
 * An output record names a partition its topic does not have (its topic has
 * `partitions` partitions, numbered from 0). Raised as the transform's
 * failure before the record reaches the transaction, so an error rule can
 * handle it (`ErrorRule.tagged("PartitionOutOfRange", { then: "dlq" })`);
 * unhandled, it is fatal.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ErrorRule, Topic, Transformer } from "skein"
 *
 * const Route = Transformer.stateless({
 *   name: "route",
 *   inputs: [Orders],
 *   rules: [ErrorRule.tagged("PartitionOutOfRange", { then: "dlq" })],
 *   transform: (order) =>
 *     Effect.succeed({ emit: [Topic.record(Routed, order.key, order.value, undefined, { partition: order.value.region })] })
 * })
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export class PartitionOutOfRange extends Data.TaggedError("PartitionOutOfRange")<{
  readonly topic: string
  readonly partition: number
  readonly partitions: number
  readonly source: { readonly topic: string; readonly partition: number; readonly offset: number }
}> {
  override get message(): string {
    return `An output for ${this.topic} names partition ${this.partition}, but the topic has ${this.partitions} ` +
      `(0 to ${this.partitions - 1}) (from ${this.source.topic}/${this.source.partition}@${this.source.offset}). ` +
      `Pick a partition the topic has, add partitions to it, or add an error rule for PartitionOutOfRange.`
  }
}

/**
 * An output record's timestamp lies further from the present than its topic
 * accepts: more than `message.timestamp.after.max.ms` ahead of the clock
 * (`bound: "after"`; Kafka 4's default is one hour) or more than
 * `message.timestamp.before.max.ms` behind it (`bound: "before"`). The broker
 * would refuse the record, and retrying would not help, so it is raised as
 * the transform's failure before the record reaches the transaction: an error
 * rule can handle it (`ErrorRule.tagged("TimestampOutOfRange", { then: "dlq" })`);
 * unhandled, it is fatal. In a topology, an output carries its record's event
 * time (its source's timestamp extractor's), repartition topics included.
 *
 * @example
 * ```ts
 * import { ErrorRule, Topology } from "skein"
 *
 * Topology.run(topology, { rules: [ErrorRule.tagged("TimestampOutOfRange", { then: "dlq" })] })
 * ```
 *
 * @since 0.4.0
 * @category errors
 */
export class TimestampOutOfRange extends Data.TaggedError("TimestampOutOfRange")<{
  readonly topic: string
  readonly timestamp: number
  /** The clock when the output was checked (milliseconds since the epoch). */
  readonly now: number
  /** Which of the topic's limits the timestamp is past. */
  readonly bound: "after" | "before"
  /** The topic's `message.timestamp.{bound}.max.ms`. */
  readonly limitMs: number
  readonly source: { readonly topic: string; readonly partition: number; readonly offset: number }
}> {
  override get message(): string {
    const config = `message.timestamp.${this.bound}.max.ms`
    const distance = this.bound === "after" ? this.timestamp - this.now : this.now - this.timestamp
    return `An output for ${this.topic} has the timestamp ${this.timestamp} (${isoTime(this.timestamp)}), ` +
      `${distance} ms ${this.bound === "after" ? "ahead of" : "behind"} the clock (${isoTime(this.now)}): past the topic's ` +
      `${config} of ${this.limitMs} ms, so the broker would refuse it (from ${this.source.topic}/${this.source.partition}@${this.source.offset}). ` +
      `Keep timestamps (a topology's event times, from its timestamp extractor) within ${this.limitMs} ms of the present, ` +
      `raise the topic's ${config}, or add an error rule for TimestampOutOfRange (e.g. to the dead letter topic).`
  }
}

/** A time as ISO 8601 text, or a note when it is beyond what a Date holds. */
const isoTime = (millis: number): string =>
  Number.isFinite(millis) && Math.abs(millis) <= 8.64e15 ? new Date(millis).toISOString() : "not a representable date"

/**
 * Delivering a partition's work failed `attempts` times in a row (a produce,
 * an offset commit or a transaction failed; each failure rewound the
 * partition to its last committed offset and retried after a backoff).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("DeliveryFailed", (error) =>
 *     Effect.logError(`task ${error.partition}: ${error.attempts} failed deliveries`, error.cause.reason)
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class DeliveryFailed extends Data.TaggedError("DeliveryFailed")<{
  readonly partition: number
  readonly attempts: number
  /** The last failure: the broker's, or (a `DatabaseSink`) the database's. */
  readonly cause: KafkaError | DatabaseError
}> {
  override get message(): string {
    return `Delivery of task ${this.partition} failed ${this.attempts} times in a row; the last failure: ` +
      `${this.cause.message}. Nothing past the last committed offset was committed; check the broker and the ` +
      `output topics, then restart.`
  }
}

/**
 * The brokers refused the client's credentials (a wrong user or password, an
 * expired token) or its SASL mechanism. Never retried: the run fails at
 * startup. The message names the settings to check; it never contains the
 * password or the token.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("AuthenticationFailed", (error) =>
 *     Effect.logError(`SASL ${error.mechanism ?? ""} login as ${error.username ?? "?"} refused: ${error.detail}`)
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class AuthenticationFailed extends Data.TaggedError("AuthenticationFailed")<{
  readonly mechanism: string | undefined
  readonly username: string | undefined
  readonly broker: string | undefined
  readonly detail: string
  readonly cause: unknown
}> {
  override get message(): string {
    const who = this.username === undefined ? "" : ` as ${this.username}`
    const where = this.broker === undefined ? "" : ` at ${this.broker}`
    const mechanism = this.mechanism === undefined ? "" : ` ${this.mechanism}`
    return `SASL${mechanism} authentication${who}${where} failed: ${this.detail}. Check SKEIN_SASL_USERNAME, ` +
      `SKEIN_SASL_PASSWORD and SKEIN_SASL_MECHANISM (the mechanism must be enabled on the broker's listener, ` +
      `and SCRAM users exist per mechanism).`
  }
}

/**
 * The TLS handshake with a broker failed: its certificate is not signed by a
 * trusted CA, does not name the host connected to, or the broker does not
 * speak TLS. Never retried: the run fails at startup.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("TlsError", (error) =>
 *     error.reason === "UntrustedCertificate" ? Effect.logError("set SKEIN_SSL_CA_FILE") : Effect.fail(error)
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class TlsError extends Data.TaggedError("TlsError")<{
  readonly reason: "UntrustedCertificate" | "HostnameMismatch" | "CertificateExpired" | "ClientCertificateRejected" | "Handshake"
  readonly host: string | undefined
  /** Node's TLS error code, e.g. `UNABLE_TO_VERIFY_LEAF_SIGNATURE`. */
  readonly code: string | undefined
  readonly detail: string
  readonly cause: unknown
}> {
  override get message(): string {
    const host = this.host ?? "the broker"
    const code = this.code === undefined ? "" : ` (${this.code})`
    switch (this.reason) {
      case "UntrustedCertificate":
        return `TLS to ${host} failed${code}: its certificate is not signed by a trusted CA. Set SKEIN_SSL_CA_FILE ` +
          `to a PEM file of the CA that signed the brokers' certificates.`
      case "HostnameMismatch":
        return `TLS to ${host} failed${code}: the broker's certificate does not name the host ${host}. Connect ` +
          `with a host name the certificate lists (SKEIN_BROKERS), or reissue the certificate with it as a ` +
          `subject alternative name.`
      case "CertificateExpired":
        return `TLS to ${host} failed${code}: a certificate is expired or not yet valid. Renew it.`
      case "ClientCertificateRejected":
        return `TLS to ${host} failed${code}: the broker requires a client certificate it trusts (mutual TLS). ` +
          `Set SKEIN_SSL_CERT_FILE and SKEIN_SSL_KEY_FILE to a certificate signed by a CA the broker trusts.`
      case "Handshake":
        return `TLS to ${host} failed${code}: ${this.detail}. Check SKEIN_SECURITY_PROTOCOL (does the listener ` +
          `speak TLS?), SKEIN_SSL_CA_FILE, SKEIN_SSL_CERT_FILE and SKEIN_SSL_KEY_FILE.`
    }
  }
}

const aclOperation = {
  READ: "Read",
  WRITE: "Write",
  DESCRIBE: "Describe",
  DESCRIBE_CONFIGS: "DescribeConfigs",
  CREATE: "Create",
  DELETE: "Delete",
  IDEMPOTENT_WRITE: "IdempotentWrite"
} as const

/**
 * The brokers refused an operation on a resource (a missing ACL). Never
 * retried. The message names the resource and the operation to allow.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.catchTag("AuthorizationFailed", (error) =>
 *     Effect.logError(`${error.operation} on ${error.resource} ${error.names.join(",")} denied (${error.during})`)
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class AuthorizationFailed extends Data.TaggedError("AuthorizationFailed")<{
  readonly resource: "topic" | "group" | "transactional-id" | "cluster"
  /** The resource's name(s), e.g. the topics a transaction wrote (the broker does not say which one). */
  readonly names: ReadonlyArray<string>
  readonly operation: "READ" | "WRITE" | "DESCRIBE" | "DESCRIBE_CONFIGS" | "CREATE" | "DELETE" | "IDEMPOTENT_WRITE"
  /** What Skein was doing, e.g. `commit` or `fence`. */
  readonly during: string
  /**
   * A name prefix to grant on instead, when the names carry a per-run suffix
   * (a restore reader's group `{applicationId}-restore-<uuid>`).
   */
  readonly prefix?: string | undefined
  readonly cause: unknown
}> {
  override get message(): string {
    const names = this.names.length === 0 ? "" : ` ${this.names.join(", ")}`
    const flag = { topic: "--topic", group: "--group", "transactional-id": "--transactional-id", cluster: "--cluster" }[
      this.resource
    ]
    const example = this.resource === "cluster"
      ? `${flag}`
      : this.prefix !== undefined
      ? `${flag} ${this.prefix} --resource-pattern-type prefixed`
      : `${flag} ${this.names[0] ?? "<name>"}`
    return `Not authorized: ${this.operation} on ${this.resource}${names} was denied (during ${this.during}). ` +
      `Grant it to the application's principal, e.g. kafka-acls --add --allow-principal User:<user> ` +
      `--operation ${aclOperation[this.operation]} ${example}.`
  }
}

/**
 * The security failures: credentials, TLS, ACLs. All are `"setup"` errors.
 *
 * @example
 * ```ts
 * import { SkeinError } from "skein"
 *
 * const isSecurityError = (error: SkeinError.RunnerError): error is SkeinError.SecurityError =>
 *   error._tag === "AuthenticationFailed" || error._tag === "TlsError" || error._tag === "AuthorizationFailed"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export type SecurityError = AuthenticationFailed | TlsError | AuthorizationFailed

/**
 * The database of a `DatabaseSink` failed: `reason` says how. `Unavailable`
 * (the server cannot be reached or went away) is transient: a restart may get
 * past it. `Refused` (a wrong URL, user or password, a missing database, no
 * permission on the sink's tables) needs a fix first, named in `fix`.
 * `Failed` is any other failed statement. The URL and its password are never
 * part of the message.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner } from "skein"
 *
 * Runner.run(Orders).pipe(
 *   Effect.catchTag("DatabaseError", (error) => Effect.logError(`${error.operation}: ${error.message}`))
 * )
 * ```
 *
 * @since 0.6.0
 * @category errors
 */
export class DatabaseError extends Data.TaggedError("DatabaseError")<{
  readonly reason: "Unavailable" | "Refused" | "Failed"
  readonly operation: string
  readonly fix?: string | undefined
  readonly cause: unknown
}> {
  override get message(): string {
    const detail = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `Database ${this.operation} failed (${this.reason}): ${detail}${this.fix === undefined ? "" : `. ${this.fix}`}`
  }
}

/**
 * Every fatal error a run can end with (besides the transform's own errors).
 *
 * @example
 * ```ts
 * import { SkeinError } from "skein"
 *
 * const describe = (error: SkeinError.RunnerError): string =>
 *   `${error._tag} (${SkeinError.category(error)}): ${error.message}`
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export type RunnerError =
  | KafkaError
  | PartitionCountMismatch
  | ChangelogPartitionMismatch
  | TopicNotFound
  | DecodeError
  | EncodeError
  | StateStoreError
  | StateNotStorable
  | StoredStateInvalid
  | OffsetOutOfRange
  | ConfigurationError
  | OutputTooLarge
  | PartitionOutOfRange
  | TimestampOutOfRange
  | DeliveryFailed
  | HealthServerError
  | QueryServerError
  | AuthenticationFailed
  | TlsError
  | AuthorizationFailed
  | DatabaseError

/**
 * What a user can do about an error:
 *
 * - `"setup"`: the configuration, the topics or the environment cannot work
 *   (a missing topic, mismatched partitions, a bad setting, a port in use, an
 *   offset deleted before it was processed, a stored state the state Schema
 *   no longer reads, wrong credentials, an untrusted
 *   certificate, a missing ACL). Fix it, then restart: restarting
 *   alone fails the same way.
 * - `"transient"`: the broker or the local disk failed (a connection, a
 *   timeout, deliveries failing in a row). Restarting later may succeed; the
 *   runner already retried what it could.
 * - `"record"`: one record cannot be processed (a poison record without a
 *   dead letter topic, an output that does not encode, is too large, names a
 *   partition its topic does not have or has a timestamp its topic refuses,
 *   a state JSON cannot hold).
 *   Restarting fails on the same record: route it with a dead letter topic or
 *   an error rule, or fix the producer.
 *
 * @example
 * ```ts
 * import { SkeinError } from "skein"
 *
 * const advice: Record<SkeinError.Category, string> = {
 *   setup: "fix the configuration or the topics, then restart",
 *   transient: "restart later",
 *   record: "set a deadLetterTopic or add an error rule"
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Category = "setup" | "transient" | "record"

/**
 * The category of a runtime error.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner, SkeinError } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.tapError((error) =>
 *     SkeinError.isSkeinError(error) && SkeinError.category(error) === "transient"
 *       ? Effect.logWarning("broker trouble; the supervisor will restart us")
 *       : Effect.void
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category utils
 */
export const category = (error: RunnerError): Category => {
  switch (error._tag) {
    case "KafkaError":
    case "DeliveryFailed":
    case "StateStoreError":
      return "transient"
    case "DatabaseError":
      return error.reason === "Refused" ? "setup" : "transient"
    case "DecodeError":
    case "EncodeError":
    case "StateNotStorable":
    case "OutputTooLarge":
    case "PartitionOutOfRange":
    case "TimestampOutOfRange":
      return "record"
    case "PartitionCountMismatch":
    case "ChangelogPartitionMismatch":
    case "TopicNotFound":
    case "StoredStateInvalid":
    case "OffsetOutOfRange":
    case "ConfigurationError":
    case "HealthServerError":
    case "QueryServerError":
    case "AuthenticationFailed":
    case "TlsError":
    case "AuthorizationFailed":
      return "setup"
  }
}

/**
 * True for errors a later restart may get past without any change
 * (`category(error) === "transient"`).
 *
 * @example
 * ```ts
 * import { Effect, Schedule } from "effect"
 * import { Runner, SkeinError } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.retry({
 *     schedule: Schedule.exponential("1 second"),
 *     while: (error) => SkeinError.isSkeinError(error) && SkeinError.isTransient(error)
 *   })
 * )
 * ```
 *
 * @since 0.1.0
 * @category utils
 */
export const isTransient = (error: RunnerError): boolean => category(error) === "transient"

const runnerErrorTags: ReadonlySet<string> = new Set([
  "KafkaError",
  "DeliveryFailed",
  "StateStoreError",
  "DecodeError",
  "EncodeError",
  "StateNotStorable",
  "StoredStateInvalid",
  "OutputTooLarge",
  "PartitionOutOfRange",
  "TimestampOutOfRange",
  "PartitionCountMismatch",
  "ChangelogPartitionMismatch",
  "TopicNotFound",
  "OffsetOutOfRange",
  "ConfigurationError",
  "HealthServerError",
  "QueryServerError",
  "AuthenticationFailed",
  "TlsError",
  "AuthorizationFailed",
  "DatabaseError"
])

/**
 * True when `u` is one of the runtime's own errors (not the transform's).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner, SkeinError } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.tapError((error) =>
 *     SkeinError.isSkeinError(error)
 *       ? Effect.logError(`runtime error: ${error._tag}`)
 *       : Effect.logError("the transform failed", error)
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category guards
 */
export const isSkeinError = (u: unknown): u is RunnerError =>
  typeof u === "object" && u !== null && "_tag" in u && typeof u._tag === "string" && runnerErrorTags.has(u._tag) &&
  u instanceof Error
