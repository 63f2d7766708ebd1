/**
 * Post-mortem tool: prints the record batches of a Kafka log segment file
 * (`<data dir>/<topic>-<partition>/<base offset>.log`, kept by failed chaos
 * runs under `/tmp/skein-chaos/<run>/kafka/node-<id>/data`): offsets, producer
 * id, epoch and sequence, transaction markers, and the records.
 *
 *   tsx test/chaos/dump-segment.ts <segment.log> [from-offset] [to-offset]
 */
import * as Fs from "node:fs"
import { parseBatches } from "./wire.ts"

const [file, from = "0", to = String(Number.MAX_SAFE_INTEGER)] = process.argv.slice(2)
if (file === undefined) {
  process.stderr.write("usage: dump-segment.ts <segment.log> [from-offset] [to-offset]\n")
  process.exit(2)
}
const data = Fs.readFileSync(file)
const batches = parseBatches(data)
// parseBatches skips the header fields a post-mortem wants: read them again here.
let position = 0
for (const batch of batches) {
  const header = data.subarray(position + 12)
  position += 12 + data.readInt32BE(position + 8)
  if (batch.baseOffset < Number(from) || batch.baseOffset > Number(to)) continue
  const epoch = header.readInt16BE(39)
  const sequence = header.readInt32BE(41)
  const timestamp = new Date(Number(header.readBigInt64BE(15))).toISOString()
  const what = batch.control
    ? `CONTROL ${batch.controlType === 1 ? "COMMIT" : "ABORT"}`
    : batch.records.map((r) => `${r.key}:${r.value}`).join(" ")
  process.stdout.write(
    `${batch.baseOffset}-${batch.lastOffset} pid=${batch.producerId} epoch=${epoch} seq=${sequence}` +
      `${batch.transactional ? " txn" : ""} ${timestamp} ${what}\n`
  )
}
