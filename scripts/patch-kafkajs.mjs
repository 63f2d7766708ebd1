#!/usr/bin/env node
// Applies patches/kafkajs+<version>.patch to the installed kafkajs files on disk (the
// repository's "prepare" script: its tests import kafkajs directly). Skein itself does not need
// it: src/internal/kafka/patchedKafkajs.ts applies the same patch in memory when it loads kafkajs.
//
// The patch fixes:
// - read_committed filtering of aborted transactions in
//   kafkajs/src/consumer/filterAbortedMessages.js (see test/kafkajs-read-committed.test.ts);
// - kafkajs/src/producer/sendMessages.js, whose retry of a send spanning several brokers
//   re-sent a request still in flight with new sequence numbers (duplicates inside a
//   committed transaction) and tracked retries per broker instead of per partition (records
//   of a partition whose leader moved were dropped while the send succeeded). See
//   test/chaos/FINDINGS.md and test/chaos/repro/kafkajs-send-retry.ts;
// - kafkajs/src/producer/groupMessagesPerPartition.js, which copied a partition's array for
//   every message (quadratic: a 5,000-record send spent more time there than encoding);
// - kafkajs/src/network/requestQueue/index.js, which armed a timer after every response from
//   an unset throttle deadline (-1): a timeout of minus the epoch (TimeoutNegativeWarning on
//   Bun and Deno) that re-armed itself, a 1 ms timer loop per idle connection. See
//   test/kafkajs-timers.test.ts;
// - kafkajs/src/protocol/requests/produce/v3/request.js (Produce v3-v7),
//   kafkajs/src/protocol/recordBatch/v0/index.js (record batches, magic 2),
//   kafkajs/src/protocol/recordBatch/crc32C/crc32C.js and kafkajs/src/protocol/request.js: a lean
//   encoder for uncompressed produce requests, the producer's hot path (kafkajs spent ~5 us per
//   record there: a zero-filled 512-byte buffer per record, a Buffer per varint, Long objects for
//   timestamp deltas, 4-5 copies of each batch). One size pass, one buffer per request, varints
//   inline, lengths and CRC32C back-filled (slicing-by-16), the request header written in front
//   of it without a copy; the same bytes as kafkajs's encoders, which still encode compressed
//   requests and anything the lean one does not take. See test/unit/recordBatchEncoder.test.ts
//   and bench/encoder.ts;
// - kafkajs/src/producer/partitioners/default/murmur2.js and
//   kafkajs/src/producer/partitioners/legacy/partitioner.js (the default partitioner): murmur2 in
//   32-bit arithmetic (Math.imul, as Java's) instead of ~20 BigInt-backed Long objects per 4 key
//   bytes (~2 us per keyed record), and the partition metadata filtered only for records with
//   neither partition nor key, not for every record; a short ASCII key is copied into the hash's
//   scratch buffer by a loop, not Buffer#write. The same partitions; see
//   test/unit/murmur2.test.ts;
// - kafkajs/src/consumer/runner.js: a rejoin after a rebalance (or an unknown member) first awaits
//   the eachBatch handler's `beforeRejoin` hook, kafkajs's missing onPartitionsRevoked: Skein's
//   tasks process beside the fetch loop, so their transactions commit (within revocationGrace)
//   before the partitions are given up. See test/handlers/grace.test.ts;
// - kafkajs/src/consumer/runner.js and kafkajs/src/consumer/consumerGroup.js: the eachBatch
//   handler's `fetchSizes`, if it has them, give each fetch the bytes it asks for, a partition's
//   and the whole fetch's, instead of the fixed 1 MiB and 10 MiB: Skein sizes them to bring the
//   same records whatever their size (src/internal/kafka/fetchSizes.ts; a batch of 400-byte
//   records held a quarter of one of 100 bytes). See test/kafkajs-fetch-sizes.test.ts;
// - kafkajs/src/producer/eosManager/index.js: the transaction and group coordinators are kept
//   between requests (kafkajs sent FindCoordinator before every AddPartitionsToTxn,
//   AddOffsetsToTxn, TxnOffsetCommit and EndTxn: 4 extra round trips per transaction), forgotten
//   when a request to one fails or its connection closes; and AddPartitionsToTxn answered
//   CONCURRENT_TRANSACTIONS (right after the previous EndTxn) is asked again after 20 ms, as the
//   Java client does, instead of failing the send into a metadata refresh and a backoff. See
//   test/kafkajs-patch.test.ts;
// - kafkajs/src/protocol/recordBatch/record/v0/decoder.js (every fetched record: input and
//   changelog restores): offsets and timestamps with numbers where they are exact (below 2^53)
//   instead of parsing each batch's base offset and timestamp into a BigInt-backed Long, adding
//   and printing it back, per record, and a Long per byte of the timestamp delta; no headers'
//   array for a record without headers; a message tells where its key and value lie in the
//   batch's buffer (`batchBuffer`, `keyStart`, ...), so Skein's record keeps those, not the
//   message. The same values; see test/unit/recordDecoder.test.ts.
// - kafkajs/src/consumer/consumerGroup.js: a fetch applies the pending seeks until none is left,
//   right before it builds its request. A partition seeked while the fetch looked its offsets up
//   (the first fetch after a join does) was fetched from its old offset and its data dropped on
//   arrival: a whole fetch more, and the data decoded twice (every restore's changelog reader
//   seeks its partitions right after its join). See test/kafkajs-seek.test.ts. And a fetch with
//   every partition paused sleeps maxWaitTimeInMs: a partition resumed during the sleep waited it
//   out (a restore on an idle changelog reader started up to 200 ms late); `resume` now ends the
//   sleep. See test/kafkajs-idle-resume.test.ts. And a heartbeat that cannot reach the group's
//   coordinator (its broker crashed) looks the coordinator up again and heartbeats the new one,
//   as the Java client does: kafkajs heartbeated the dead broker until its retries ran out and the
//   consumer crashed, while the coordinator had moved to a live replica of the offsets partition.
//   See test/broker-cluster.test.ts and test/unit/kafkajsCoordinator.test.ts.
// - kafkajs/src/protocol/recordBatch/v0/decoder.js: a batch's records are decoded in place from
//   the batch's buffer, not each from a Buffer view and a Decoder made for it; and
//   kafkajs/src/consumer/batch.js: a fetched batch keeps the messages at or after the fetched
//   offset comparing numbers where they are exact, not a Long parsed from every message's offset.
//   Every fetched record (input and restores) paid both. And `releaseMessages` lets an eachBatch
//   handler that copied what it needs (Skein's) empty the batch's arrays at once: the messages
//   were held until every batch of their fetch was handled, long enough to be promoted. The same messages; see
//   test/unit/recordDecoder.test.ts and bench/decoder.ts.
// - kafkajs/src/consumer/fetcher.js and kafkajs/src/consumer/runner.js: a fetch's batches are no
//   longer kept alive past their use: the fetcher's loop held the last fetch's batches in its
//   suspended frame while it awaited the next fetch, and the eachBatch handler's `isStale`, made in
//   the scope of closures that use the batch, kept the batch alive as long as the handler kept
//   `isStale` (Skein's buffer keeps it until the batch's records are processed). Every message
//   kafkajs decoded lived on beside Skein's copy of it: a heap snapshot of the benchmark's count
//   held 80,011 kafkajs messages, 40,089 after. The same behaviour otherwise.
// - kafkajs/src/protocol/recordBatch/record/v0/decoder.js: a fetched record's key and value are
//   read from the batch's buffer when asked for (getters of the message, a new view at each read),
//   not each kept as a Buffer view from the fetch on, and a record without headers shares one
//   frozen empty object: three objects fewer a fetched record, alive as long as the record (Skein
//   holds fetched records until they are processed, long enough for each to be promoted to the old
//   generation). `keySize` and `valueSize` give the lengths without a view. The same bytes; see
//   test/unit/recordDecoder.test.ts.
// Bun and Deno use the same node_modules, so patching the files covers all three runtimes.
//
// Plain Node, no dependency. Strict: patches are whole-file hunks (git diff -U100000), and the
// installed file must equal the patch's original side exactly (no fuzz, no offset). Idempotent: a file whose content already matches the
// patched side is left alone. Anything else (another kafkajs version, a locally modified file)
// fails loudly with a non-zero exit code.
//
//   node scripts/patch-kafkajs.mjs            apply (no-op when already applied)
//   node scripts/patch-kafkajs.mjs --check    exit 0 when applied, 1 when not
//   node scripts/patch-kafkajs.mjs --revert   restore the original kafkajs file(s)

