/**
 * App instances as OS processes: started under node (tsx), bun or deno,
 * killed with SIGKILL, stopped with SIGTERM, restarted like an orchestrator
 * would (a crashed instance is restarted after a second). Each instance is a
 * process group of its own, so a signal reaches everything it started.
 */
import { Deferred, Duration, Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

export type RuntimeName = "node" | "bun" | "deno"

export const runtimeNames: ReadonlyArray<RuntimeName> = ["node", "bun", "deno"]

/** The command line running `file` (a .ts entry point) under `runtime`, from the repository root. */
export const commandFor = (
  root: string,
  runtime: RuntimeName,
  file: string,
  args: ReadonlyArray<string>
): { readonly command: string; readonly args: ReadonlyArray<string> } => {
  switch (runtime) {
    case "node":
      return { command: process.execPath, args: ["--import", "tsx", file, ...args] }
    case "bun":
      return { command: Path.join(root, "node_modules", "bun", "bin", "bun.exe"), args: [file, ...args] }
    case "deno":
      return { command: Path.join(root, "node_modules", "deno", "deno"), args: ["run", "-A", file, ...args] }
  }
}

/** What one app's instances run. */
export interface AppSpec {
  /** The app (and group) label, e.g. `echo`, `pipeline-1`. */
  readonly label: string
  /** The app the faults are counted against, e.g. `pipeline` for both its stages. */
  readonly app: string
  readonly file: string
  readonly args: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
}

type Phase = "running" | "stopping" | "killed" | "exited"

/** One instance slot: a process, restarted in place. */
export interface Instance {
  readonly id: string
  readonly spec: AppSpec
  readonly slot: number
  /** Extra instances (joins) are not restarted when they exit. */
  readonly extra: boolean
  starts: number
  runtime: RuntimeName
  child: ChildProcess.ChildProcess | undefined
  phase: Phase
  /** Resolved when the current process exits. */
  exited: Deferred.Deferred<number | null>
  /** The last JSON status line the process printed. */
  lastStatus: Record<string, unknown> | undefined
  crashes: number
  /** Start of the current process. */
  startedAt: number
}

export interface FleetOptions {
  readonly root: string
  readonly logDir: string
  readonly runtimes: ReadonlyArray<RuntimeName>
  /** Per-instance environment additions (e.g. a state directory). */
  readonly envFor: (instance: { readonly id: string }) => Readonly<Record<string, string>>
}

/** The instances of every app, and the supervisor that restarts crashed ones. */
export interface Fleet {
  readonly instances: ReadonlyArray<Instance>
  readonly add: (spec: AppSpec, extra: boolean) => Effect.Effect<Instance>
  readonly start: (instance: Instance) => Effect.Effect<void>
  /** SIGKILL; the instance stays down until `start`. */
  readonly kill: (instance: Instance) => Effect.Effect<void>
  /** SIGSTOP: the process freezes (a zombie to be, once its session times out); `thaw` resumes it. */
  readonly freeze: (instance: Instance) => Effect.Effect<boolean>
  readonly thaw: (instance: Instance) => Effect.Effect<void>
  /** SIGTERM and wait for the exit (SIGKILL after `timeout`); returns whether it exited by itself. */
  readonly stop: (instance: Instance, timeout: Duration.Duration) => Effect.Effect<boolean>
  readonly running: () => ReadonlyArray<Instance>
  /** Unexpected exits (crashes) so far, per app label. */
  readonly crashes: () => ReadonlyMap<string, number>
  /** No more restarts of crashed instances (before the final stop). */
  readonly closeRestarts: () => void
  /** Kills every process at once (synchronously; for exit handlers). */
  readonly killAllNow: () => void
}

const signalGroup = (child: ChildProcess.ChildProcess, signal: NodeJS.Signals) => {
  if (child.pid === undefined) return
  try {
    process.kill(-child.pid, signal)
  } catch {
    try {
      child.kill(signal)
    } catch {
      // already gone
    }
  }
}

export const makeFleet = (options: FleetOptions): Effect.Effect<Fleet> =>
  Effect.sync(() => {
    const instances: Array<Instance> = []
    const crashCounts = new Map<string, number>()
    let closed = false
    Fs.mkdirSync(options.logDir, { recursive: true })

    const spawn = (instance: Instance) =>
      Effect.gen(function*() {
        const runtime = options.runtimes[(instance.slot + instance.starts) % options.runtimes.length] ?? "node"
        instance.starts++
        instance.runtime = runtime
        const { command, args } = commandFor(options.root, runtime, instance.spec.file, instance.spec.args)
        const logFile = Path.join(options.logDir, `${instance.id}.log`)
        const log = Fs.openSync(logFile, "a")
        Fs.writeSync(log, `\n# ${new Date().toISOString()} start #${instance.starts} (${runtime}): ${command} ${args.join(" ")}\n`)
        const exited = yield* Deferred.make<number | null>()
        const child = ChildProcess.spawn(command, [...args], {
          cwd: options.root,
          env: { ...process.env, ...instance.spec.env, ...options.envFor(instance) },
          stdio: ["ignore", "pipe", log],
          detached: true
        })
        Fs.closeSync(log)
        instance.child = child
        instance.exited = exited
        instance.phase = "running"
        instance.startedAt = Date.now()
        instance.lastStatus = undefined
        let pending = ""
        const append = Fs.createWriteStream(logFile, { flags: "a" })
        child.stdout?.on("data", (data: Buffer) => {
          if (!append.writableEnded) append.write(data)
          pending += data.toString("utf8")
          const lines = pending.split("\n")
          pending = lines.pop() ?? ""
          for (const line of lines) {
            if (!line.startsWith("{")) continue
            try {
              const parsed: unknown = JSON.parse(line)
              if (typeof parsed === "object" && parsed !== null) instance.lastStatus = parsed as Record<string, unknown>
            } catch {
              // not a status line
            }
          }
        })
        child.on("error", (error) => {
          if (!append.writableEnded) append.write(`# spawn error: ${String(error)}\n`)
        })
        // "exit" can come before the last stdout data: end the log once stdio is closed.
        child.on("close", (code, signal) => {
          if (!append.writableEnded) append.end(`# exited code=${code} signal=${signal}\n`)
        })
        child.on("exit", (code) => {
          const expected = instance.phase !== "running"
          instance.phase = instance.phase === "killed" ? "killed" : "exited"
          if (instance.child === child) instance.child = undefined
          Deferred.unsafeDone(exited, Effect.succeed(code))
          if (!expected && !closed) {
            // A crash: the orchestrator restarts it (extra instances just leave).
            instance.crashes++
            crashCounts.set(instance.spec.label, (crashCounts.get(instance.spec.label) ?? 0) + 1)
            if (!instance.extra) {
              Effect.runFork(Effect.sleep(Duration.seconds(1)).pipe(
                Effect.zipRight(Effect.suspend(() =>
                  closed || instance.phase === "running" ? Effect.void : spawn(instance)
                ))
              ))
            }
          }
        })
      })

    const fleet: Fleet = {
      instances,
      add: (spec, extra) =>
        Effect.gen(function*() {
          const slot = instances.filter((i) => i.spec.label === spec.label).length
          const instance: Instance = {
            id: `${spec.label}-${slot}`,
            spec,
            slot,
            extra,
            starts: 0,
            runtime: options.runtimes[slot % options.runtimes.length] ?? "node",
            child: undefined,
            phase: "exited",
            exited: yield* Deferred.make<number | null>(),
            lastStatus: undefined,
            crashes: 0,
            startedAt: 0
          }
          instances.push(instance)
          return instance
        }),
      start: (instance) => Effect.suspend(() => (instance.phase === "running" ? Effect.void : spawn(instance))),
      kill: (instance) =>
        Effect.gen(function*() {
          const child = instance.child
          if (child === undefined || instance.phase !== "running") return
          instance.phase = "killed"
          signalGroup(child, "SIGKILL")
          yield* Deferred.await(instance.exited)
        }),
      freeze: (instance) =>
        Effect.sync(() => {
          const child = instance.child
          if (child === undefined || instance.phase !== "running") return false
          signalGroup(child, "SIGSTOP")
          return true
        }),
      thaw: (instance) =>
        Effect.sync(() => {
          if (instance.child !== undefined) signalGroup(instance.child, "SIGCONT")
        }),
      stop: (instance, timeout) =>
        Effect.gen(function*() {
          const child = instance.child
          if (child === undefined || instance.phase !== "running") return true
          instance.phase = "stopping"
          signalGroup(child, "SIGTERM")
          signalGroup(child, "SIGCONT") // in case it is frozen
          const clean = yield* Deferred.await(instance.exited).pipe(
            Effect.as(true),
            Effect.timeoutTo({ duration: timeout, onTimeout: () => false, onSuccess: (x) => x })
          )
          if (!clean) {
            signalGroup(child, "SIGKILL")
            yield* Deferred.await(instance.exited)
          }
          return clean
        }),
      running: () => instances.filter((i) => i.phase === "running"),
      crashes: () => crashCounts,
      closeRestarts: () => {
        closed = true
      },
      killAllNow: () => {
        closed = true
        for (const i of instances) if (i.child !== undefined) signalGroup(i.child, "SIGKILL")
      }
    }
    return fleet
  })

/** A short description of an instance for progress lines: id, runtime, phase, assigned tasks. */
export const statusOf = (instance: Instance): string => {
  const s = instance.lastStatus
  const assigned = s !== undefined && Array.isArray(s["assigned"]) ? (s["assigned"] as Array<unknown>).join(",") : ""
  return `${instance.id}(${instance.runtime}${instance.phase === "running" ? "" : `:${instance.phase}`}${
    assigned === "" ? "" : ` [${assigned}]`
  })`
}
