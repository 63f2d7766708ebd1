/**
 * Post-mortem: runs the verifier's checks on the broker data a failed chaos
 * run kept (`/tmp/skein-chaos/<run>/kafka`), without a broker: segment files
 * are parsed directly; for each partition the replica with the longest log is
 * used. Prints each check with its details.
 *
 *   tsx test/chaos/verify-offline.ts /tmp/skein-chaos/<run>
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { LogBatch, PartitionLog } from "./wire.ts"
import { parseBatches, resolveTransactions } from "./wire.ts"
import * as Verifier from "./verifier.ts"

const runDir = process.argv[2]
if (runDir === undefined) {
  process.stderr.write("usage: verify-offline.ts /tmp/skein-chaos/<run>\n")
  process.exit(2)
}
const run = Path.basename(runDir)
const kafkaDir = Path.join(runDir, "kafka")
const dataDirs = Fs.readdirSync(kafkaDir).map((node) => Path.join(kafkaDir, node, "data"))

const readPartitionDir = (dir: string): Array<LogBatch> =>
  Fs.readdirSync(dir).filter((f) => f.endsWith(".log")).sort().flatMap((f) => parseBatches(Fs.readFileSync(Path.join(dir, f))))

/** Every partition of `topic`, from the replica with the longest log. */
const readTopic = (topic: string): Array<PartitionLog> => {
  const partitions = new Map<number, Array<LogBatch>>()
  for (const data of dataDirs) {
    for (const entry of Fs.readdirSync(data)) {
      const m = /^(.*)-(\d+)$/.exec(entry)
      if (m === null || m[1] !== topic) continue
      const partition = Number(m[2])
      const batches = readPartitionDir(Path.join(data, entry))
      const current = partitions.get(partition)
      if (current === undefined || (batches.at(-1)?.lastOffset ?? -1) > (current.at(-1)?.lastOffset ?? -1)) {
        partitions.set(partition, batches)
      }
    }
  }
  return [...partitions].sort(([a], [b]) => a - b).map(([partition, batches]) => {
    const end = (batches.at(-1)?.lastOffset ?? -1) + 1
    return resolveTransactions(topic, partition, batches, { highWatermark: end, lastStableOffset: end })
  })
}

const exists = (topic: string) => dataDirs.some((d) => Fs.readdirSync(d).some((e) => e.startsWith(`${topic}-`)))

const truth = Verifier.readInput(readTopic(`${run}-input`))
process.stdout.write(`input: ${truth.records} records, ${truth.byKey.size} keys\n`)
const checks: Array<Verifier.Check> = []
if (exists(`${run}-echo-out`)) checks.push(Verifier.checkEcho("echo", truth, readTopic(`${run}-echo-out`)))
if (exists(`${run}-aggregate-out`)) {
  checks.push(Verifier.checkAggregate("aggregate", truth, readTopic(`${run}-aggregate-out`)))
  checks.push(Verifier.checkChangelog("aggregate changelog", truth, readTopic(`${run}-aggregate-aggregate-changelog`), Verifier.finalAggregate, Verifier.AGGREGATE_STATE_FIELDS))
}
if (exists(`${run}-pipeline-out`)) {
  checks.push(Verifier.checkAggregate("pipeline-1", truth, readTopic(`${run}-pipeline-mid`)))
  checks.push(Verifier.checkChangelog("pipeline-1 changelog", truth, readTopic(`${run}-pipeline-1-aggregate-changelog`), Verifier.finalAggregate, Verifier.AGGREGATE_STATE_FIELDS))
  checks.push(Verifier.checkAudited("pipeline-2", truth, readTopic(`${run}-pipeline-out`)))
  checks.push(Verifier.checkChangelog("pipeline-2 changelog", truth, readTopic(`${run}-pipeline-2-audit-changelog`), Verifier.finalAudit, Verifier.AUDIT_STATE_FIELDS))
}
for (const c of checks) {
  process.stdout.write(`${c.name}: ${c.records} records, duplicates=${c.duplicates} lost=${c.lost} mismatches=${c.stateMismatches}\n`)
  for (const d of c.details) process.stdout.write(`  ${d}\n`)
}
