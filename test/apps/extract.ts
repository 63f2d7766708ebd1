/**
 * The extractor app the process-level tests start, kill (SIGKILL) and freeze
 * (SIGSTOP): runs the items extractor of `extractItems.ts` with the settings
 * in `EXTRACT_APP` (JSON, see `AppConfig` in `extractSupport.ts`) and prints a
 * JSON status line every 100 ms. A fatal error prints a `Failed` line and
 * exits with code 1. With `waitForStart` it loads, prints `Ready` and waits
 * for a line on stdin before it starts, so a test can have the next instance
 * loaded before it kills the current one.
 *
 *   EXTRACT_APP='{"brokers":["127.0.0.1:9092"],...}' tsx test/apps/extract.ts
 */
import { FetchHttpClient } from "@effect/platform"
import { Duration, Effect, Layer, Logger, LogLevel, Schedule } from "effect"
import * as Extractor from "../../src/Extractor.ts"
import * as SkeinConfig from "../../src/SkeinConfig.ts"
import * as Items from "./extractItems.ts"
import type { AppConfig, AppEvent } from "./extractSupport.ts"

const config = JSON.parse(process.env["EXTRACT_APP"] ?? "{}") as AppConfig

const print = (event: AppEvent) => Effect.sync(() => process.stdout.write(`${JSON.stringify(event)}\n`))

const stats = Extractor.makeStats()

const reportStatus = Effect.suspend(() =>
  print({
    _tag: "Status",
    owned: [...stats.owned].sort(),
    pagesCommitted: stats.pagesCommitted,
    migrations: stats.migrations,
    tokensStarted: stats.tokensStarted
  })
).pipe(Effect.repeat(Schedule.spaced(Duration.millis(100))))

const extractor = Items.make({
  name: config.name,
  tokens: config.tokens,
  source: config.source,
  output: config.output,
  pageSize: config.pageSize,
  delayBeforeCommit: Duration.millis(config.delayBeforeCommitMs),
  onFetched: (token, after) => print({ _tag: "Fetched", token, after })
})

/** Modules are loaded: with `waitForStart`, wait for a line on stdin before joining the group. */
const started = config.waitForStart
  ? print({ _tag: "Ready" }).pipe(
    Effect.zipRight(Effect.async<void>((resume) => {
      process.stdin.once("data", () => resume(Effect.void))
    }))
  )
  : Effect.void

const program = Effect.gen(function*() {
  yield* started
  yield* Effect.forkDaemon(reportStatus)
  return yield* Extractor.runWithStats(extractor, stats)
}).pipe(
  Effect.catchAll((error) =>
    print({ _tag: "Failed", error: error._tag, message: error.message }).pipe(
      Effect.zipRight(Effect.sync(() => process.exit(1)))
    )
  ),
  Effect.provide(Layer.mergeAll(
    FetchHttpClient.layer,
    SkeinConfig.layer({
      applicationId: config.applicationId,
      brokers: config.brokers,
      clientId: `extract-app-${process.pid}`,
      sessionTimeout: Duration.millis(config.sessionTimeoutMs),
      rebalanceTimeout: Duration.millis(config.sessionTimeoutMs),
      heartbeatInterval: Duration.millis(Math.max(100, Math.floor(config.sessionTimeoutMs / 6)))
    })
  ))
)

Effect.runFork(
  process.env["EXTRACT_APP_LOG"] === "1" ? program.pipe(Logger.withMinimumLogLevel(LogLevel.Debug)) : program
)
