/**
 * Skein contender app of the benchmark's enrichment job (bench/lib/enrichment.ts,
 * bench/README.md "Enrichment job"), on Skein's stream DSL: the table topic (`--table`) read as a
 * table (`KTable.from`), and each record of the input left-joined with the table's value for its
 * key (`KStream.leftJoin`), written to the output with the record's key and the value
 * `<the input value before its first ';'>|<the table value, or '-' when none>`.
 *
 *   node --import tsx bench/apps/skein-enrichment.ts --brokers B --input T --table T --output T
 *        --group G --state-dir D [--commit-interval-ms N]
 *
 * Exactly-once (`processingGuarantee` "exactly-once"). Speaks the contender protocol
 * (bench/contenders/types.ts) on stdout: `started` once its modules are loaded, `first-read` at
 * the first input (stream) record. Loads Skein's build (`dist/`, or SKEIN_BENCH_BUILD), as
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
    table: { type: "string" },
    output: { type: "string" },
    group: { type: "string" },
    "state-dir": { type: "string" },
    "commit-interval-ms": { type: "string" },
  },
})
const { brokers, input, table, output, group } = values
const stateDir = values["state-dir"]
if (brokers === undefined || input === undefined || table === undefined || output === undefined || group === undefined || stateDir === undefined) {
  console.error("usage: skein-enrichment --brokers B --input T --table T --output T --group G --state-dir D [--commit-interval-ms N]")
  process.exit(2)
}
const build = process.env["SKEIN_BENCH_BUILD"] ?? new URL("../../dist/index.js", import.meta.url).href
const { KStream, KTable, SkeinConfig, Topic, Topology }: typeof Skein = await import(
  build.startsWith("file:") ? build : pathToFileURL(resolve(build)).href
)

const emit = (event: string): void => {
  process.stdout.write(`${JSON.stringify({ event, ts: Date.now() })}\n`)
}
emit("started")

const Input = Topic.make({ name: input, key: Schema.String, value: Schema.String })
const Table = Topic.make({ name: table, key: Schema.String, value: Schema.String })
const Output = Topic.make({ name: output, key: Schema.String, value: Schema.String })

const customers = KTable.from(Table, { name: "enrichment-table" })
let firstRead = false
const enriched = KStream.from(Input).pipe(
  // Kafka Streams' peer reports its first read in a `peek` at the same place.
  KStream.filter(() => {
    if (!firstRead) {
      firstRead = true
      emit("first-read")
    }
    return true
  }),
  KStream.leftJoin(customers, (value, tableValue) => `${value.slice(0, value.indexOf(";"))}|${tableValue ?? "-"}`, { name: "enrich" }),
  KStream.to(Output)
)
const topology = Topology.make("enrichment", [enriched])

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
