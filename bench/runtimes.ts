/**
 * Skein's count (bench/apps/skein-count.ts, exactly-once) on Node, Bun and Deno side by side
 * against one running broker (issue 36): one preloaded input, a fresh group and output per run,
 * the runtimes alternating (reversed every other round). Made to compare runtimes on a busy
 * machine, where the throughput alone says little: per run it prints
 *  - the rate (input records / first read -> every input offset committed),
 *  - the process tree's CPU per record (user + system, first read -> done),
 *  - the main thread's time on the CPU, waiting in the run queue (other work on the machine) and
 *    sleeping (waiting on the broker or a timer), from /proc/<pid>/task/<pid>/schedstat,
 *  - when the tasks started (each task's "restored" log line) after the first read,
 *  - the peak RSS of the process tree;
 * then the medians per runtime and their ratios to the first one.
 *
 *   KAFKA_BROKERS=$(cat /tmp/skein-broker) npx tsx bench/runtimes.ts --records 300000 --partitions 48 --rounds 2 \
 *     --variant node:node --variant bun:bun [--variant deno:deno] [--variant 'bun-smol:bun::--smol']
 *
 * A variant is `name:runtime[:ENV=V,ENV=V[:runtime flags]]` (e.g. Bun's `--cpu-prof --cpu-prof-dir=/tmp/p`;
 * SKEIN_BENCH_BUILD=<index.js> runs another build). The app loads dist/: `npm run build` first.
 * Logs: <--log-dir>/<run>.log. Outputs are not checked here (`npm run bench` checks them).
 */
import { mkdirSync, readFileSync, rmSync } from "node:fs"
import { loadavg } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { createTopics, deleteTopics, groupCaughtUp, keySequence, makeKafka, preload, topicEnds } from "./lib/kafka.ts"
import { AppProcess } from "./lib/proc.ts"
import type { Command } from "./lib/proc.ts"
import { sleep } from "./lib/stats.ts"

const { values } = parseArgs({
  options: {
    records: { type: "string", default: "300000" },
    partitions: { type: "string", default: "48" },
    rounds: { type: "string", default: "2" },
    variant: { type: "string", multiple: true },
    "log-dir": { type: "string", default: "/tmp/skein-runtimes" },
  },
})
const brokers = process.env["KAFKA_BROKERS"] ?? ""
if (brokers === "") {
  console.error("bench/runtimes.ts needs KAFKA_BROKERS (a running broker, e.g. $(cat /tmp/skein-broker))")
  process.exit(2)
}
const records = Number(values.records)
const partitions = Number(values.partitions)
const rounds = Number(values.rounds)
const logDir = values["log-dir"]

interface Variant {
  readonly name: string
  readonly runtime: string
  readonly env: Readonly<Record<string, string>>
  readonly flags: ReadonlyArray<string>
}
const variants: ReadonlyArray<Variant> = (values.variant ?? ["node:node", "bun:bun"]).map((spec) => {
  const [name = "", runtime = "", env = "", flags = ""] = spec.split(":")
  if (!["node", "bun", "deno"].includes(runtime)) {
    console.error(`--variant ${spec}: the runtime must be node, bun or deno (name:runtime[:ENV=V,...[:flags]])`)
    process.exit(2)
  }
  const pairs = env.split(",").filter((kv) => kv.includes("=")).map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)])
  return { name, runtime, env: Object.fromEntries(pairs), flags: flags.split(" ").filter((f) => f !== "") }
})

const root = process.cwd()
const app = join("bench", "apps", "skein-count.ts")
const bin = (runtime: string): string => join(root, "node_modules", ".bin", runtime)
const commandOf = (v: Variant, args: ReadonlyArray<string>): Command => {
  switch (v.runtime) {
    case "node":
      return { cmd: process.execPath, args: [...v.flags, "--import", "tsx", app, ...args], env: v.env }
    case "bun":
      return { cmd: bin("bun"), args: [...v.flags, app, ...args], env: v.env }
    default:
      return { cmd: bin("deno"), args: ["run", "-A", ...v.flags, app, ...args], env: { DENO_NO_UPDATE_CHECK: "1", ...v.env } }
  }
}

/** Nanoseconds the main thread of `pid` spent on the CPU and waiting in the run queue (Linux schedstat). */
const schedstat = (pid: number): { readonly run: number; readonly wait: number } => {
  try {
    const [run = 0, wait = 0] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").trim().split(" ").map(Number)
    return { run, wait }
  } catch {
    return { run: 0, wait: 0 }
  }
}

const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

interface Result {
  readonly rate: number
  readonly cpuUs: number
  readonly mainRunUs: number
  readonly lastStart: number
  readonly rss: number
}

