/**
 * The one boundary to operating-system processes for the testing module:
 * `node:child_process` and signals, which Node, Bun and Deno all implement.
 * Everything else speaks `Effect` and `KafkaBrokerError`.
 *
 * @internal
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { Deferred, Duration, Effect, Option, Schedule } from "effect"
import { KafkaBrokerError } from "../KafkaBrokerError.ts"

const MAX_OUTPUT = 256 * 1024

export interface RunOptions {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly cwd?: string
  /** Added to (and overriding) the current process environment. */
  readonly env?: Readonly<Record<string, string>>
  readonly timeoutMs: number
  /** Run as this user and group (only as root: a server that refuses to run as root). */
  readonly user?: { readonly uid: number; readonly gid: number } | undefined
}

export interface RunResult {
  readonly exitCode: number | null
  /** stdout and stderr interleaved, the last 256 KiB. */
  readonly output: string
}

const childEnv = (env: Readonly<Record<string, string>> | undefined): NodeJS.ProcessEnv =>
  env === undefined ? process.env : { ...process.env, ...env }

/** Runs a command to completion and collects its output. */
export const run = (options: RunOptions): Effect.Effect<RunResult, KafkaBrokerError> =>
  Effect.async<RunResult, KafkaBrokerError>((resumeOnce) => {
    let done = false
    const resume = (effect: Effect.Effect<RunResult, KafkaBrokerError>) => {
      if (done) return
      done = true
      resumeOnce(effect)
    }
    let output = ""
    const append = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      if (output.length > MAX_OUTPUT) output = output.slice(output.length - MAX_OUTPUT)
    }
    let child: ChildProcess.ChildProcess
    try {
      child = ChildProcess.spawn(options.command, [...options.args], {
        cwd: options.cwd,
        env: childEnv(options.env),
        stdio: ["ignore", "pipe", "pipe"],
        ...options.user
      })
    } catch (cause) {
      resume(Effect.fail(spawnError(options.command, cause)))
      return
    }
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      resume(
        Effect.fail(
          new KafkaBrokerError({
            reason: "Timeout",
            detail: `${options.command} ${options.args.join(" ")} did not finish within ${options.timeoutMs} ms\n${tail(output)}`
          })
        )
      )
    }, options.timeoutMs)
    child.stdout?.on("data", append)
    child.stderr?.on("data", append)
    child.once("error", (cause) => {
      clearTimeout(timer)
      resume(Effect.fail(spawnError(options.command, cause)))
    })
    child.once("close", (exitCode) => {
      clearTimeout(timer)
      resume(Effect.succeed({ exitCode, output }))
    })
    return Effect.sync(() => {
      clearTimeout(timer)
      child.kill("SIGKILL")
    })
  })

const spawnError = (command: string, cause: unknown) =>
  new KafkaBrokerError({
    reason: "StartFailed",
    detail: `could not run ${command}: ${cause instanceof Error ? cause.message : String(cause)}`,
    cause
  })

/** The last lines of some output, for error messages. */
export const tail = (text: string, lines = 30): string => text.trimEnd().split("\n").slice(-lines).join("\n")

/** A process this module started or attached to by pid. */
export interface Running {
  readonly pid: number
  /** Whether it still runs. */
  readonly isAlive: Effect.Effect<boolean>
  /** Completes when it has exited. */
  readonly awaitExit: Effect.Effect<void>
  readonly signal: (signal: NodeJS.Signals) => Effect.Effect<void>
}

export interface SpawnOptions {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  /** stdout and stderr are appended to this file. */
  readonly outputFile: string
  /** Let the process outlive this one (own process group, not waited for). */
  readonly detached: boolean
  readonly env?: Readonly<Record<string, string>>
  /** Run as this user and group (only as root: a server that refuses to run as root). */
  readonly user?: { readonly uid: number; readonly gid: number } | undefined
}

