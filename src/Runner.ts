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
import * as internalRunAll from "./internal/runtime/runAll.ts"
import * as internalRunMain from "./internal/runtime/runMain.ts"
import * as internal from "./internal/runtime/runner.ts"
import * as internalStats from "./internal/runtime/RunnerStats.ts"
import type * as Topic from "./Topic.ts"
import type * as T from "./Transformer.ts"
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
 * Options of `runAll`.
 *
 * @example
 * ```ts
 * import { Runner } from "skein"
 *
 * const options: Runner.RunAllOptions = { failureIsolation: "transformer" }
 * Runner.runAll([WordCount, Shout], options)
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface RunAllOptions {
  /**
   * `"run"` (default): the first transformer to fail ends the whole run with
   * its error; the others are interrupted and stop cleanly. `"transformer"`:
   * a failed transformer is logged and reported `failed` by the health
   * endpoint while the others go on; the run ends (with the first failure)
   * only once every transformer has failed.
   */
  readonly failureIsolation?: internalRunAll.FailureIsolation | undefined
}

/**
 * One `Runner.Stats` per transformer of `runAllWithStats`, in the same order.
 *
 * @example
 * ```ts
 * import { Runner } from "skein"
 *
 * const stats: Runner.StatsOf<[typeof WordCount, typeof Shout]> = [Runner.makeStats(), Runner.makeStats()]
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export type StatsOf<Ts extends ReadonlyArray<T.Any>> = { readonly [I in keyof Ts]: Stats }

/**
 * Runs several transformers in one process, concurrently, until interrupted
 * or until a failure (see `RunAllOptions.failureIsolation`).
 *
 * Each transformer is its own run under the same `SkeinConfig` except its
 * application id, `{applicationId}-{transformer.name}`: its own consumer
 * group, transactional ids (`{applicationId}-{name}-{partition}`), changelog
 * (`{applicationId}-{name}-{name}-changelog`) and state directory, so the
 * transformers never share a group or fence each other. Names must be
 * distinct (else `ConfigurationError`). Each run makes its own Kafka client.
 *
 * With `healthPort` set, one endpoint serves them all: `/health/ready` is
 * 200 only when every transformer is ready, its body
 * `{ ready, transformers: { [name]: HealthSnapshot } }`; `/health/live` is
 * 200 while every transformer is live (with failure isolation
 * `"transformer"`: while any is); `/metrics` has every transformer's
 * samples, labelled `application_id` and `transformer`.
 *
 * With `queryPort` set, one query endpoint serves them all, announced by
 * each run in its own group: `/state/{transformer}/...` asks that
 * transformer; `/stores/{store}/...` the one transformer declaring the
 * store (`?transformer=` when several declare one name); `/metadata` needs
 * `?transformer=` when there are several (docs/queries.md).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner, SkeinConfig } from "skein"
 *
 * // groups "shop-word-count" and "shop-shout"
 * Runner.runAll([WordCount, Shout]).pipe(
 *   Effect.provide(SkeinConfig.layer({ applicationId: "shop", brokers, healthPort: 8080 })),
 *   Runner.runMain
 * )
 * ```
 *
 * @since 0.2.0
 * @category running
 */
export const runAll = <const Ts extends ReadonlyArray<T.Any>>(
  transformers: Ts,
  options: RunAllOptions = {}
): Effect.Effect<never, RunnerError | T.ErrorOf<Ts[number]>, T.ContextOf<Ts[number]> | SkeinConfig> =>
  runAllWithStats(transformers, transformers.map(() => makeStats()) as StatsOf<Ts>, options)

/**
 * Like `runAll`, updating one `Runner.Stats` per transformer (in the same
 * order) as it goes.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Health, Runner } from "skein"
 *
 * const [counts, shouts] = [Runner.makeStats(), Runner.makeStats()]
 * const program = Runner.runAllWithStats([WordCount, Shout], [counts, shouts])
 * const lag = Effect.map(Health.snapshot(counts), (s) => s.lag.total)
 * ```
 *
 * @since 0.2.0
 * @category running
 */
export const runAllWithStats = <const Ts extends ReadonlyArray<T.Any>>(
  transformers: Ts,
  stats: StatsOf<Ts>,
  options: RunAllOptions = {}
): Effect.Effect<never, RunnerError | T.ErrorOf<Ts[number]>, T.ContextOf<Ts[number]> | SkeinConfig> => {
  const runnerStats = Option.all((stats as ReadonlyArray<Stats>).map(internalStats.fromStats))
  if (Option.isNone(runnerStats)) {
    return Effect.fail(
      new ConfigurationError({
        problem: "A Runner.Stats object given to Runner.runAllWithStats was not made by Runner.makeStats()",
        fix: "Pass a fresh Runner.makeStats() per transformer"
      })
    )
  }
  return Effect.flatMap(SkeinConfig, (config) =>
    internalRunAll.runAll(
      transformers as ReadonlyArray<T.Any> as ReadonlyArray<internalRunAll.SomeTransformer>,
      config,
      runnerStats.value,
      options.failureIsolation ?? "run"
    )) as Effect.Effect<never, RunnerError | T.ErrorOf<Ts[number]>, T.ContextOf<Ts[number]> | SkeinConfig>
}

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