import { createRequire } from "node:module"
import { readFileSync, readdirSync, renameSync, writeFileSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"
import { fileURLToPath } from "node:url"

const PACKAGE = "kafkajs"
const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const patchesDir = join(projectRoot, "patches")

const fail = (message) => {
  console.error(`[patch-kafkajs] ERROR: ${message}`)
  process.exit(1)
}

const mode = process.argv.includes("--revert") ? "revert" : process.argv.includes("--check") ? "check" : "apply"

/** Installed kafkajs: resolved the way Node resolves it from the project (handles hoisting). */
const locatePackage = () => {
  let manifestPath
  try {
    manifestPath = createRequire(join(projectRoot, "package.json")).resolve(`${PACKAGE}/package.json`)
  } catch (error) {
    fail(`cannot resolve ${PACKAGE} from ${projectRoot}: ${error instanceof Error ? error.message : String(error)}`)
  }
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8"))
  return { dir: dirname(manifestPath), version: manifest.version }
}

/**
 * Parses a unified diff (git / patch-package format) into files and hunks.
 * @returns {{ path: string, hunks: { oldStart: number, newStart: number, oldLines: string[], newLines: string[], oldNoEol: boolean, newNoEol: boolean }[] }[]}
 */
const parsePatch = (text, patchPath) => {
  const lines = text.split("\n")
  const files = []
  let file
  let hunk
  let lastSide
  const header = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]
    if (line.startsWith("diff --git ")) {
      file = undefined
      hunk = undefined
    } else if (line.startsWith("--- ") && (hunk === undefined || hunkComplete(hunk))) {
      const next = lines[i + 1] ?? ""
      if (!next.startsWith("+++ ")) fail(`${patchPath}:${i + 1}: '---' without '+++'`)
      const target = next.slice(4).replace(/^b\//, "")
      file = { path: target, hunks: [] }
      files.push(file)
      hunk = undefined
      i++
    } else if (line.startsWith("@@")) {
      const m = header.exec(line)
      if (!m || file === undefined) fail(`${patchPath}:${i + 1}: malformed hunk header`)
      hunk = {
        oldStart: Number(m[1]),
        oldCount: m[2] === undefined ? 1 : Number(m[2]),
        newStart: Number(m[3]),
        newCount: m[4] === undefined ? 1 : Number(m[4]),
        oldLines: [],
        newLines: [],
        oldNoEol: false,
        newNoEol: false,
      }
      file.hunks.push(hunk)
    } else if (line.startsWith("\\ ")) {
      // "\ No newline at end of file" refers to the line just before it
      if (hunk === undefined) fail(`${patchPath}:${i + 1}: misplaced '\\' line`)
      if (lastSide !== "new") hunk.oldNoEol = true
      if (lastSide !== "old") hunk.newNoEol = true
    } else if (hunk !== undefined && !hunkComplete(hunk)) {
      const body = line.slice(1)
      if (line.startsWith(" ")) {
        hunk.oldLines.push(body)
        hunk.newLines.push(body)
        lastSide = "both"
      } else if (line.startsWith("-")) {
        hunk.oldLines.push(body)
        lastSide = "old"
      } else if (line.startsWith("+")) {
        hunk.newLines.push(body)
        lastSide = "new"
      } else if (line === "" && i === lines.length - 1) {
        // trailing newline of the patch file
      } else {
        fail(`${patchPath}:${i + 1}: unexpected line inside hunk`)
      }
    }
  }
  for (const f of files) {
    // Whole-file patches only (one hunk, from line 1, to the end): the patch then records the
    // entire expected original, so any drift of the installed file is detected.
    if (f.hunks.length !== 1 || f.hunks[0].oldStart > 1 || f.hunks[0].newStart > 1) {
      fail(`${patchPath}: ${f.path} must be one whole-file hunk (generate with git diff -U100000)`)
    }
    for (const h of f.hunks) {
      if (!hunkComplete(h)) fail(`${patchPath}: truncated hunk for ${f.path}`)
    }
  }
  if (files.length === 0) fail(`${patchPath}: no file in patch`)
  return files
}

