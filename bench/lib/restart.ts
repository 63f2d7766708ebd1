/**
 * The restart phase (bench/README.md, "What is measured"): how long a stateful contender takes
 * from a restart to its first new output, with a large state, cold (state directory wiped)
 * against warm (kept).
 *
 * The contender builds a state of `keys` keys (one input record per key, seeded shuffle), is
 * stopped gracefully (SIGTERM, waiting for it to exit), and its output is verified. Then, twice
 * (warm and cold, the order given by the caller): a batch of new records to keys the state
 * already has is produced, a read_committed reader is placed at the output's end, the contender
 * is spawned, and the time from the spawn to the first (and to the last) new output is taken;
 * every new output must carry the count that continues the key's state. Then it is stopped
 * gracefully again.
 */
import { mkdirSync, readdirSync, rmSync, statSync } from "node:fs"
import { loadavg } from "node:os"
import { join } from "node:path"
import type { Admin, Consumer, Kafka, Message } from "kafkajs"
import type { AppSpec, ProcessContender } from "../contenders/types.ts"
import { createTopics, groupCaughtUp, inputProducer, keyName, preload, topicEnds, verifyOutput, type Workload } from "./kafka.ts"
import type { AppProcess, Command } from "./proc.ts"
import type { ClientConfigFiles } from "./security.ts"
import { fmtInt, mulberry32, sleep } from "./stats.ts"

export type RestartKind = "warm" | "cold"

/** One restart's figures (JSON field names are the report's). */
export interface RestartMeasure {
  readonly kind: RestartKind
  /** Spawn → the first new output read read_committed (the phase's figure). */
  readonly firstOutputSeconds?: number
  /** Spawn → the last of the batch's outputs. */
  readonly allOutputsSeconds?: number
  /** Changelog records the contender reported restoring (its last restore-end). */
  readonly restoredRecords?: number
  /** Skein: tasks restored from a kept checkpoint / from the whole changelog. */
  readonly tailTasks?: number
  readonly fullTasks?: number
  /** New outputs read, and their check against the counts the state continues from. */
  readonly outputs: number
  readonly check: string
  /** 1-min load average at the spawn and once the batch's outputs were in. */
  readonly loadAtSpawn: number
  readonly loadAtEnd: number
  /** The graceful stop after it: seconds, and whether it exited by itself within the grace. */
  readonly stopSeconds: number
  readonly stoppedCleanly: boolean
}

export interface RestartResult {
  readonly keys: number
  readonly batch: number
  readonly order: ReadonlyArray<RestartKind>
  /** Building the state: first read → group caught up, and the output check. */
  readonly buildSeconds?: number
  readonly buildVerified?: string
  readonly buildLoad: number
  readonly warm?: RestartMeasure
  readonly cold?: RestartMeasure
}

export interface RestartCtx {
  readonly kafka: Kafka
  readonly admin: Admin
  readonly brokers: string
  readonly clientConfig: ClientConfigFiles | undefined
  readonly partitions: number
  readonly valueBytes: number
  readonly keys: number
  readonly batch: number
  readonly commitIntervalMs: number
  /** Limit for building the state. */
  readonly timeoutMs: number
  readonly workDir: string
  readonly log: (m: string) => void
}

/** Each restart waits this long for the batch's outputs. */
const MEASURE_TIMEOUT_MS = 600_000
/** Graceful stop: SIGTERM, then SIGKILL after this long. */
const STOP_GRACE_MS = 120_000

const load1 = (): number => loadavg()[0] ?? 0

/** 0..n-1 in a seeded random order: every key exactly once. */
const permutation = (n: number, seed: number): Uint32Array => {
  const rand = mulberry32(seed)
  const a = new Uint32Array(n)
  for (let i = 0; i < n; i++) a[i] = i
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1))
    const t = a[i] ?? 0
    a[i] = a[j] ?? 0
    a[j] = t
  }
  return a
}

