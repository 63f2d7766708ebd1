/**
 * Micro-benchmark: the windowed job's two sub-topologies (bench/apps/skein-windowed.ts: a groupBy
 * to a second key through a repartition topic, then a tumbling one-minute count with final results)
 * on a task's share of a poll (`src/internal/runtime/batch.ts` `run`), no broker: what the main thread does
 * per record in the stream DSL's compiled transformers, where the count job (bench/batch.ts) runs a
 * hand-written one.
 *
 * Each round runs `--records` records (event times 50,000 a minute, as the benchmark job's input)
 * through each sub-topology, from the same starting state, until `--min-ms` have passed; the
 * median of the rounds is reported in ns per record, with the process's CPU time per record (less
 * sensitive than the elapsed time to other work on the machine) and the share in garbage collection.
 *
 * `--only 0` or `--only 1` runs one sub-topology (for `node --cpu-prof`). `--alloc` reports what a
 * record allocates instead: V8's sampling heap profiler over the rounds, with the objects the
 * scavenges and mark-compacts collected kept in the profile (every allocation, not what is live at
 * the end), in bytes per record, and the functions that allocate most (self, per record).
 *
 *   npx tsx bench/windowed-batch.ts [--records 8000] [--groups 1000] [--rounds 7] [--min-ms 500] [--dist dist]
 *     [--only 0|1] [--alloc] [--top 15]
 *
 * Under tsx a `--dist` build is compiled again (tsx wraps its named functions in `__name` calls)
 * and effect is loaded as CommonJS; for the build as users run it, bundle this script and run it
 * on node:
 *
 *   npx esbuild bench/windowed-batch.ts --bundle --platform=node --format=esm --external:effect --outfile=/tmp/wb.mjs
 *   node /tmp/wb.mjs --dist dist
 */
import { Duration, Effect, Either, Option, Schema } from "effect"
import { Session } from "node:inspector/promises"
import { PerformanceObserver } from "node:perf_hooks"
import { parseArgs } from "node:util"
import type { FetchedRecord } from "../src/internal/kafka/consumer.ts"
import type { StateStore } from "../src/internal/stores/StateStore.ts"
import type * as Transformer from "../src/Transformer.ts"
import type * as Topic from "../src/Topic.ts"
import { emptyStore, moduleFrom } from "./lib/inProcess.ts"
import { spread } from "./lib/stats.ts"

const { values: flags } = parseArgs({
  options: {
    records: { type: "string", default: "8000" },
    groups: { type: "string", default: "1000" },
    rounds: { type: "string", default: "7" },
    "min-ms": { type: "string", default: "500" },
    dist: { type: "string" },
    only: { type: "string" },
    alloc: { type: "boolean", default: false },
    top: { type: "string", default: "15" }
  }
})
const records = Number(flags.records)
const groups = Number(flags.groups)
const rounds = Number(flags.rounds)
const minMs = Number(flags["min-ms"])

// The sources, or (--dist <folder>) a build of them (bench/lib/inProcess.ts).
const from = moduleFrom(flags.dist)
const Batch: typeof import("../src/internal/runtime/batch.ts") = await import(from("internal/runtime/batch"))
const { makeMessageLimits }: typeof import("../src/internal/runtime/outputs.ts") = await import(from("internal/runtime/outputs"))
const PartitionCounts: typeof import("../src/internal/runtime/partitionCounts.ts") = await import(from("internal/runtime/partitionCounts"))
const { makeStateCache }: typeof import("../src/internal/stores/StateCache.ts") = await import(from("internal/stores/StateCache"))
const { StateStoreError }: typeof import("../src/SkeinError.ts") = await import(from("SkeinError"))
const { KGroupedStream, KStream, KTable, TimeWindowedKStream, TimeWindows, Topic: TopicModule, Topology }: typeof import(
  "../src/index.ts"
) = await import(from("index"))

// The job of bench/apps/skein-windowed.ts.
const Input = TopicModule.make({ name: "bench.in", key: Schema.String, value: Schema.String })
const Output = TopicModule.make({ name: "bench.out", key: Schema.String, value: Schema.String })
const stream = KStream.from(Input).pipe(
  KStream.groupBy((record) => record.value.slice(0, record.value.indexOf(";")), { key: Schema.String, value: Schema.String, name: "by-group" }),
  KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace("1 minute", Duration.seconds(300))),
  TimeWindowedKStream.count({ name: "counts-per-minute", emit: "onWindowClose" }),
  KTable.toStream,
  KStream.flatMap((result) => result.key === null ? [] : [{ key: `${result.key.key}@${result.key.window.start}`, value: String(result.value) }]),
  KStream.to(Output)
)
const compiled = Topology.compile(Topology.make("windowed", [stream]), "bench")
if (Either.isLeft(compiled)) throw new Error(`the topology does not compile: ${String(compiled.left)}`)
// The compiled transformers are Transformer.Any: their inputs, state and errors erased by compile.
const [grouping, counting] = compiled.right.subTopologies.map((sub) =>
  sub.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>
)
if (grouping === undefined || counting === undefined) throw new Error("expected two sub-topologies")
const repartition = counting.inputs[0]!

// Seeded input (a linear congruential sequence), as the benchmark job's: 50,000 records a minute.
let seed = 42
const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648)
const noHeaders = Object.freeze({})
const start = 1_700_000_000_000
const inputs = Array.from({ length: records }, (_, offset) => {
  const group = `g${next() % groups}`
  return {
    key: `k${next() % 20_000}`,
    group,
    value: `${group};${"v".repeat(80)}`,
    timestamp: start + Math.floor((offset * 60_000) / 50_000)
  }
})
const fetchedOf = (topic: string, rows: ReadonlyArray<{ readonly key: string; readonly value: string; readonly timestamp: number }>) =>
  rows.map((row, offset): FetchedRecord => ({
    topic,
    partition: 0,
    offset,
    key: Buffer.from(row.key),
    value: Buffer.from(row.value),
    headers: noHeaders,
    rawHeaders: noHeaders,
    timestamp: row.timestamp
  }))