const hunkComplete = (h) => h.oldLines.length === h.oldCount && h.newLines.length === h.newCount

/** Splits file content into lines; reports whether it ends with a newline. */
const splitLines = (content) => {
  const eol = content.endsWith("\n")
  const lines = (eol ? content.slice(0, -1) : content).split("\n")
  return { lines: content === "" ? [] : lines, eol }
}

/**
 * Applies whole-file hunks strictly (exact position, exact content, nothing left over) in one direction.
 * @returns {string | undefined} the transformed content, or undefined when it does not match
 */
const applyHunks = (content, hunks, direction) => {
  const { lines, eol } = splitLines(content)
  const out = []
  let cursor = 0
  let endsWithoutEol = !eol
  for (const h of hunks) {
    const from = direction === "forward" ? h.oldLines : h.newLines
    const to = direction === "forward" ? h.newLines : h.oldLines
    const fromStart = (direction === "forward" ? h.oldStart : h.newStart) - 1
    const start = from.length === 0 ? fromStart + 1 : fromStart
    if (start < cursor || start + from.length > lines.length) return undefined
    for (let k = 0; k < from.length; k++) {
      if (lines[start + k] !== from[k]) return undefined
    }
    const fromNoEol = direction === "forward" ? h.oldNoEol : h.newNoEol
    const toNoEol = direction === "forward" ? h.newNoEol : h.oldNoEol
    const touchesEnd = start + from.length === lines.length
    if (touchesEnd && fromNoEol !== !eol) return undefined
    out.push(...lines.slice(cursor, start), ...to)
    cursor = start + from.length
    if (touchesEnd) endsWithoutEol = toNoEol
  }
  // Whole-file hunks: nothing of the file may lie outside them.
  if (cursor !== lines.length) return undefined
  return out.join("\n") + (endsWithoutEol || out.length === 0 ? "" : "\n")
}

