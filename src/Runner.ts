/**
 * Running transformers.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { SkeinConfig } from "./SkeinConfig.ts"
import type { RunnerError } from "./SkeinError.ts"
import * as internal from "./internal/runner.ts"
import type * as Topic from "./Topic.ts"
import type { Transformer } from "./Transformer.ts"

/**
 * Counters of a running transformer: batches, commits, task starts and
 * stops, restored records, migrations.
 *
 * @since 0.1.0
 * @category models
 */
export type Stats = internal.RunnerStats

/**
 * Fresh counters to pass to `runWithStats`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeStats: () => Stats = internal.makeStats

/**
 * Runs a transformer (exactly once by default) until interrupted or until a
 * fatal error. Interrupting it (SIGTERM/SIGINT through `runMain`) stops
 * fetching, gives running handlers `shutdownGrace`, interrupts the rest,
 * commits the finished work, tears the tasks down and leaves the consumer
 * group. Each execution of the returned effect is a new run.
 *
 * @example
 * ```ts
 * Runner.run(WordCount).pipe(Effect.provide(SkeinConfig.layer({ applicationId: "wc", brokers })))
 * ```
 *
 * @since 0.1.0
 * @category running
 */
export const run = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>
): Effect.Effect<never, RunnerError | E, R | SkeinConfig> => runWithStats(transformer, internal.makeStats())

/**
 * Like `run`, updating `stats` as it goes.
 *
 * @since 0.1.0
 * @category running
 */
export const runWithStats = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  stats: Stats
): Effect.Effect<never, RunnerError | E, R | SkeinConfig> =>
  Effect.flatMap(SkeinConfig, (config) => Effect.scoped(internal.run(transformer, config, stats)))
