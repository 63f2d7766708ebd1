/**
 * A test app run as its own process (`node --import tsx <app>`), as a scoped resource: its
 * output is kept, the test sends it signals on its own events, and it is SIGKILLed when the
 * scope closes if it still runs.
 */
import { Deferred, Effect, Exit } from "effect"
import { spawn } from "node:child_process"

export interface AppProcess {
  /** Everything it printed so far (stdout and stderr). */
  readonly output: () => string
  readonly signal: (signal: NodeJS.Signals) => Effect.Effect<void>
  /** Completes with its exit code when it exits (null when a signal ended it). */
  readonly exited: Effect.Effect<number | null>
}

/** Starts `app` with `env` added to this process's environment. */
export const spawnApp = (app: string, env: Record<string, string>) =>
  Effect.gen(function*() {
    const exited = yield* Deferred.make<number | null>()
    const chunks: Array<string> = []
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const child = spawn(process.execPath, ["--import", "tsx", app], {
          env: { ...process.env, ...env },
          stdio: ["ignore", "pipe", "pipe"]
        })
        child.stdout.on("data", (d: Buffer) => chunks.push(d.toString()))
        child.stderr.on("data", (d: Buffer) => chunks.push(d.toString()))
        child.on("exit", (code) => Deferred.unsafeDone(exited, Exit.succeed(code)))
        return child
      }),
      (child) =>
        Effect.sync(() => {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
        })
    )
    const process_: AppProcess = {
      output: () => chunks.join(""),
      signal: (signal) => Effect.sync(() => void child.kill(signal)),
      exited: Deferred.await(exited)
    }
    return process_
  })
