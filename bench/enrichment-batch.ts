/**
 * Micro-benchmark: the enrichment job's sub-topology (bench/apps/skein-enrichment.ts: a stream
 * left-joined to a table read from a topic) on a task's share of a poll (`src/internal/runtime/batch.ts`
 * `run`), no broker: what the main thread does per stream record in the stream DSL's compiled
 * transformer, with the table already loaded and its keys' states warm in the task's state cache
 * (as in the benchmark once the table is loaded: a task's ~16,700 keys fit the cache).
 *
 * Each round runs `--records` stream records (keys uniform over `--keys`, values `o-0000123;` +
 * filler) until `--min-ms` have passed; the median of the rounds is reported in ns per record,
 * with the process's CPU time per record (less sensitive than the elapsed time to other work on
 * the machine) and the share in garbage collection.
 *
 *   npx tsx bench/enrichment-batch.ts [--records 8000] [--keys 16667] [--value-bytes 100] [--rounds 9] [--min-ms 500] [--dist dist]
 */
import { Effect, Either, Option, Schema } from "effect"
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
    keys: { type: "string", default: "16667" },
    "value-bytes": { type: "string", default: "100" },
    rounds: { type: "string", default: "9" },
    "min-ms": { type: "string", default: "500" },
    dist: { type: "string" }
  }
})
const records = Number(flags.records)
const keys = Number(flags.keys)
const valueBytes = Number(flags["value-bytes"])
const rounds = Number(flags.rounds)
const minMs = Number(flags["min-ms"])

// The sources, or (--dist <folder>) a build of them (bench/lib/inProcess.ts).
const from = moduleFrom(flags.dist)
const Batch: typeof import("../src/internal/runtime/batch.ts") = await import(from("internal/runtime/batch"))
const { makeMessageLimits }: typeof import("../src/internal/runtime/outputs.ts") = await import(from("internal/runtime/outputs"))
const PartitionCounts: typeof import("../src/internal/runtime/partitionCounts.ts") = await import(from("internal/runtime/partitionCounts"))
const { makeStateCache }: typeof import("../src/internal/stores/StateCache.ts") = await import(from("internal/stores/StateCache"))
const { StateStoreError }: typeof import("../src/SkeinError.ts") = await import(from("SkeinError"))
const { KStream, KTable, Topic: TopicModule, Topology }: typeof import("../src/index.ts") = await import(from("index"))

// The job of bench/apps/skein-enrichment.ts.
const Input = TopicModule.make({ name: "bench.in", key: Schema.String, value: Schema.String })
const Table = TopicModule.make({ name: "bench.table", key: Schema.String, value: Schema.String })
const Output = TopicModule.make({ name: "bench.out", key: Schema.String, value: Schema.String })
const stream = KStream.from(Input).pipe(
  KStream.leftJoin(KTable.from(Table, { name: "enrichment-table" }), (value, tableValue) =>
    `${value.slice(0, value.indexOf(";"))}|${tableValue ?? "-"}`, { name: "enrich" }),
  KStream.to(Output)
)
const compiled = Topology.compile(Topology.make("enrichment", [stream]), "bench")
if (Either.isLeft(compiled)) throw new Error(`the topology does not compile: ${String(compiled.left)}`)
// The compiled transformer is Transformer.Any: its inputs, state and errors erased by compile.
const [sub] = compiled.right.subTopologies
if (sub === undefined) throw new Error("expected one sub-topology")
const join = sub.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>

// Seeded stream (a linear congruential sequence).
let seed = 42
const nextKey = () => {
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % keys
}
const filler = "v".repeat(valueBytes)
const noHeaders = Object.freeze({})
const fetched: ReadonlyArray<FetchedRecord> = Array.from({ length: records }, (_, offset) => {
  const head = `o-${String(offset).padStart(7, "0")};`
  return {
    topic: Input.name,
    partition: 0,
    offset,
    key: Buffer.from(`key-${String(nextKey()).padStart(6, "0")}`),
    value: Buffer.from(head + filler.slice(head.length)),
    headers: noHeaders,
    rawHeaders: noHeaders,
    timestamp: 1_700_000_000_000 + offset
  }
})

/**
 * The loaded table: every key's state in the task's state cache, as the sub-topology's state
 * Schema decodes its stored form (one table: `{ value, timestamp }`); the store is never read.
 */
const store: StateStore = emptyStore(StateStoreError)
const cache = makeStateCache(100_000)
for (let k = 0; k < keys; k++) {
  const key = `key-${String(k).padStart(6, "0")}`
  const stored = `{"value":${JSON.stringify(`c-${String(k).padStart(6, "0")}/r-07/v1`)},"timestamp":1699999999999}`
  const decoded = join.state._tag === "Some" ? Schema.decodeUnknownSync(join.state.value)(stored) : undefined
  cache.set(key, Option.some(decoded))
}

const options: import("../src/internal/runtime/batch.ts").Options = {
  deadLetterTopic: Option.none(),
  stop: Effect.never,
  permits: Option.none(),
  messageLimits: makeMessageLimits(1024 * 1024, () => Effect.succeed(undefined)),
  partitionCounts: PartitionCounts.make(() => Effect.succeed(6)),
  cache
}
const slice: import("../src/internal/runtime/batch.ts").Slice = { topic: Input.name, partition: 0, records: fetched, endOffset: records }
const poll = Batch.run(join, Option.some(store), [slice], options)

let gcNs = 0
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) gcNs += entry.duration * 1e6
}).observe({ entryTypes: ["gc"] })

const round = async (): Promise<{ readonly ns: number; readonly cpu: number; readonly gc: number }> => {
  let n = 0
  const gcBefore = gcNs
  const cpuBefore = process.cpuUsage()
  const start = process.hrtime.bigint()
  let elapsed = 0
  while (elapsed < minMs * 1e6) {
    const result = await Effect.runPromise(poll)
    if (result.processed !== records) throw new Error(`processed ${result.processed} of ${records}`)
    n += records
    elapsed = Number(process.hrtime.bigint() - start)
  }
  // gc entries arrive asynchronously: let the observer catch up before reading it.
  await new Promise((resolve) => setTimeout(resolve, 20))
  const cpu = process.cpuUsage(cpuBefore)
  return { ns: elapsed / n, cpu: ((cpu.user + cpu.system) * 1000) / n, gc: (gcNs - gcBefore) / elapsed }
}

await round() // warm-up
const results: Array<{ readonly ns: number; readonly cpu: number; readonly gc: number }> = []
for (let r = 0; r < rounds; r++) results.push(await round())
const ns = spread(results.map((r) => r.ns))
const cpu = spread(results.map((r) => r.cpu))
const gc = spread(results.map((r) => r.gc))
console.log(
  `enrichment join: ${records} records, ${keys} table keys, ${valueBytes}-byte values, ${rounds} rounds: ` +
    `${ns!.median.toFixed(0)} ns/record (${ns!.min.toFixed(0)}-${ns!.max.toFixed(0)}), CPU ${cpu!.median.toFixed(0)} ns/record, ` +
    `${(100 * gc!.median).toFixed(1)} % of it in GC`
)
