/**
 * Restore rounds: how fast skein-eos rebuilds its stores from one changelog, many times over,
 * optionally side by side with another checkout of Skein (an A/B of a restore change).
 *
 *   npm run bench:restore -- [--records 300000] [--rounds 4] [--compare /path/to/other/checkout] [--floor]
 *
 * It writes the benchmark's input (bench/lib/kafka.ts: 20,000 keys, 100-byte values, 6
 * partitions), runs bench/apps/skein-count.ts (exactly-once) until the group has committed the
 * whole input, so the changelog holds a count per key per transaction, then restarts the app
 * `--rounds` times on the same group with an empty state folder: nothing is left to process, so
 * each round only restores. A round's rate = changelog records restored / (restore-end −
 * restore-start), as the app reports them (see its header). With `--compare`, every round runs
 * that checkout's app too, the order alternating, on the same changelog. With `--floor`, every
 * round also reads the changelog with a bare kafkajs consumer (bench/apps/kafkajs-changelog-read.ts,
 * this install's patched kafkajs and kafkajs as published): the rate no restore on kafkajs can
 * pass, rate = records read / (group joined → every partition at its end).
 *
 * The full benchmark (`npm run bench`) measures one restore per run after a throughput run;
 * this takes many on one changelog, so two builds' restores are compared on the same data.
 * Broker: KAFKA_BROKERS, else a private one (bench/lib/broker.ts). SKEIN_BENCH_CPU_PROF=<dir>
 * writes a V8 CPU profile of every app run there.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { parseArgs } from "node:util"
import { acquireBroker } from "./lib/broker.ts"
import { createTopics, groupCaughtUp, keySequence, makeKafka, preload, topicEnds } from "./lib/kafka.ts"
import type { Workload } from "./lib/kafka.ts"
import { buildSkein } from "./lib/build.ts"
import { AppProcess } from "./lib/proc.ts"
import { fmtInt, sleep, spread } from "./lib/stats.ts"

const { values } = parseArgs({
  options: {
    records: { type: "string", default: "300000" },
    rounds: { type: "string", default: "4" },
    compare: { type: "string" },
    floor: { type: "boolean", default: false },
  },
})
const records = Number(values.records)
const rounds = Number(values.rounds)
if (!Number.isInteger(records) || records <= 0 || !Number.isInteger(rounds) || rounds <= 0) {
  console.error("usage: npm run bench:restore -- [--records N] [--rounds N] [--compare /path/to/checkout] [--floor]")
  process.exit(2)
}
const sides = [
  { name: "this", root: process.cwd() },
  ...(values.compare === undefined ? [] : [{ name: "compare", root: resolve(values.compare) }]),
]
const log = (message: string): void => console.log(`[restore ${new Date().toISOString().slice(11, 19)}] ${message}`)
// Each side's app runs its checkout's build (dist/), as the full benchmark does.
for (const side of sides) await buildSkein(side.root)

const run = `r${Date.now().toString(36)}`
const logDir = mkdtempSync(join(tmpdir(), `skein-restore-${run}-`))
const workload: Workload = { records, partitions: 6, keys: 20_000, valueBytes: 100, seed: 42 }
const names = { input: `bench-${run}-in`, output: `bench-${run}-out`, group: `bench-${run}-skein` }

/** Starts a checkout's app on the group with an empty state folder. */
const start = (root: string, label: string): { readonly app: AppProcess; readonly stateDir: string } => {
  const stateDir = mkdtempSync(join(tmpdir(), `skein-restore-state-`))
  const app = new AppProcess({
    cmd: process.execPath,
    cwd: root,
    args: [
      // SKEIN_BENCH_CPU_PROF=<dir>: a V8 CPU profile of each app run (as in `npm run bench`).
      ...(process.env["SKEIN_BENCH_CPU_PROF"] ? ["--cpu-prof", `--cpu-prof-dir=${process.env["SKEIN_BENCH_CPU_PROF"]}`] : []),
      "--import", "tsx", join(root, "bench", "apps", "skein-count.ts"), "--mode", "eos",
      "--brokers", brokers, "--input", names.input, "--output", names.output, "--group", names.group,
      "--state-dir", stateDir,
    ],
  }, join(logDir, `${label}.log`))
  return { app, stateDir }
}

