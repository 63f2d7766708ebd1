/**
 * Running transformers.
 *
 * @since 0.1.0
 */
import type { RunMain } from "@effect/platform/Runtime"
import { Effect, Option } from "effect"
import { SkeinConfig } from "./SkeinConfig.ts"
import { ConfigurationError } from "./SkeinError.ts"
import type { RunnerError } from "./SkeinError.ts"
import * as internalRunMain from "./internal/runMain.ts"
import * as internal from "./internal/runner.ts"
import * as internalStats from "./internal/RunnerStats.ts"
import type * as Topic from "./Topic.ts"
import type { Transformer } from "./Transformer.ts"

/**
 * The observable state of a running transformer, read-only: its phase (and
 * `phaseChanges`), counters (batches, commits, aborts, task starts and
 * stops, restored records, migrations, ...), partitions and lag. The
 * counters and the batch latency histogram are Effect metrics tagged with
 * the run; `Health` reads all of it.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import type { Runner } from "skein"
 *
 * const logProgress = (stats: Runner.Stats) =>
 *   Effect.log(`${stats.phase}: ${stats.commits} commits, ${stats.aborts} aborts, ${stats.assigned.size} partitions`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Stats = internalStats.Stats

/**
 * Fresh stats to pass to `runWithStats`, one per run.
 *
 * @example
 * ```ts
 * import { Runner } from "skein"
 *
 * const stats = Runner.makeStats() // a fresh one for every run
 * const program = Runner.runWithStats(WordCount, stats)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeStats = (): Stats => internalStats.makeStats()

/**
 * Runs a transformer (exactly once by default) until interrupted or until a
 * fatal error. Interrupting it (SIGTERM/SIGINT through `Runner.runMain`) stops
 * fetching, gives running handlers `shutdownGrace`, interrupts the rest,
 * commits the finished work, tears the tasks down and leaves the consumer
 * group. Each execution of the returned effect is a new run.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner, SkeinConfig } from "skein"
 *
 * Runner.run(WordCount).pipe(Effect.provide(SkeinConfig.layer({ applicationId: "wc", brokers })))
 * ```
 *
 * @since 0.1.0
 * @category running
 */
export const run = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>
): Effect.Effect<never, RunnerError | E, R | SkeinConfig> => runWithStats(transformer, makeStats())

/**
 * Like `run`, updating `stats` as it goes.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Health, Runner, SkeinConfig } from "skein"
 *
 * const stats = Runner.makeStats()
 * const program = Runner.runWithStats(WordCount, stats).pipe(Effect.provide(SkeinConfig.layerConfig()))
 * const metrics = () => Health.prometheus(stats) // e.g. from your own HTTP server
 * ```
 *
 * @since 0.1.0
 * @category running
 */
export const runWithStats = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  stats: Stats
): Effect.Effect<never, RunnerError | E, R | SkeinConfig> =>
  Option.match(internalStats.fromStats(stats), {
    onNone: () =>
      Effect.fail(
        new ConfigurationError({
          problem: "This Runner.Stats object was not made by Runner.makeStats()",
          fix: "Pass a fresh Runner.makeStats() to each run"
        })
      ),
    onSome: (runnerStats) =>
      Effect.flatMap(SkeinConfig, (config) => Effect.scoped(internal.run(transformer, config, runnerStats)))
  })

/**
 * Runs a program as the process's main entry point, under Node, Bun or Deno:
 * `@effect/platform`'s `runMain` (errors logged, pretty logger, exit code 0
 * on success or on a stop by signal, 1 on a failure) with signal handling
 * that a repeated signal does not cut short.
 *
 * The first SIGINT or SIGTERM interrupts the program: a run stops fetching,
 * gives running handlers `shutdownGrace`, commits the finished work and
 * leaves the group, also while it is still starting. Signals less than a
 * second apart count as one (a process-group signal relayed by `npm run` or
 * the `tsx` CLI, one Ctrl-C reaching several processes) and are logged. The
 * second signal is logged and ignored; the third forces an exit with code
 * 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), without
 * waiting for the stop to finish. `NodeRuntime.runMain` instead lets a
 * second signal kill the process mid-shutdown: use this one for apps.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner, SkeinConfig } from "skein"
 *
 * Runner.run(WordCount).pipe(
 *   Effect.provide(SkeinConfig.layerConfig()),
 *   Runner.runMain
 * )
 * ```
 *
 * @since 0.1.0
 * @category running
 */
export const runMain: RunMain = internalRunMain.runMain
