/**
 * Contender processes: spawn, read the JSON-lines event protocol from stdout, sample the peak
 * RSS of the process tree, stop.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { createWriteStream, readdirSync, readFileSync, type WriteStream } from "node:fs"
import { createInterface } from "node:readline"
import { sleep } from "./stats.ts"

export interface AppEvent {
  readonly event: string
  readonly ts: number
  readonly records?: number
  /** restore-end (Skein): tasks restored from their kept checkpoint (the changelog's tail). */
  readonly tailTasks?: number
  /** restore-end (Skein): tasks restored from the whole changelog. */
  readonly fullTasks?: number
}

export interface Command {
  readonly cmd: string
  readonly args: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>>
  readonly cwd?: string
}

const readKb = (pid: number, field: "VmRSS" | "VmHWM"): number => {
  try {
    const s = readFileSync(`/proc/${pid}/status`, "utf8")
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(s)
    return m?.[1] === undefined ? 0 : Number(m[1])
  } catch {
    return 0
  }
}

/** Clock ticks per second of /proc/<pid>/stat's times (`getconf CLK_TCK`: 100 on Linux). */
const CLK_TCK = 100

/** CPU seconds (user + system) a process has used, from /proc/<pid>/stat; 0 once it is gone. */
const cpuSecondsOf = (pid: number): number => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    // Fields 14 and 15 (utime, stime), counted from the state (field 3) after the command's name.
    return (Number(rest[11]) + Number(rest[12])) / CLK_TCK
  } catch {
    return 0
  }
}

/** pid plus all its descendants, from /proc/<pid>/stat parent links. */
const processTree = (root: number): number[] => {
  const parent = new Map<number, number>()
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8")
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      parent.set(Number(d), Number(rest[1]))
    } catch {
      // process went away
    }
  }
  const out = [root]
  for (let i = 0; i < out.length; i++) for (const [p, pp] of parent) if (pp === out[i]) out.push(p)
  return out
}

export class AppProcess {
  readonly child: ChildProcess
  readonly events: AppEvent[] = []
  private readonly waiters: Array<{ pred: (e: AppEvent) => boolean; resolve: (e: AppEvent) => void }> = []
  private peakKb = 0
  /** The process tree's CPU seconds when each event was read (the first of each name). */
  private readonly cpuAt = new Map<string, number>()
  private sampler: NodeJS.Timeout | undefined
  private exitCode: number | null | undefined = undefined
  readonly exited: Promise<void>
  private readonly log: WriteStream
  readonly spawnedAt = Date.now()

  constructor(command: Command, logFile: string) {
    this.log = createWriteStream(logFile, { flags: "a" })
    this.log.write(`$ ${command.cmd} ${command.args.join(" ")}\n`)
    this.child = spawn(command.cmd, [...command.args], {
      cwd: command.cwd,
      env: { ...process.env, ...command.env },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true, // own process group: stop() can signal the whole tree
    })
    this.exited = new Promise((resolve) => {
      this.child.on("exit", (code, signal) => {
        this.exitCode = code
        this.log.write(`# exited code=${code} signal=${signal}\n`)
        resolve()
      })
      this.child.on("error", (e) => {
        this.exitCode = -1
        this.log.write(`# spawn error ${String(e)}\n`)
        resolve()
      })
    })
    const out = this.child.stdout
    if (out !== null) {
      createInterface({ input: out }).on("line", (line) => {
        this.log.write(`${line}\n`)
        if (!line.startsWith("{")) return
        try {
          const e = JSON.parse(line) as Partial<AppEvent>
          if (typeof e.event !== "string") return
          const ev: AppEvent = {
            event: e.event,
            ts: typeof e.ts === "number" ? e.ts : Date.now(),
            ...(typeof e.records === "number" ? { records: e.records } : {}),
            ...(typeof e.tailTasks === "number" ? { tailTasks: e.tailTasks } : {}),
            ...(typeof e.fullTasks === "number" ? { fullTasks: e.fullTasks } : {}),
          }
          this.events.push(ev)
          if (!this.cpuAt.has(ev.event)) this.cpuAt.set(ev.event, this.cpuSeconds())
          for (const w of this.waiters.splice(0)) {
            if (w.pred(ev)) w.resolve(ev)
            else this.waiters.push(w)
          }
        } catch {
          // not an event line
        }
      })
    }
    this.child.stderr?.on("data", (d: Buffer) => this.log.write(d))
    this.sampler = setInterval(() => this.sample(), 200)
  }

  private sample(): void {
    const pid = this.child.pid
    if (pid === undefined || !this.alive()) return
    let sum = 0
    for (const p of processTree(pid)) sum += readKb(p, "VmRSS")
    this.peakKb = Math.max(this.peakKb, sum, readKb(pid, "VmHWM"))
  }

  alive(): boolean {
    return this.exitCode === undefined
  }

  /** CPU seconds (user + system) the process tree has used so far (Linux /proc). */
  cpuSeconds(): number {
    const pid = this.child.pid
    if (pid === undefined || !this.alive()) return 0
    return processTree(pid).reduce((sum, p) => sum + cpuSecondsOf(p), 0)
  }

  /** The process tree's CPU seconds when the first event named `name` was read; undefined before it. */
  cpuAtEvent(name: string): number | undefined {
    return this.cpuAt.get(name)
  }

  peakRssMiB(): number {
    return this.peakKb / 1024
  }

  event(name: string): AppEvent | undefined {
    return this.events.find((e) => e.event === name)
  }

  waitFor(pred: (e: AppEvent) => boolean, timeoutMs: number): Promise<AppEvent | undefined> {
    const hit = this.events.find(pred)
    if (hit !== undefined) return Promise.resolve(hit)
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(undefined), timeoutMs)
      void this.exited.then(() => {
        clearTimeout(t)
        resolve(this.events.find(pred))
      })
      this.waiters.push({
        pred,
        resolve: (e) => {
          clearTimeout(t)
          resolve(e)
        },
      })
    })
  }

  /** SIGKILL the whole process group (a crash). */
  async kill(): Promise<void> {
    this.sample()
    if (this.sampler !== undefined) clearInterval(this.sampler)
    const pid = this.child.pid
    if (pid !== undefined && this.alive()) {
      try {
        process.kill(-pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
    await this.exited
    this.log.end()
  }

  /** SIGTERM, then SIGKILL after graceMs. True when it exited by itself within graceMs. */
  async stop(graceMs = 10_000): Promise<boolean> {
    this.sample()
    const pid = this.child.pid
    if (pid !== undefined && this.alive()) {
      try {
        process.kill(-pid, "SIGTERM")
      } catch {
        // already gone
      }
      await Promise.race([this.exited, sleep(graceMs)])
    }
    const byItself = !this.alive()
    await this.kill()
    return byItself
  }

  /** The exit code once exited (null after a signal), undefined while running. */
  code(): number | null | undefined {
    return this.exitCode
  }
}

/** Runs a command to completion, capturing stdout; resolves with exit code and output. */
export const runToEnd = (
  command: Command,
  logFile: string,
  timeoutMs: number,
): Promise<{ code: number | null; stdout: string; peakRssMiB: number }> =>
  new Promise((resolve) => {
    const p = new AppProcess(command, logFile)
    let stdout = ""
    p.child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()))
    const t = setTimeout(() => void p.kill(), timeoutMs)
    void p.exited.then(async () => {
      clearTimeout(t)
      const code = p.child.exitCode
      const peak = p.peakRssMiB()
      await p.kill()
      resolve({ code, stdout, peakRssMiB: peak })
    })
  })