mkdirSync(logDir, { recursive: true })
const runId = `rt-${Date.now().toString(36)}`
const kafka = makeKafka(brokers, "skein-bench-runtimes")
const admin = kafka.admin()
await admin.connect()
const workload = { records, partitions, keys: 20_000, valueBytes: 100, seed: 42 }
const input = `${runId}.in`
await createTopics(admin, [input], partitions)
console.log(`preloaded ${records} records into ${input} in ${(await preload(kafka, input, workload, keySequence(workload))).toFixed(1)} s`)
const ends = await topicEnds(admin, input)
const total = [...ends.values()].reduce((a, b) => a + b, 0)

const results = new Map<string, Array<Result>>()
try {
  for (let round = 0; round < rounds; round++) {
    for (const v of round % 2 === 0 ? variants : [...variants].reverse()) {
      const tag = `${runId}-${v.name}-r${round}`
      const output = `${tag}.out`
      await createTopics(admin, [output], partitions)
      const stateDir = join(logDir, "state", tag)
      mkdirSync(stateDir, { recursive: true })
      const logFile = join(logDir, `${tag}.log`)
      const load0 = loadavg()[0] ?? 0
      const p = new AppProcess(
        commandOf(v, ["--mode", "eos", "--brokers", brokers, "--input", input, "--output", output, "--group", tag, "--state-dir", stateDir]),
        logFile
      )
      const first = await p.waitFor((e) => e.event === "first-read", 120_000)
      const pid = p.child.pid
      if (first === undefined || pid === undefined) {
        console.log(`round ${round} ${v.name}: no first read within 120 s (log: ${logFile})`)
        await p.kill()
        continue
      }
      const sched0 = schedstat(pid)
      let doneAt: number | undefined
      while (p.alive()) {
        if (await groupCaughtUp(admin, tag, input, ends)) {
          doneAt = Date.now()
          break
        }
        await sleep(50)
      }
      const sched1 = schedstat(pid)
      const cpu = p.cpuSeconds() - (p.cpuAtEvent("first-read") ?? 0)
      const rss = p.peakRssMiB()
      await p.stop(15_000)
      if (doneAt === undefined) {
        console.log(`round ${round} ${v.name}: the process ended before the input was consumed (log: ${logFile})`)
        continue
      }
      const wall = (doneAt - first.ts) / 1000
      const run = (sched1.run - sched0.run) / 1e9
      const wait = (sched1.wait - sched0.wait) / 1e9
      const starts = [...readFileSync(logFile, "utf8").matchAll(/timestamp=(\S+) level=INFO fiber=#\d+ message="task \d+: restored/g)]
        .map((m) => Date.parse(m[1]!))
        .sort((a, b) => a - b)
      const startAt = (i: number): number => ((starts[i] ?? Number.NaN) - first.ts) / 1000
      const r: Result = { rate: total / wall, cpuUs: (cpu * 1e6) / total, mainRunUs: (run * 1e6) / total, lastStart: startAt(starts.length - 1), rss }
      results.set(v.name, [...(results.get(v.name) ?? []), r])
      console.log(
        `round ${round} ${v.name}: ${Math.round(r.rate)} rec/s in ${wall.toFixed(1)} s; CPU ${r.cpuUs.toFixed(1)} us/record ` +
          `(main thread ${r.mainRunUs.toFixed(1)}); main thread on CPU ${run.toFixed(1)} s, run queue ${wait.toFixed(1)} s, ` +
          `sleeping ${(wall - run - wait).toFixed(1)} s; tasks started (after the first read) 8th ${startAt(7).toFixed(1)} s, ` +
          `16th ${startAt(15).toFixed(1)} s, last ${r.lastStart.toFixed(1)} s (${starts.length}); peak RSS ${rss.toFixed(0)} MiB; ` +
          `1-min load ${load0.toFixed(1)} -> ${(loadavg()[0] ?? 0).toFixed(1)}`
      )
      await deleteTopics(admin, [tag]).catch(() => undefined)
      rmSync(stateDir, { recursive: true, force: true })
    }
  }
} finally {
  await deleteTopics(admin, [input]).catch(() => undefined)
  await admin.disconnect()
}
const base = results.get(variants[0]!.name) ?? []
for (const v of variants) {
  const rs = results.get(v.name) ?? []
  if (rs.length === 0 || base.length === 0) continue
  const ratio = (f: (r: Result) => number) => (median(rs.map(f)) / median(base.map(f))).toFixed(2)
  console.log(
    `${v.name}: median ${Math.round(median(rs.map((r) => r.rate)))} rec/s (x${ratio((r) => r.rate)}), ` +
      `CPU ${median(rs.map((r) => r.cpuUs)).toFixed(1)} us/record (x${ratio((r) => r.cpuUs)}), ` +
      `main thread ${median(rs.map((r) => r.mainRunUs)).toFixed(1)} us/record (x${ratio((r) => r.mainRunUs)}), ` +
      `last task start ${median(rs.map((r) => r.lastStart)).toFixed(1)} s, peak RSS ${median(rs.map((r) => r.rss)).toFixed(0)} MiB; ` +
      `rates ${rs.map((r) => Math.round(r.rate)).join(", ")}`
  )
}