/** Files, bytes and Kafka Streams `.checkpoint` files under a state directory. */
const stateDirSummary = (dir: string): string => {
  let files = 0
  let bytes = 0
  let checkpoints = 0
  const walk = (d: string): void => {
    let entries: ReadonlyArray<string> = []
    try {
      entries = readdirSync(d)
    } catch {
      return
    }
    for (const e of entries) {
      const p = join(d, e)
      try {
        const s = statSync(p)
        if (s.isDirectory()) walk(p)
        else {
          files++
          bytes += s.size
          if (e === ".checkpoint") checkpoints++
        }
      } catch {
        // gone meanwhile
      }
    }
  }
  walk(dir)
  return `${fmtInt(files)} files, ${(bytes / 2 ** 20).toFixed(0)} MiB${checkpoints > 0 ? `, ${checkpoints} .checkpoint files` : ""}`
}

/**
 * A read_committed reader of the outputs that follow `ends`, checking each against the count
 * expected for its key (the state's count, then +1 per new record of that key).
 */
class NewOutputs {
  firstAt: number | undefined
  lastAt: number | undefined
  received = 0
  matched = 0
  wrong = 0
  private readonly sample: string[] = []
  private readonly position = new Map<number, number>()

  private constructor(
    private readonly consumer: Consumer,
    private readonly expected: ReadonlyMap<number, ReadonlyArray<number>>,
    readonly total: number,
  ) {}

  static async start(kafka: Kafka, admin: Admin, topic: string, expected: ReadonlyMap<number, ReadonlyArray<number>>, total: number): Promise<NewOutputs> {
    const groupId = `bench-restart-${topic}-${Date.now()}`
    const ends = await topicEnds(admin, topic)
    await admin.setOffsets({ groupId, topic, partitions: [...ends].map(([partition, offset]) => ({ partition, offset: String(offset) })) })
    const consumer = kafka.consumer({ groupId, readUncommitted: false, maxWaitTimeInMs: 50 })
    const reader = new NewOutputs(consumer, expected, total)
    let joined = false
    consumer.on(consumer.events.GROUP_JOIN, () => {
      joined = true
    })
    await consumer.connect()
    await consumer.subscribe({ topic })
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        const now = Date.now()
        for (const m of batch.messages) {
          if (m.key === null || m.value === null) continue
          reader.onOutput(m.key.toString(), m.value.toString(), now)
        }
      },
    })
    const by = Date.now() + 60_000
    while (!joined && Date.now() < by) await sleep(50)
    if (!joined) throw new Error("restart: the output reader did not join its group in 60 s")
    await sleep(500) // its first fetch is under way before the contender starts
    return reader
  }

  private onOutput(key: string, value: string, now: number): void {
    this.received++
    this.firstAt ??= now
    const k = Number.parseInt(key.slice(4), 10)
    const v = Number.parseInt(value, 10)
    const at = this.position.get(k) ?? 0
    const want = this.expected.get(k)?.[at]
    if (want !== undefined && v === want) {
      this.position.set(k, at + 1)
      this.matched++
      if (this.matched === this.total) this.lastAt = now
    } else {
      this.wrong++
      if (this.sample.length < 3) this.sample.push(`${key}=${value} (expected ${want ?? "no output"})`)
    }
  }

  check(): string {
    if (this.matched === this.total && this.wrong === 0) return "exact"
    return `WRONG: ${fmtInt(this.matched)}/${fmtInt(this.total)} expected outputs, ${fmtInt(this.wrong)} unexpected` +
      (this.sample.length > 0 ? ` (${this.sample.join(", ")})` : "")
  }

  stop(): Promise<void> {
    return this.consumer.disconnect().catch(() => undefined)
  }
}