// Children that must not outlive this process, killed when it exits.
const attachedChildren = new Set<ChildProcess.ChildProcess>()
let exitHookInstalled = false
const installExitHook = () => {
  if (exitHookInstalled) return
  exitHookInstalled = true
  process.once("exit", () => {
    for (const child of attachedChildren) child.kill("SIGKILL")
  })
}

/** Starts a long-running process with its output going to a file. */
export const spawn = (options: SpawnOptions): Effect.Effect<Running, KafkaBrokerError> =>
  Effect.gen(function*() {
    const exited = yield* Deferred.make<void>()
    const child = yield* Effect.try({
      try: () => {
        const fd = Fs.openSync(options.outputFile, "a")
        try {
          return ChildProcess.spawn(options.command, [...options.args], {
            cwd: options.cwd,
            env: childEnv(options.env),
            detached: options.detached,
            stdio: ["ignore", fd, fd],
            ...options.user
          })
        } finally {
          Fs.closeSync(fd)
        }
      },
      catch: (cause) => spawnError(options.command, cause)
    })
    const started = yield* Effect.async<number, KafkaBrokerError>((resume) => {
      const onError = (cause: Error) => resume(Effect.fail(spawnError(options.command, cause)))
      child.once("error", onError)
      child.once("spawn", () => {
        child.off("error", onError)
        if (child.pid === undefined) resume(Effect.fail(spawnError(options.command, "no pid")))
        else resume(Effect.succeed(child.pid))
      })
    })
    child.once("exit", () => {
      attachedChildren.delete(child)
      Deferred.unsafeDone(exited, Effect.void)
    })
    if (options.detached) {
      child.unref()
    } else {
      attachedChildren.add(child)
      installExitHook()
    }
    return {
      pid: started,
      isAlive: Effect.map(Deferred.isDone(exited), (done) => !done && pidAlive(started)),
      awaitExit: Deferred.await(exited),
      signal: (signal) =>
        Effect.sync(() => {
          if (child.exitCode === null && child.signalCode === null) child.kill(signal)
        })
    } satisfies Running
  })

/**
 * Whether a pid runs (a zombie does not). Where `/proc` exists, a process
 * whose command line lacks `marker` counts as gone (the pid was reused).
 */
export const pidAlive = (pid: number, marker?: string): boolean => {
  try {
    process.kill(pid, 0)
  } catch (cause) {
    if ((cause as NodeJS.ErrnoException).code !== "EPERM") return false
  }
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
    if (state === "Z" || state === "X") return false
    if (marker !== undefined) {
      const cmdline = Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")
      return cmdline.includes(marker)
    }
    return true
  } catch {
    return true
  }
}

/** A process known only by its pid (started by another process). */
export const attach = (pid: number, marker?: string): Running => {
  const isAlive = Effect.sync(() => pidAlive(pid, marker))
  return {
    pid,
    isAlive,
    awaitExit: isAlive.pipe(
      Effect.repeat({ schedule: Schedule.spaced(Duration.millis(50)), while: (alive) => alive }),
      Effect.asVoid
    ),
    signal: (signal) =>
      Effect.sync(() => {
        if (!pidAlive(pid, marker)) return
        try {
          process.kill(pid, signal)
        } catch {
          // already gone
        }
      })
  }
}

/**
 * Ends a process: `signal` (SIGTERM asks for a clean shutdown), then SIGKILL
 * if it has not exited after `graceMs`. Completes once it has exited.
 */
export const terminate = (
  target: Running,
  signal: NodeJS.Signals,
  graceMs: number
): Effect.Effect<{ readonly forced: boolean }> =>
  Effect.gen(function*() {
    yield* target.signal(signal)
    const exited = yield* target.awaitExit.pipe(Effect.timeout(Duration.millis(graceMs)), Effect.option)
    if (Option.isSome(exited)) return { forced: false }
    yield* target.signal("SIGKILL")
    yield* target.awaitExit
    return { forced: true }
  })
