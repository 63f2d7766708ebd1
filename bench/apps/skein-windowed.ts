/**
 * Skein contender app of the benchmark's windowed job (bench/lib/windowed.ts,
 * bench/README.md "Windowed job"), on Skein's stream DSL: the input grouped by a second key read
 * from the value (the text before its first `;`, through a repartition topic), counted per
 * second key in tumbling one-minute windows of event time (the records' timestamps) with
 * `--grace-ms` of grace, final results only (`emit: "onWindowClose"`), written as key
 * `<second key>@<window start>` and value the count as a decimal string.
 *
 *   node --import tsx bench/apps/skein-windowed.ts --brokers B --input T --output T --group G
 *        --state-dir D --grace-ms N [--commit-interval-ms N]
 *
 * Exactly-once (`processingGuarantee` "exactly-once"). Speaks the contender protocol
 * (bench/contenders/types.ts) on stdout: `started` once its modules are loaded, `first-read` at
 * the first input record. Loads Skein's build (`dist/`, or SKEIN_BENCH_BUILD), as
 * bench/apps/skein-count.ts does. Connection security: the SKEIN_* settings of its environment.
 */
import { resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { parseArgs } from "node:util"
import { Duration, Effect, Schema } from "effect"
import type * as Skein from "../../src/index.ts"
import { runUntilSignalled } from "../lib/runApp.ts"
import { securityFromEnv, skeinSecurity } from "../lib/security.ts"

const { values } = parseArgs({
  options: {
    brokers: { type: "string" },
    input: { type: "string" },
    output: { type: "string" },
    group: { type: "string" },
    "state-dir": { type: "string" },
    "grace-ms": { type: "string" },
    "commit-interval-ms": { type: "string" },
  },
})
const { brokers, input, output, group } = values
const stateDir = values["state-dir"]
const graceMs = Number(values["grace-ms"])
const usage = "usage: skein-windowed --brokers B --input T --output T --group G --state-dir D --grace-ms N [--commit-interval-ms N]"
if (brokers === undefined || input === undefined || output === undefined || group === undefined || stateDir === undefined) {
  console.error(usage)
  process.exit(2)
}
if (!Number.isFinite(graceMs) || graceMs < 0) {
  console.error(`skein-windowed: --grace-ms must be a non-negative number\n${usage}`)
  process.exit(2)
}
const build = process.env["SKEIN_BENCH_BUILD"] ?? new URL("../../dist/index.js", import.meta.url).href
const { KGroupedStream, KStream, KTable, SkeinConfig, TimeWindowedKStream, TimeWindows, Topic, Topology }: typeof Skein = await import(
  build.startsWith("file:") ? build : pathToFileURL(resolve(build)).href
)

const emit = (event: string): void => {
  process.stdout.write(`${JSON.stringify({ event, ts: Date.now() })}\n`)
}
emit("started")

const Input = Topic.make({ name: input, key: Schema.String, value: Schema.String })
const Output = Topic.make({ name: output, key: Schema.String, value: Schema.String })

let firstRead = false
const perGroupMinute = KStream.from(Input).pipe(
  // Kafka Streams' peer reports its first read in a `peek` at the same place.
  KStream.filter(() => {
    if (!firstRead) {
      firstRead = true
      emit("first-read")
    }
    return true
  }),
  KStream.groupBy((record) => record.value.slice(0, record.value.indexOf(";")), { key: Schema.String, value: Schema.String, name: "by-group" }),
  KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace("1 minute", Duration.millis(graceMs))),
  TimeWindowedKStream.count({ name: "counts-per-minute", emit: "onWindowClose" }),
  KTable.toStream,
  // An aggregation's results always have a key (it drops records without one): the `[]` is never taken.
  KStream.flatMap((result) =>
    result.key === null ? [] : [{ key: `${result.key.key}@${result.key.window.start}`, value: String(result.value) }]
  ),
  KStream.to(Output)
)
const topology = Topology.make("windowed", [perGroupMinute])

const program = Topology.run(topology).pipe(
  Effect.provide(SkeinConfig.layer({
    applicationId: group,
    brokers: brokers.split(","),
    stateDir,
    processingGuarantee: "exactly-once",
    ...(values["commit-interval-ms"] === undefined ? {} : { commitInterval: Duration.millis(Number(values["commit-interval-ms"])) }),
    ...skeinSecurity(securityFromEnv()),
  })),
)
runUntilSignalled(program)