/** Runs the restart phase of one contender run; its notes go to `notes`. */
export const runRestartPhase = async (
  c: ProcessContender,
  run: number,
  prefix: string,
  x: RestartCtx,
  spawn: (cmd: Command, logFile: string) => AppProcess,
  notes: string[],
): Promise<RestartResult> => {
  const input = `${prefix}.rs.in`
  const output = `${prefix}.rs.out`
  const stateDir = join(x.workDir, `${c.name}-r${run}`, "restart-state")
  const logFile = join(x.workDir, `${c.name}-r${run}.restart.log`)
  mkdirSync(stateDir, { recursive: true })
  const spec: AppSpec = { brokers: x.brokers, input, output, group: `${prefix}.rs`, stateDir, commitIntervalMs: x.commitIntervalMs, clientConfig: x.clientConfig }
  const order: ReadonlyArray<RestartKind> = run % 2 === 1 ? ["warm", "cold"] : ["cold", "warm"]
  const buildLoad = load1()
  const result: { -readonly [K in keyof RestartResult]: RestartResult[K] } = { keys: x.keys, batch: x.batch, order, buildLoad }

  // The state: one record per key, so every key's count is 1.
  await createTopics(x.admin, [input, output], x.partitions)
  const w: Workload = { records: x.keys, partitions: x.partitions, keys: x.keys, valueBytes: x.valueBytes, seed: 43 }
  const preloadSec = await preload(x.kafka, input, w, permutation(x.keys, w.seed))
  x.log(`   restart phase: preloaded ${fmtInt(x.keys)} records (one per key) in ${preloadSec.toFixed(1)} s`)
  const counts = new Int32Array(x.keys).fill(1)
  const inputEnds = await topicEnds(x.admin, input)
  const inputRecords = [...inputEnds.values()].reduce((sum, end) => sum + end, 0)
  if (inputRecords !== x.keys) notes.push(`restart phase: the input has ${fmtInt(inputRecords)} records, not ${fmtInt(x.keys)} (producer retries?)`)

  const stopGracefully = async (app: AppProcess): Promise<{ seconds: number; clean: boolean; text: string }> => {
    const t0 = Date.now()
    const byItself = await app.stop(STOP_GRACE_MS)
    const seconds = (Date.now() - t0) / 1000
    // A JVM stopped by SIGTERM exits 143 after its shutdown hooks ran: still a clean stop.
    const text = `graceful stop ${seconds.toFixed(1)} s ` + (byItself ? `(exit ${app.code() ?? "by signal"})` : `(NOT clean: SIGKILLed after ${STOP_GRACE_MS / 1000} s)`)
    return { seconds, clean: byItself, text }
  }

  const builder = spawn(c.command(spec), logFile)
  const deadline = Date.now() + x.timeoutMs
  let caughtUpAt: number | undefined
  while (Date.now() < deadline && builder.alive()) {
    if (await groupCaughtUp(x.admin, spec.group, input, inputEnds).catch(() => false)) {
      caughtUpAt = Date.now()
      break
    }
    await sleep(250)
  }
  if (caughtUpAt === undefined) {
    notes.push(`restart phase: the state was not built (${builder.alive() ? `not caught up within ${x.timeoutMs / 1000} s` : `process exited, see ${logFile}`})`)
    await builder.kill()
    return result
  }
  result.buildSeconds = (caughtUpAt - (builder.event("first-read")?.ts ?? builder.spawnedAt)) / 1000
  const built = await stopGracefully(builder)
  const v = await verifyOutput(x.kafka, output, counts, 15_000)
  result.buildVerified = v.exact ? "exact" : `WRONG: ${v.keysWrong} keys off, ${v.gaps} gaps, ${fmtInt(v.records)} records`
  notes.push(
    `restart phase: state of ${fmtInt(x.keys)} keys built in ${result.buildSeconds.toFixed(1)} s ` +
      `(${fmtInt(x.keys / result.buildSeconds)} rec/s, load ${buildLoad.toFixed(1)}), output ${result.buildVerified}; ` +
      `${built.text}; state dir ${stateDirSummary(stateDir)}`,
  )
  if (!v.exact) return result

  const rand = mulberry32(1000 + run)
  const producer = inputProducer(x.kafka)
  await producer.connect()
  try {
    for (const kind of order) {
      if (kind === "cold") {
        rmSync(stateDir, { recursive: true, force: true })
        mkdirSync(stateDir, { recursive: true })
      }
      // The batch: keys the state has; each output must continue that key's count.
      const expected = new Map<number, number[]>()
      const messages: Message[] = []
      const value = Buffer.alloc(x.valueBytes, 97)
      for (let i = 0; i < x.batch; i++) {
        const k = Math.floor(rand() * x.keys)
        counts[k] = (counts[k] ?? 0) + 1
        const list = expected.get(k) ?? []
        list.push(counts[k] ?? 0)
        expected.set(k, list)
        messages.push({ key: keyName(k), value })
      }
      await producer.send({ topic: input, messages, acks: -1 })
      const reader = await NewOutputs.start(x.kafka, x.admin, output, expected, x.batch)
      const loadAtSpawn = load1()
      const app = spawn(c.command(spec), logFile)
      const by = Date.now() + MEASURE_TIMEOUT_MS
      while (reader.lastAt === undefined && Date.now() < by && app.alive()) await sleep(50)
      // Anything unexpected behind the batch (a duplicate) would show within a moment.
      await sleep(2000)
      const loadAtEnd = load1()
      // Skein reports restore-end 2 s after its counters settle; Kafka Streams before it processes.
      if (app.events.some((e) => e.event === "restore-start")) await app.waitFor((e) => e.event === "restore-end", 10_000)
      const restoreEnd = app.events.filter((e) => e.event === "restore-end").pop()
      const restoredRecords = restoreEnd?.records ?? (app.events.some((e) => e.event === "restore-start") ? undefined : 0)
      await reader.stop()
      const stopped = await stopGracefully(app)
      const m: RestartMeasure = {
        kind,
        ...(reader.firstAt !== undefined ? { firstOutputSeconds: (reader.firstAt - app.spawnedAt) / 1000 } : {}),
        ...(reader.lastAt !== undefined ? { allOutputsSeconds: (reader.lastAt - app.spawnedAt) / 1000 } : {}),
        ...(restoredRecords !== undefined ? { restoredRecords } : {}),
        ...(restoreEnd?.tailTasks !== undefined ? { tailTasks: restoreEnd.tailTasks } : {}),
        ...(restoreEnd?.fullTasks !== undefined ? { fullTasks: restoreEnd.fullTasks } : {}),
        outputs: reader.received,
        check: reader.check(),
        loadAtSpawn,
        loadAtEnd,
        stopSeconds: stopped.seconds,
        stoppedCleanly: stopped.clean,
      }
      result[kind] = m
      const since = (name: string): string | undefined => {
        const e = app.event(name)
        return e === undefined ? undefined : `${name} at ${((e.ts - app.spawnedAt) / 1000).toFixed(1)} s`
      }
      const milestones = ["started", "restore-start", "first-read", "running"].map(since).filter((t) => t !== undefined)
      notes.push(
        `restart ${kind}: first new output ${m.firstOutputSeconds?.toFixed(2) ?? "–"} s after the spawn, all ${fmtInt(x.batch)} after ` +
          `${m.allOutputsSeconds?.toFixed(2) ?? "–"} s${milestones.length === 0 ? "" : ` (${milestones.join(", ")})`}; ` +
          `restored ${m.restoredRecords === undefined ? "? (restore started, no restore-end)" : fmtInt(m.restoredRecords)} changelog records` +
          (restoreEnd === undefined && restoredRecords === 0 ? " (no restore reported)" : "") +
          (m.tailTasks !== undefined ? ` (tasks: ${m.tailTasks} from the kept checkpoint, ${m.fullTasks ?? 0} in full)` : "") +
          `; new outputs ${m.check}; load ${loadAtSpawn.toFixed(1)} → ${loadAtEnd.toFixed(1)}; ` +
          `${stopped.text}; state dir ${stateDirSummary(stateDir)}`,
      )
      x.log(`   restart ${kind}: first new output ${m.firstOutputSeconds?.toFixed(2) ?? "–"} s, restored ${m.restoredRecords ?? "?"}, outputs ${m.check}`)
    }
  } finally {
    await producer.disconnect().catch(() => undefined)
  }
  return result
}
