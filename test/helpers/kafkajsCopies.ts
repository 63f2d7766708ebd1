/**
 * Private copies of the installed kafkajs with one side of Skein's patch written in: the files as
 * published ("original") or as patched ("patched"). Each copy lives in a temporary directory of
 * its own, so its modules are a module graph of their own: a test or a benchmark can run
 * kafkajs's code and the patched code side by side in one process, whatever state the installed
 * files are in (original, patched on disk, or patched by an older patch), and without touching
 * them.
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type * as KafkaJS from "kafkajs"
import { parsePatch } from "../../src/internal/kafka/patchedKafkajs.ts"

export type Side = "original" | "patched"

/** A copy of kafkajs: `load(file)` requires a file of it (e.g. `src/protocol/request.js`). */
export interface KafkajsCopy {
  readonly side: Side
  /** The copy's package directory. */
  readonly dir: string
  readonly load: (file: string) => unknown
  /** Deletes the copy (its modules stay loaded). */
  readonly remove: () => void
}

const projectRoot = fileURLToPath(new URL("../..", import.meta.url))

/** Copies the kafkajs that `root` resolves (its `src`, entry point and manifest) with `side` of the patch. */
export const copyKafkajs = (side: Side, root: string = projectRoot): KafkajsCopy => {
  const require = createRequire(path.join(root, "package.json"))
  const installed = path.dirname(require.resolve("kafkajs/package.json"))
  const { version } = JSON.parse(fs.readFileSync(path.join(installed, "package.json"), "utf8")) as { version: string }
  const files = parsePatch(fs.readFileSync(path.join(root, "patches", `kafkajs+${version}.patch`), "utf8"))
  if (files === undefined) throw new Error(`patches/kafkajs+${version}.patch is not a whole-file patch`)
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), `skein-kafkajs-${side}-`))
  // Inside a node_modules folder, as installed: loaders that transform sources (tsx) leave those alone
  const dir = path.join(parent, "node_modules", "kafkajs")
  fs.mkdirSync(dir, { recursive: true })
  for (const entry of ["package.json", "index.js", "src"]) {
    fs.cpSync(path.join(installed, entry), path.join(dir, entry), { recursive: true })
  }
  for (const file of files) {
    fs.writeFileSync(path.join(dir, file.file), side === "original" ? file.original : file.patched)
  }
  const load = (file: string): unknown => createRequire(path.join(dir, "package.json"))(path.join(dir, file))
  return { side, dir, load, remove: () => fs.rmSync(parent, { recursive: true, force: true }) }
}

/** A kafkajs logger that says nothing, for kafkajs's own objects made by hand. */
export const silentLogger = () => {
  const logger = { namespace: () => logger, info: () => {}, debug: () => {}, warn: () => {}, error: () => {} }
  return logger
}

/**
 * Connects `consumer`, runs it on `topic` from the beginning (no offset commits) and returns what
 * `use` returns, then disconnects it. `use` gets a promise that resolves once the consumer's
 * batches have delivered `records` records. `onBatch`, if given, is the eachBatch handler too (it
 * runs first, and may carry properties the patched runner reads, such as `fetchSizes`).
 */
export const runUntilRead = async <A>(
  consumer: KafkaJS.Consumer,
  topic: string,
  records: number,
  use: (allRead: Promise<void>) => Promise<A>,
  onBatch?: (payload: KafkaJS.EachBatchPayload) => Promise<void>
): Promise<A> => {
  let read = 0
  let done = (): void => {}
  const allRead = new Promise<void>((resolve) => {
    done = resolve
  })
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatch: Object.assign(async (payload: KafkaJS.EachBatchPayload) => {
        await onBatch?.(payload)
        read += payload.batch.messages.length
        if (read >= records) done()
      }, onBatch)
    })
    return await use(allRead)
  } finally {
    await consumer.disconnect()
  }
}
