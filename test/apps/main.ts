/**
 * Runs one transformer as an app under test: configuration from the
 * environment (`SKEIN_*`, `KAFKA_BROKERS`, `CHAOS_*`), a JSON status line on
 * stdout every second, a clean stop on SIGTERM/SIGINT (exit 0), exit 1 when
 * the runner fails ("let it crash": the harness restarts it).
 *
 * Works under Node (tsx), Bun and Deno: it only needs `process`.
 */
import { Cause, Config, Duration, Effect, Exit, Fiber, Layer, Schedule } from "effect"
import type { Transformer } from "../../src/Transformer.ts"
import { Runner, SkeinConfig } from "../../src/index.ts"
import type { Topic } from "../../src/index.ts"

/** The topics an app reads and writes, from `CHAOS_INPUT_TOPIC` and `CHAOS_OUTPUT_TOPIC`. */
export const topicNames = Config.all({
  input: Config.string("CHAOS_INPUT_TOPIC"),
  output: Config.string("CHAOS_OUTPUT_TOPIC")
})

const runtimeName = (): string => {
  const g = globalThis as { readonly Bun?: unknown; readonly Deno?: unknown }
  return g.Deno !== undefined ? "deno" : g.Bun !== undefined ? "bun" : "node"
}

const line = (event: Record<string, unknown>) =>
  Effect.sync(() => process.stdout.write(`${JSON.stringify({ ...event, ts: Date.now() })}\n`))

/** Runs the transformer built from the configured topic names until signalled. */
export const runApp = <Inputs extends ReadonlyArray<Topic.Any>, S, E>(
  build: (names: { readonly input: string; readonly output: string }) => Transformer<Inputs, S, E, never>
): void => runAppWith(build, Layer.empty)

/** Like `runApp`, for a transformer that needs services (a language model, say): `layer` provides them. */
export const runAppWith = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  build: (names: { readonly input: string; readonly output: string }) => Transformer<Inputs, S, E, R>,
  layer: Layer.Layer<R>
): void => {
  const stats = Runner.makeStats()
  const report = Effect.suspend(() => line({
    event: "stats",
    runtime: runtimeName(),
    pid: process.pid,
    batches: stats.batches,
    commits: stats.commits,
    rebalances: stats.rebalances,
    migrations: stats.migrations,
    tasksStarted: stats.tasksStarted,
    restored: stats.restoredRecords,
    assigned: [...stats.assigned].sort((a, b) => a - b)
  }))
  const program = Effect.gen(function*() {
    const names = yield* topicNames
    const transformer = build(names)
    yield* line({ event: "started", runtime: runtimeName(), pid: process.pid, transformer: transformer.name })
    yield* report.pipe(
      Effect.repeat(Schedule.spaced(Duration.seconds(1))),
      Effect.forkScoped
    )
    return yield* Runner.runWithStats(transformer, stats)
  }).pipe(Effect.scoped, Effect.provide(SkeinConfig.layerConfig()), Effect.provide(layer))
  runUntilSignalled(program)
}

/** Prints a JSON status line on stdout, as the apps under test do (`event`, plus `ts`). */
export const statusLine = (event: Record<string, unknown>): Effect.Effect<void> => line(event)

/** The runtime this process runs under: `node`, `bun` or `deno`. */
export const currentRuntime = runtimeName

/**
 * The exit code of a program that ended with `exit`: 0 when it ended or was only interrupted (a
 * signal's stop), 1 when it failed, also when interrupted fibers came with the failure (one of
 * several runs failed and the others were interrupted: `Exit.isInterrupted` is true for that too).
 */
export const exitOf = (exit: Exit.Exit<unknown, unknown>): 0 | 1 =>
  Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause) ? 0 : 1

/**
 * Runs `program` until SIGTERM/SIGINT interrupts it (exit 0, after a `stopping` and a `stopped`
 * line), or it fails (exit 1 after a `failed` line: "let it crash", the harness restarts it).
 */
export const runUntilSignalled = (program: Effect.Effect<unknown, unknown>): void => {
  const fiber = Effect.runFork(program)
  let stopping = false
  const stop = (signal: string) => {
    if (stopping) return
    stopping = true
    process.stdout.write(`${JSON.stringify({ event: "stopping", signal, ts: Date.now() })}\n`)
    Effect.runFork(Fiber.interrupt(fiber))
  }
  process.on("SIGTERM", () => stop("SIGTERM"))
  process.on("SIGINT", () => stop("SIGINT"))
  fiber.addObserver((exit) => {
    if (Exit.isSuccess(exit) || exitOf(exit) === 0) {
      process.stdout.write(`${JSON.stringify({ event: "stopped", ts: Date.now() })}\n`)
      process.exit(0)
    }
    process.stdout.write(
      `${JSON.stringify({ event: "failed", cause: Cause.pretty(exit.cause).slice(0, 2000), ts: Date.now() })}\n`
    )
    process.exit(1)
  })
}