const groupingInput = fetchedOf(Input.name, inputs)
const countingInput = fetchedOf(repartition.name, inputs.map((row) => ({ key: row.group, value: row.value, timestamp: row.timestamp })))

/** An empty store: every state starts absent (the round's first record of a group opens its window). */
const store: StateStore = emptyStore(StateStoreError)
const optionsOf = (): import("../src/internal/runtime/batch.ts").Options => ({
  deadLetterTopic: Option.none(),
  stop: Effect.never,
  permits: Option.none(),
  messageLimits: makeMessageLimits(1024 * 1024, () => Effect.succeed(undefined)),
  partitionCounts: PartitionCounts.make(() => Effect.succeed(1)),
  cache: makeStateCache(100_000)
})
const pollOf = (transformer: typeof grouping, fetched: ReadonlyArray<FetchedRecord>, topic: string) =>
  Effect.suspend(() =>
    Batch.run(transformer, transformer.state._tag === "Some" ? Option.some(store) : Option.none(), [
      { topic, partition: 0, records: fetched, endOffset: fetched.length }
    ], optionsOf())
  )

let gcNs = 0
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) gcNs += entry.duration * 1e6
}).observe({ entryTypes: ["gc"] })

const round = async (poll: ReturnType<typeof pollOf>): Promise<{ readonly ns: number; readonly cpu: number; readonly gc: number }> => {
  let n = 0
  const gcBefore = gcNs
  const cpuBefore = process.cpuUsage()
  const began = process.hrtime.bigint()
  let elapsed = 0
  while (elapsed < minMs * 1e6) {
    const result = await Effect.runPromise(poll)
    if (result.processed !== records) throw new Error(`processed ${result.processed} of ${records}`)
    n += records
    elapsed = Number(process.hrtime.bigint() - began)
  }
  // gc entries arrive asynchronously: let the observer catch up before reading it.
  await new Promise((resolve) => setTimeout(resolve, 20))
  const cpu = process.cpuUsage(cpuBefore)
  return { ns: elapsed / n, cpu: ((cpu.user + cpu.system) * 1000) / n, gc: (gcNs - gcBefore) / elapsed }
}

/** A node of V8's sampling heap profile. */
interface HeapNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  readonly selfSize: number
  readonly children: ReadonlyArray<HeapNode>
}

/** Bytes allocated while `body` runs (sampled), by allocating function (name and place). */
const allocations = async (body: () => Promise<number>): Promise<{ readonly records: number; readonly total: number; readonly by: Map<string, number> }> => {
  const session = new Session()
  session.connect()
  await session.post("HeapProfiler.enable")
  await session.post("HeapProfiler.startSampling", {
    samplingInterval: 512,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true
  })
  const records = await body()
  const { profile } = await session.post("HeapProfiler.stopSampling") as unknown as { readonly profile: { readonly head: HeapNode } }
  session.disconnect()
  const by = new Map<string, number>()
  let total = 0
  const walk = (node: HeapNode): void => {
    if (node.selfSize > 0) {
      const { functionName, lineNumber, url } = node.callFrame
      const where = `${functionName || "(anonymous)"} ${url.replace(/^.*\/(src|dist|node_modules)\//, "$1/")}:${lineNumber + 1}`
      by.set(where, (by.get(where) ?? 0) + node.selfSize)
      total += node.selfSize
    }
    for (const child of node.children) walk(child)
  }
  walk(profile.head)
  return { records, total, by }
}

const subTopologies = [
  ["groupBy (sub-topology 0)", pollOf(grouping, groupingInput, Input.name)],
  ["tumbling count (sub-topology 1)", pollOf(counting, countingInput, repartition.name)]
] as const
for (const [i, [name, poll]] of subTopologies.entries()) {
  if (flags.only !== undefined && Number(flags.only) !== i) continue
  await round(poll) // warm-up
  if (flags.alloc) {
    const { by, records: n, total } = await allocations(async () => {
      let n = 0
      for (let r = 0; r < rounds; r++) {
        const result = await Effect.runPromise(poll)
        n += result.processed
      }
      return n
    })
    console.log(`${name}: ${(total / n).toFixed(0)} B allocated per record (${n} records, sampled every 512 B)`)
    for (const [where, bytes] of [...by].sort((a, b) => b[1] - a[1]).slice(0, Number(flags.top))) {
      console.log(`  ${(bytes / n).toFixed(0).padStart(6)} B  ${(100 * bytes / total).toFixed(1).padStart(5)} %  ${where}`)
    }
    continue
  }
  const results: Array<{ readonly ns: number; readonly cpu: number; readonly gc: number }> = []
  for (let r = 0; r < rounds; r++) results.push(await round(poll))
  const ns = spread(results.map((r) => r.ns))!
  const cpu = spread(results.map((r) => r.cpu))!
  const gc = spread(results.map((r) => r.gc))!
  console.log(
    `${name}: ${records} records, ${groups} groups, ${rounds} rounds: ${ns.median.toFixed(0)} ns/record ` +
      `(${ns.min.toFixed(0)}-${ns.max.toFixed(0)}), CPU ${cpu.median.toFixed(0)} ns/record (${cpu.min.toFixed(0)}-${cpu.max.toFixed(0)}), ` +
      `${(100 * gc.median).toFixed(1)} % of it in GC`
  )
}
