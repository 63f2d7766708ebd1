/**
 * What a runner checks before it joins its group: settings that cannot work
 * together, and the topics (equal partition counts, the changelog created or
 * co-partitioned). Each failure's message says how to fix it.
 *
 * @internal
 */
import { Duration, Effect, Option } from "effect"
import type { SkeinConfig } from "../../SkeinConfig.ts"
import { ChangelogPartitionMismatch, ConfigurationError, PartitionCountMismatch } from "../../SkeinError.ts"
import type { RunnerError } from "../../SkeinError.ts"
import type { KafkaAdmin } from "../kafka/admin.ts"
import { invalidEndpoint } from "../query/QueryRoutes.ts"
import type { RunnerStats } from "./RunnerStats.ts"

/** What `validateConfig` reads of the transformer. */
export interface CheckedTransformer {
  readonly name: string
  readonly rules: ReadonlyArray<{ readonly then: string }>
  readonly state: Option.Option<unknown>
  readonly onTimer?: unknown
  readonly stores?: ReadonlyArray<unknown> | undefined
}

/** Checks settings that cannot work together; the message says how to fix them. */
export const validateConfig = (
  config: SkeinConfig,
  stats: RunnerStats,
  transformer: CheckedTransformer
): Effect.Effect<void, ConfigurationError> => {
  const { name: transformerName, rules } = transformer
  const problems: Array<ConfigurationError> = []
  if (Option.isNone(transformer.state) && transformer.onTimer !== undefined) {
    problems.push(
      new ConfigurationError({
        problem: `Transformer ${transformerName} has onTimer but no state: timers are kept in the task's state store`,
        fix: "Declare it with Transformer.make (a state Schema), or drop onTimer"
      })
    )
  }
  if (Option.isNone(transformer.state) && (transformer.stores?.length ?? 0) > 0) {
    problems.push(
      new ConfigurationError({
        problem: `Transformer ${transformerName} has stores but no state: stores are kept in the task's state store`,
        fix: "Declare it with Transformer.make (a state Schema), or drop stores"
      })
    )
  }
  const endpointProblem = config.queryEndpoint === undefined ? undefined : invalidEndpoint(config.queryEndpoint)
  if (endpointProblem !== undefined) {
    problems.push(
      new ConfigurationError({
        problem: `queryEndpoint: ${endpointProblem}`,
        fix: "Set SKEIN_QUERY_ENDPOINT to the host:port other instances reach this query endpoint at, or leave it unset"
      })
    )
  }
  if (stats.phase !== "starting") {
    problems.push(
      new ConfigurationError({
        problem: "This Runner.Stats object already belongs to a run (a runtime runs once)",
        fix: "Pass a fresh Runner.makeStats() to each run"
      })
    )
  }
  if (Duration.greaterThanOrEqualTo(config.revocationGrace, config.rebalanceTimeout)) {
    problems.push(
      new ConfigurationError({
        problem: `revocationGrace (${Duration.format(config.revocationGrace)}) must be shorter than rebalanceTimeout ` +
          `(${Duration.format(config.rebalanceTimeout)}), or the group drops this instance during a rebalance`,
        fix: "Lower SKEIN_REVOCATION_GRACE or raise SKEIN_REBALANCE_TIMEOUT"
      })
    )
  }
  if (!Duration.greaterThan(config.maxBatchDuration, Duration.zero)) {
    problems.push(
      new ConfigurationError({
        problem: `maxBatchDuration must be above zero, got ${Duration.format(config.maxBatchDuration)}`,
        fix: "Set SKEIN_MAX_BATCH_DURATION to a positive duration (default 1 second), or leave it unset"
      })
    )
  }
  if (config.maxTaskIdle !== "no-wait" && !Duration.isFinite(config.maxTaskIdle)) {
    problems.push(
      new ConfigurationError({
        problem: `maxTaskIdle must be finite, got ${Duration.format(config.maxTaskIdle)}: a task reading several topics would wait ` +
          "forever for an input with nothing to fetch",
        fix: "Set SKEIN_MAX_TASK_IDLE to a finite duration (default 0) or no-wait, or leave it unset"
      })
    )
  }
  if (config.maxConcurrency !== "unbounded" && !(Number.isInteger(config.maxConcurrency) && config.maxConcurrency > 0)) {
    problems.push(
      new ConfigurationError({
        problem: `maxConcurrency must be a positive integer or "unbounded", got ${config.maxConcurrency}`,
        fix: "Set SKEIN_MAX_CONCURRENCY to a positive integer, or leave it unset"
      })
    )
  }
  if (!(config.maxDeliveryFailures >= 1)) {
    problems.push(
      new ConfigurationError({
        problem: `maxDeliveryFailures must be at least 1, got ${config.maxDeliveryFailures}`,
        fix: "Set SKEIN_MAX_DELIVERY_FAILURES to a positive integer (default 8)"
      })
    )
  }
  if (!(Number.isInteger(config.standbyReplicas) && config.standbyReplicas >= 0)) {
    problems.push(
      new ConfigurationError({
        problem: `standbyReplicas must be an integer of at least 0, got ${config.standbyReplicas}`,
        fix: "Set SKEIN_STANDBY_REPLICAS (or SkeinConfig.standbyReplicas) to 0 (no standbys) or a positive integer"
      })
    )
  }
  if (config.deadLetterTopic === undefined && rules.some((rule) => rule.then === "dlq")) {
    problems.push(
      new ConfigurationError({
        problem: `Transformer ${transformerName} has an error rule with then: "dlq" but no dead letter topic is configured`,
        fix: "Set deadLetterTopic in SkeinConfig (or SKEIN_DEAD_LETTER_TOPIC) to an existing topic"
      })
    )
  }
  const [first] = problems
  return first === undefined ? Effect.void : Effect.fail(first)
}

/** Checks partition counts and creates (or checks) the changelog topic; returns the partition count. */
export const validateTopics = (
  admin: KafkaAdmin,
  inputTopics: ReadonlyArray<string>,
  changelog: Option.Option<string>,
  options: { readonly replicationFactor: number; readonly deadLetterTopic: string | undefined }
): Effect.Effect<number, RunnerError> =>
  Effect.gen(function*() {
    const counts = yield* admin.partitionCounts(inputTopics)
    const distinct = new Set(counts.values())
    const [partitions] = [...distinct]
    if (distinct.size !== 1 || partitions === undefined) {
      return yield* Effect.fail(
        new PartitionCountMismatch({ counts: [...counts].map(([topic, n]) => ({ topic, partitions: n })) })
      )
    }
    if (Option.isSome(changelog)) {
      const existing = yield* admin.partitionCount(changelog.value)
      if (existing === undefined) {
        yield* admin.createCompactedTopic(changelog.value, partitions, options.replicationFactor)
      } else if (existing !== partitions) {
        return yield* Effect.fail(
          new ChangelogPartitionMismatch({ changelog: changelog.value, expected: partitions, actual: existing })
        )
      }
    }
    if (options.deadLetterTopic !== undefined) yield* admin.partitionCounts([options.deadLetterTopic])
    return partitions
  })