const writeAtomically = (path, content) => {
  const tmp = `${path}.patch-kafkajs-${process.pid}.tmp`
  writeFileSync(tmp, content)
  renameSync(tmp, path)
}

const main = () => {
  const pkg = locatePackage()
  const patchName = `${PACKAGE}+${pkg.version}.patch`
  const available = readdirSync(patchesDir).filter((name) => name.startsWith(`${PACKAGE}+`) && name.endsWith(".patch"))
  if (!available.includes(patchName)) {
    fail(
      `installed ${PACKAGE} is ${pkg.version} (${pkg.dir}) but there is no patches/${patchName} ` +
        `(have: ${available.join(", ") || "none"}). Port the patch to this version and its reproduction test.`
    )
  }
  const patchPath = join(patchesDir, patchName)
  const files = parsePatch(readFileSync(patchPath, "utf8"), patchPath)

  const prefix = `node_modules/${PACKAGE}/`
  const plan = files.map((f) => {
    if (!f.path.startsWith(prefix)) fail(`${patchPath}: ${f.path} is outside ${prefix}`)
    const target = resolve(pkg.dir, f.path.slice(prefix.length))
    if (!target.startsWith(pkg.dir + sep)) fail(`${patchPath}: ${f.path} escapes the package directory`)
    let content
    try {
      content = readFileSync(target, "utf8")
    } catch (error) {
      fail(`cannot read ${target}: ${error instanceof Error ? error.message : String(error)}`)
    }
    const patched = applyHunks(content, f.hunks, "forward")
    const original = applyHunks(content, f.hunks, "reverse")
    const state = patched !== undefined ? "original" : original !== undefined ? "patched" : "unknown"
    return { target, display: relative(projectRoot, target), content, patched, original, state }
  })

  const unknown = plan.filter((p) => p.state === "unknown")
  if (unknown.length > 0) {
    fail(
      `${unknown.map((p) => p.display).join(", ")} matches neither the original ${PACKAGE} ${pkg.version} ` +
        `nor the patched version from patches/${patchName}. Reinstall ${PACKAGE} (rm -rf node_modules/${PACKAGE} && npm install) ` +
        `or update the patch.`
    )
  }

  if (mode === "check") {
    const pending = plan.filter((p) => p.state !== "patched")
    for (const p of plan) console.log(`[patch-kafkajs] ${p.display}: ${p.state}`)
    process.exit(pending.length === 0 ? 0 : 1)
  }

  for (const p of plan) {
    if (mode === "apply") {
      if (p.state === "patched") {
        console.log(`[patch-kafkajs] ${p.display}: already patched`)
      } else {
        writeAtomically(p.target, p.patched)
        console.log(`[patch-kafkajs] ${p.display}: patched (patches/${patchName})`)
      }
    } else {
      if (p.state === "original") {
        console.log(`[patch-kafkajs] ${p.display}: already original`)
      } else {
        writeAtomically(p.target, p.original)
        console.log(`[patch-kafkajs] ${p.display}: reverted to original`)
      }
    }
  }
}

main()
