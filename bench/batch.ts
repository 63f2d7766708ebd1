/**
 * Micro-benchmark: a task's share of a poll (`src/internal/runtime/batch.ts` `run`, what the main thread
 * does per input record between the fetch and the transaction), on the benchmark's job: a
 * per-key count over `--keys` keys, one output per record, state in a store that is already
 * warm in the task's state cache (as under a backlog), no broker.
 *
 * Each round processes `--records` records (one task's share of a 50,000-record poll under the
 * full benchmark's backlog is about 8,000) until `--min-ms` have passed; the median of the
 * rounds is reported in ns per record, with the process's CPU time per record (less sensitive
 * than the elapsed time to other work on the machine) and the share spent in garbage collection
 * (`PerformanceObserver` `gc` entries).
 *
 *   npx tsx bench/batch.ts [--records 8000] [--keys 20000] [--value-bytes 100] [--rounds 9] [--min-ms 500]
 *                          [--dist dist] [--rules]
 */
import { Effect, Option, Schema } from "effect"
import { PerformanceObserver } from "node:perf_hooks"
import { parseArgs } from "node:util"
import type { FetchedRecord } from "../src/internal/kafka/consumer.ts"
import type { StateStore } from "../src/internal/stores/StateStore.ts"
import { emptyStore, moduleFrom } from "./lib/inProcess.ts"
import { spread } from "./lib/stats.ts"

const { values: flags } = parseArgs({
  options: {
    records: { type: "string", default: "8000" },
    keys: { type: "string", default: "20000" },
    "value-bytes": { type: "string", default: "100" },
    rounds: { type: "string", default: "9" },
    "min-ms": { type: "string", default: "500" },
    dist: { type: "string" },
    rules: { type: "boolean", default: false }
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
const { ErrorRule, Topic, Transformer }: typeof import("../src/index.ts") = await import(from("index"))

// The job of bench/apps/skein-count.ts.
const Input = Topic.make({ name: "bench.in", key: Schema.String, value: Schema.String })
const Output = Topic.make({ name: "bench.out", key: Schema.String, value: Schema.NumberFromString })
// --rules: the same job under a dead letter rule for an error it never raises (what every record
// of a transformer with rules pays).
const Count = Transformer.make({
  name: "count",
  inputs: [Input],
  state: Schema.Number,
  rules: flags.rules ? [ErrorRule.tagged("Invalid", { then: "dlq" })] : [],
  transform: (record, count) =>
    Effect.sync(() => {
      const next = Option.getOrElse(count, () => 0) + 1
      return { emit: [Topic.record(Output, record.key, next)], state: Transformer.set(next) }
    })
})

// Seeded keys (a linear congruential sequence), as the benchmark's input.
let seed = 42
const nextKey = () => {
  seed = (seed * 1103515245 + 12345) % 2147483648
  return `key-${seed % keys}`
}
const value = Buffer.alloc(valueBytes, "v")
const noHeaders = Object.freeze({})
const fetched: ReadonlyArray<FetchedRecord> = Array.from({ length: records }, (_, offset) => ({
  topic: Input.name,
  partition: 0,
  offset,
  key: Buffer.from(nextKey()),
  value,
  headers: noHeaders,
  rawHeaders: noHeaders,
  timestamp: 1_700_000_000_000 + offset
}))

/** A store whose every key is already in the state cache: only `getMany` of a cold key would reach it. */
const store: StateStore = emptyStore(StateStoreError)
const cache = makeStateCache(100_000)
for (let k = 0; k < keys; k++) cache.set(`key-${k}`, Option.some(k))

const options: import("../src/internal/runtime/batch.ts").Options = {
  deadLetterTopic: Option.none(),
  stop: Effect.never,
  permits: Option.none(),
  messageLimits: makeMessageLimits(1024 * 1024, () => Effect.succeed(undefined)),
  partitionCounts: PartitionCounts.make(() => Effect.succeed(6)),
  cache
}
const slice: import("../src/internal/runtime/batch.ts").Slice = { topic: Input.name, partition: 0, records: fetched, endOffset: records }
const poll = Batch.run(Count, Option.some(store), [slice], options)

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
  `batch.run${flags.rules ? " (a rule)" : ""}: ${records} records, ${keys} keys, ${valueBytes}-byte values, ${rounds} rounds: ` +
    `${ns!.median.toFixed(0)} ns/record (${ns!.min.toFixed(0)}-${ns!.max.toFixed(0)}), CPU ${cpu!.median.toFixed(0)} ns/record, ` +
    `${(100 * gc!.median).toFixed(1)} % of it in GC`
)
