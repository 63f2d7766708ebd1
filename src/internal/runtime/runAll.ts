/**
 * Several transformers in one process (`Runner.runAll`): each is its own run
 * (`runner.run`) under the application's config with its own application id
 * `{applicationId}-{name}` (so its own consumer group, transactional ids and
 * changelog), all under one health endpoint and one query endpoint (each
 * run announces it in its own group; `SharedSources` picks a request's run).
 *
 * @internal
 */
import { Effect, Either, Option } from "effect"
import type { SkeinConfig } from "../../SkeinConfig.ts"
import { ConfigurationError } from "../../SkeinError.ts"
import type * as Topic from "../../Topic.ts"
import type { Transformer } from "../../Transformer.ts"
import * as HealthServerModule from "./healthServerModule.ts"
import * as QueryTls from "../query/queryTls.ts"
import * as SharedSources from "../query/SharedSources.ts"
import * as runner from "./runner.ts"
import * as RunnerSetup from "./RunnerSetup.ts"
import type { RunnerStats } from "./RunnerStats.ts"

/** What `runAll` does when one transformer's run fails. */
export type FailureIsolation = "run" | "transformer"

/** A transformer as `runAll` runs it: its types are the caller's business (`Runner.runAll` keeps them). */
export type SomeTransformer = Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, unknown>

/** The application id of one transformer of `runAll`: its group, transactional-id prefix and changelog prefix. */
export const applicationIdOf = (applicationId: string, transformer: { readonly name: string }): string =>
  `${applicationId}-${transformer.name}`

export const runAll = (
  transformers: ReadonlyArray<SomeTransformer>,
  config: SkeinConfig,
  stats: ReadonlyArray<RunnerStats>,
  failureIsolation: FailureIsolation
): Effect.Effect<never, unknown, unknown> =>
  Effect.gen(function*() {
    if (transformers.length === 0) {
      return yield* new ConfigurationError({
        problem: "Runner.runAll was given no transformer",
        fix: "Pass at least one transformer"
      })
    }
    const names = transformers.map((t) => t.name)
    const duplicates = [...new Set(names.filter((name, i) => names.indexOf(name) !== i))]
    if (duplicates.length > 0) {
      return yield* new ConfigurationError({
        problem: `Runner.runAll was given several transformers named ${duplicates.map((n) => `"${n}"`).join(", ")}`,
        fix: "Give each transformer of one application a distinct name: it names its consumer group, " +
          "transactional ids and changelog"
      })
    }
    if (stats.length !== transformers.length) {
      return yield* new ConfigurationError({
        problem: `Runner.runAllWithStats was given ${stats.length} stats for ${transformers.length} transformers`,
        fix: "Pass one fresh Runner.makeStats() per transformer, in the same order"
      })
    }
    if (config.healthPort !== undefined) {
      const HealthServer = yield* HealthServerModule.load
      const { port } = yield* HealthServer.serveAll(
        transformers.map((t, i) => ({
          name: t.name,
          stats: stats[i]!,
          labels: { applicationId: applicationIdOf(config.applicationId, t), transformer: t.name }
        })),
        { port: config.healthPort, isolated: failureIsolation === "transformer" }
      )
      for (const s of stats) s.setHealthPort(port)
    }
    // One query endpoint for every run: each request goes to the run of the transformer it names
    // (SharedSources); each run announces this endpoint in its own group.
    let sharedQuery: RunnerSetup.RunnerHooks["sharedQuery"] = undefined
    if (config.queryPort !== undefined) {
      const QueryServer = yield* Effect.promise(() => import("../query/queryServer.ts"))
      const sources = SharedSources.make(transformers.map((t) => ({
        name: t.name,
        stateful: Option.isSome(t.state),
        stores: (t.stores ?? []).map((store) => ({ name: store.name, kind: store.kind }))
      })))
      const { port } = yield* QueryServer.serve(sources.pick, {
        port: config.queryPort,
        host: config.queryHost,
        token: config.queryToken,
        tls: yield* QueryTls.read(config)
      })
      sharedQuery = { endpoint: config.queryEndpoint ?? RunnerSetup.announcedEndpoint(config.queryHost, port), port, sources }
    }
    const runs = transformers.map((t, i) => {
      const own: SkeinConfig = {
        ...config,
        applicationId: applicationIdOf(config.applicationId, t),
        healthPort: undefined,
        queryPort: undefined
      }
      const run = Effect.scoped(runner.run(t, own, stats[i]!, { sharedQuery }))
      return failureIsolation === "run" ? run : run.pipe(
        Effect.tapErrorCause((cause) =>
          Effect.logError(`transformer "${t.name}" failed; the other transformers go on`, cause)
        ),
        Effect.either
      )
    })
    // "run": the first failure interrupts the others (each stops cleanly) and is the result.
    // "transformer": the run ends (with the first failure) only once every transformer has failed.
    const results = yield* Effect.all(runs, { concurrency: "unbounded" })
    const firstFailure = results.find(Either.isLeft)
    return yield* firstFailure === undefined ? Effect.interrupt : Effect.fail(firstFailure.left)
  }).pipe(Effect.scoped)