/** A bare kafkajs read of the changelog (`--floor`): records / (joined → at the end). */
const readFloor = async (kafkajs: "patched" | "original", label: string): Promise<{ records: number; seconds: number }> => {
  const app = new AppProcess({
    cmd: process.execPath,
    args: [
      "--import", "tsx", join(process.cwd(), "bench", "apps", "kafkajs-changelog-read.ts"),
      "--brokers", brokers, "--topic", `${names.group}-count-changelog`, "--kafkajs", kafkajs,
    ],
  }, join(logDir, `${label}.log`))
  const end = await app.waitFor((e) => e.event === "read-end", 120_000)
  const begin = app.event("read-start")
  await app.stop()
  if (end === undefined || begin === undefined) throw new Error(`${label}: no read-end (log ${logDir}/${label}.log)`)
  return { records: end.records ?? 0, seconds: (end.ts - begin.ts) / 1000 }
}
const floors = values.floor ? [{ name: "kafkajs-read (patched)", kafkajs: "patched" as const }, { name: "kafkajs-read (published)", kafkajs: "original" as const }] : []

const broker = await acquireBroker(log)
const brokers = broker.brokers
try {
  const kafka = makeKafka(brokers, "skein-restore-rounds")
  const admin = kafka.admin()
  await admin.connect()
  await createTopics(admin, [names.input, names.output], workload.partitions)
  log(`writing ${fmtInt(records)} input records (${broker.origin}); logs in ${logDir}`)
  await preload(kafka, names.input, workload, keySequence(workload))
  const ends = await topicEnds(admin, names.input)
  const fill = start(sides[0]!.root, "fill")
  const deadline = Date.now() + 600_000
  // A broker just started may answer GROUP_LOAD_IN_PROGRESS for a while: not caught up yet.
  while (!(await groupCaughtUp(admin, names.group, names.input, ends).catch(() => false))) {
    if (Date.now() > deadline || !fill.app.alive()) throw new Error(`the fill run did not finish (log ${logDir}/fill.log)`)
    await sleep(500)
  }
  await fill.app.stop()
  rmSync(fill.stateDir, { recursive: true, force: true })
  await admin.disconnect()

  const rates = new Map<string, Array<number>>([...sides, ...floors].map((s) => [s.name, []]))
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 === 1 ? sides : [...sides].reverse()
    for (const side of order) {
      const { app, stateDir } = start(side.root, `${side.name}-${round}`)
      const end = await app.waitFor((e) => e.event === "restore-end" && (e.records ?? 0) > 0, 120_000)
      const begin = app.event("restore-start")
      await app.stop()
      rmSync(stateDir, { recursive: true, force: true })
      if (end === undefined || begin === undefined) throw new Error(`${side.name} round ${round}: no restore-end (log ${logDir})`)
      const seconds = (end.ts - begin.ts) / 1000
      const rate = (end.records ?? 0) / seconds
      rates.get(side.name)!.push(rate)
      log(`${side.name} round ${round}: ${end.records} records in ${seconds.toFixed(2)} s = ${fmtInt(rate)} rec/s`)
    }
    for (const floor of round % 2 === 1 ? floors : [...floors].reverse()) {
      const { records: read, seconds } = await readFloor(floor.kafkajs, `${floor.kafkajs}-read-${round}`)
      rates.get(floor.name)!.push(read / seconds)
      log(`${floor.name} round ${round}: ${read} records in ${seconds.toFixed(2)} s = ${fmtInt(read / seconds)} rec/s`)
    }
  }
  console.log("\n| checkout | restore rec/s per round | median |\n| --- | --- | ---: |")
  for (const side of sides) {
    const xs = rates.get(side.name)!
    console.log(`| ${side.name} (${side.root}) | ${xs.map(fmtInt).join(", ")} | ${fmtInt(spread(xs)?.median ?? Number.NaN)} |`)
  }
  for (const floor of floors) {
    const xs = rates.get(floor.name)!
    console.log(`| ${floor.name} | ${xs.map(fmtInt).join(", ")} | ${fmtInt(spread(xs)?.median ?? Number.NaN)} |`)
  }
} finally {
  await broker.release()
}
