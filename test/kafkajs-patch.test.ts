/**
 * Skein runs on a patched kafkajs whatever the install did.
 *
 * `patches/kafkajs+2.2.4.patch` fixes kafkajs bugs that break exactly-once (multi-broker sends
 * that duplicate records inside committed transactions, among others). An install script cannot
 * be relied on to write it into node_modules (`npm ci --ignore-scripts`, pnpm 10, pnpm's
 * side-effects cache, Bun's untrusted dependencies and Deno skip it), so Skein compiles the patched
 * files into the module cache when it loads kafkajs, and fails with `ConfigurationError` on files
 * it cannot patch.
 *
 * The unpatched install is made the way those installs make it: Skein's own files (package.json,
 * src, scripts, patches) in a temporary directory, every dependency linked from this project
 * except kafkajs, which is unpacked from the registry tarball (`npm pack kafkajs@2.2.4`, from the
 * npm cache): the files as published, no install script run.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { execFile } from "node:child_process"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { createRequire } from "node:module"
import * as Client from "../src/internal/kafka/client.ts"
import * as PatchedKafkajs from "../src/internal/kafka/patchedKafkajs.ts"
import * as Producer from "../src/internal/kafka/producer.ts"
import { ConfigurationError } from "../src/SkeinError.ts"
import * as Helpers from "./helpers/kafka.ts"
import { brokers } from "./utils/broker.ts"

const projectRoot = fileURLToPath(new URL("..", import.meta.url))
const patchedFiles = [
  "src/consumer/filterAbortedMessages.js",
  "src/producer/sendMessages.js",
  "src/producer/groupMessagesPerPartition.js",
  "src/consumer/offsetManager/index.js",
  "src/network/requestQueue/index.js",
  "src/protocol/recordBatch/crc32C/crc32C.js",
  "src/protocol/recordBatch/v0/index.js",
  "src/protocol/requests/produce/v3/request.js",
  "src/protocol/request.js",
  "src/producer/partitioners/default/murmur2.js",
  "src/producer/partitioners/legacy/partitioner.js",
  "src/producer/eosManager/index.js",
  "src/protocol/recordBatch/record/v0/decoder.js",
  "src/consumer/consumerGroup.js",
  "src/protocol/recordBatch/v0/decoder.js",
  "src/consumer/batch.js"
]
/** A line only the patched `sendMessages.js` has. */
const patchedSendMessagesLine = "const donePartitions = new Set()"

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs a command to completion (never fails: the exit code is part of the result). */
const run = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: Record<string, string>; readonly timeout?: number }
): Effect.Effect<Ran> =>
  Effect.async<Ran>((resume) => {
    const child = execFile(
      command,
      [...args],
      { cwd: options.cwd, env: { ...process.env, ...options.env }, timeout: options.timeout ?? 60_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : null
        resume(Effect.succeed({ code, stdout, stderr }))
      }
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** A Skein install whose kafkajs is the published 2.2.4, unpatched; removed with the scope. */
const unpatchedInstall = Effect.acquireRelease(
  Effect.gen(function*() {
    const root = yield* Effect.promise(() => fs.mkdtemp(path.join(os.tmpdir(), "skein-unpatched-")))
    yield* Effect.promise(async () => {
      for (const entry of ["package.json", "deno.json", "src", "scripts", "patches"]) {
        await fs.cp(path.join(projectRoot, entry), path.join(root, entry), { recursive: true })
      }
      const modules = path.join(root, "node_modules")
      await fs.mkdir(modules)
      for (const entry of await fs.readdir(path.join(projectRoot, "node_modules"))) {
        if (entry !== "kafkajs") await fs.symlink(path.join(projectRoot, "node_modules", entry), path.join(modules, entry))
      }
    })
    const packed = yield* run("npm", ["pack", "kafkajs@2.2.4", "--prefer-offline", "--pack-destination", root], {
      cwd: root
    })
    assert.strictEqual(packed.code, 0, packed.stderr)
    yield* Effect.promise(() => fs.mkdir(path.join(root, "node_modules", "kafkajs")))
    const unpacked = yield* run(
      "tar",
      ["xzf", path.join(root, "kafkajs-2.2.4.tgz"), "-C", path.join(root, "node_modules", "kafkajs"), "--strip-components=1"],
      { cwd: root }
    )
    assert.strictEqual(unpacked.code, 0, unpacked.stderr)
    // The project's own checker agrees that this is the original kafkajs.
    const checked = yield* run("node", ["scripts/patch-kafkajs.mjs", "--check"], { cwd: root })
    assert.strictEqual(checked.code, 1, checked.stdout + checked.stderr)
    assert.include(checked.stdout, "src/producer/sendMessages.js: original")
    return root
  }),
  (root) => Effect.promise(() => fs.rm(root, { recursive: true, force: true }))
)

/** The failure of a load that must fail (a success fails the test). */
const configurationError = <A>(effect: Effect.Effect<A, ConfigurationError>): Effect.Effect<ConfigurationError> =>
  Effect.flip(effect).pipe(
    Effect.catchAll(() => Effect.dieMessage("expected the load to fail with ConfigurationError")),
    Effect.tap((error) => assert.instanceOf(error, ConfigurationError))
  )

/** The module a `require` from the install at `root` has cached for a kafkajs file. */
const cachedModule = (root: string, file: string): NodeModule | undefined => {
  const require = createRequire(path.join(root, "package.json"))
  return require.cache[path.join(root, "node_modules", "kafkajs", file)]
}

describe("kafkajs patch", () => {
  it.effect("this project's install is patched on disk (npm ci runs the script) and loads as it is", () =>
    Effect.gen(function*() {
      // The repository's "prepare" script patches node_modules at npm ci / npm install: its own
      // tests import kafkajs directly, so an unpatched install here is a broken setup, not a variant.
      const checked = yield* run("node", ["scripts/patch-kafkajs.mjs", "--check"], { cwd: projectRoot })
      assert.strictEqual(
        checked.code,
        0,
        `node_modules/kafkajs is not patched on disk (run node scripts/patch-kafkajs.mjs, or npm install):\n${checked.stdout}${checked.stderr}`
      )
      const loaded = yield* PatchedKafkajs.loadFrom(projectRoot)
      assert.strictEqual(loaded.applied, "on-disk")
      assert.strictEqual(loaded.version, "2.2.4")
      assert.strictEqual((yield* PatchedKafkajs.loaded).applied, "on-disk")
    }))

  it.scoped("an install with some files patched on disk and the others original (an older patch) is patched in memory", () =>
    Effect.gen(function*() {
      const root = yield* unpatchedInstall
      const files = PatchedKafkajs.parsePatch(
        yield* Effect.promise(() => fs.readFile(path.join(projectRoot, "patches", "kafkajs+2.2.4.patch"), "utf8"))
      ) ?? []
      assert.isAbove(files.length, 1)
      // Every file patched on disk but sendMessages.js, still the original.
      const left = "src/producer/sendMessages.js"
      for (const { file, patched } of files) {
        if (file !== left) yield* Effect.promise(() => fs.writeFile(path.join(root, "node_modules", "kafkajs", file), patched))
      }
      const loaded = yield* PatchedKafkajs.loadFrom(root)
      assert.strictEqual(loaded.applied, "in-memory")
      assert.include(String(cachedModule(root, left)?.exports), patchedSendMessagesLine, "the original file runs patched")
      const onDisk = yield* Effect.promise(() => fs.readFile(path.join(root, "node_modules", "kafkajs", left), "utf8"))
      assert.notInclude(onDisk, patchedSendMessagesLine)
    }))

  it.scoped("an install with the original files is patched in memory; the files on disk are left alone", () =>
    Effect.gen(function*() {
      const root = yield* unpatchedInstall
      const loaded = yield* PatchedKafkajs.loadFrom(root)
      assert.strictEqual(loaded.applied, "in-memory")
      assert.strictEqual(loaded.dir, path.join(root, "node_modules", "kafkajs"))
      for (const file of patchedFiles) {
        const module = cachedModule(root, file)
        assert.isDefined(module, file)
        assert.isTrue(module?.loaded, file)
      }
      // kafkajs's own require of the file gets the module compiled from the patched text.
      const sendMessages: unknown = cachedModule(root, "src/producer/sendMessages.js")?.exports
      assert.include(String(sendMessages), patchedSendMessagesLine)
      const onDisk = yield* Effect.promise(() =>
        fs.readFile(path.join(root, "node_modules", "kafkajs", "src", "producer", "sendMessages.js"), "utf8")
      )
      assert.notInclude(onDisk, patchedSendMessagesLine)
      // The loaded module is kafkajs, usable as such.
      assert.isFunction(loaded.kafkajs.Kafka)
      assert.isFunction(loaded.kafkajs.AssignerProtocol.MemberMetadata.encode)
    }))

  // Compiled in the patch's order, a patched file that requires another patched file compiled
  // after it (sendMessages.js -> groupMessagesPerPartition.js, consumerGroup.js -> batch.js) got
  // the original from disk: the cache held the patched module, but kafkajs's own require had
  // received the original. Every require inside kafkajs of a patched file must get the patched one.
  it.scoped("in memory, every require inside kafkajs of a patched file receives the patched module", () =>
    Effect.gen(function*() {
      const root = yield* unpatchedInstall
      const dir = path.join(root, "node_modules", "kafkajs")
      const patch = yield* Effect.promise(() => fs.readFile(path.join(root, "patches", "kafkajs+2.2.4.patch"), "utf8"))
      const files = PatchedKafkajs.parsePatch(patch)?.map(({ file }) => path.join(dir, file)) ?? []
      assert.isAtLeast(files.length, patchedFiles.length)
      const loaded = yield* PatchedKafkajs.loadFrom(root)
      assert.strictEqual(loaded.applied, "in-memory")
      const cache = createRequire(path.join(root, "package.json")).cache
      const received: Array<string> = []
      for (const [key, module] of Object.entries(cache)) {
        if (module === undefined || !key.startsWith(dir + path.sep)) continue
        for (const child of module.children) {
          if (files.includes(child.filename) && child !== cache[child.filename]) {
            received.push(`${path.relative(dir, key)} -> original ${path.relative(dir, child.filename)}`)
          }
        }
      }
      assert.deepStrictEqual(received, [], "kafkajs modules that received an original file instead of the patched one")
      for (const file of files) assert.isTrue(cache[file]?.loaded, file)
    }))

  it.scoped("a kafkajs the application loaded first is replaced by a patched instance of Skein's own", () =>
    Effect.gen(function*() {
      const root = yield* unpatchedInstall
      const require = createRequire(path.join(root, "package.json"))
      const applications: unknown = require("kafkajs")
      assert.notInclude(String(cachedModule(root, "src/producer/sendMessages.js")?.exports), patchedSendMessagesLine)
      const loaded = yield* PatchedKafkajs.loadFrom(root)
      assert.strictEqual(loaded.applied, "in-memory")
      assert.notStrictEqual(loaded.kafkajs, applications)
      assert.include(String(cachedModule(root, "src/producer/sendMessages.js")?.exports), patchedSendMessagesLine)
    }))

  it.scoped("a kafkajs file that is neither the original nor the patched one fails, naming it and the fix", () =>
    Effect.gen(function*() {
      const root = yield* unpatchedInstall
      const edited = path.join(root, "node_modules", "kafkajs", "src", "producer", "sendMessages.js")
      yield* Effect.promise(() => fs.appendFile(edited, "// local edit\n"))
      const error = yield* configurationError(PatchedKafkajs.loadFrom(root))
      assert.include(error.problem, "src/producer/sendMessages.js")
      assert.include(error.problem, "neither")
      assert.include(error.problem, "exactly-once would not hold")
      assert.notInclude(error.problem, "groupMessagesPerPartition.js")
      assert.include(error.fix, "Reinstall kafkajs 2.2.4")
    }))

  it.scoped("a kafkajs version Skein has no patch for fails, naming the versions", () =>
    Effect.gen(function*() {
      const root = yield* unpatchedInstall
      const manifest = path.join(root, "node_modules", "kafkajs", "package.json")
      const text = yield* Effect.promise(() => fs.readFile(manifest, "utf8"))
      yield* Effect.promise(() => fs.writeFile(manifest, text.replace('"version": "2.2.4"', '"version": "2.2.5"')))
      const error = yield* configurationError(PatchedKafkajs.loadFrom(root))
      assert.include(error.problem, "kafkajs 2.2.5 is installed")
      assert.include(error.problem, "kafkajs+2.2.4.patch")
    }))

  // The lean produce encoder (test/unit/recordBatchEncoder.test.ts checks its bytes) is what
  // Skein's kafkajs sends with: a transaction through Skein's producer goes through its writer
  // (wrapped here to count), the broker accepts the batches (it checks their CRC) and they read
  // back as sent.
  it.scopedLive("Skein's producer sends its record batches through the patch's lean encoder", () =>
    Effect.gen(function*() {
      const loaded = yield* PatchedKafkajs.loaded
      const batchModule = createRequire(path.join(loaded.dir, "package.json"))(
        path.join(loaded.dir, "src", "protocol", "recordBatch", "v0", "index.js")
      ) as { writeUncompressedBatch: (plan: { readonly count: number }, ...rest: ReadonlyArray<unknown>) => number }
      const write = batchModule.writeUncompressedBatch
      let batches = 0
      let written = 0
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          batchModule.writeUncompressedBatch = (plan, ...rest) => {
            batches++
            written += plan.count
            return write(plan, ...rest)
          }
        }),
        () => Effect.sync(() => {
          batchModule.writeUncompressedBatch = write
        })
      )
      const topic = Helpers.unique("lean-encoder")
      yield* Helpers.createTopics([{ name: topic, partitions: 3 }])
      const kafka = yield* Client.makeKafka({ clientId: "kafkajs-patch-encoder", brokers: brokers() })
      const transactional = yield* Producer.make(kafka, {
        partition: 0,
        transactionalId: Helpers.unique("lean-encoder-txn"),
        transactionTimeout: Duration.seconds(30),
        maxMessageBytes: 1_048_576
      })
      const producer = yield* transactional.fence
      const timestamp = Date.now() - 60_000
      const records = Array.from({ length: 300 }, (_, i) => ({
        topic,
        key: `key-${i}`,
        value: i % 3 === 0 ? Buffer.from(`value-${i}`) : `value-${i}`,
        partition: i % 3,
        timestamp: timestamp + i,
        headers: { n: String(i) }
      }))
      yield* producer.commit(records, { groupId: Helpers.unique("lean-encoder-group"), offsets: [] })
      assert.strictEqual(written, records.length)
      assert.isAtLeast(batches, 3)
      // The broker writes the commit markers after EndTxn answers: wait for the last stable offsets
      yield* Helpers.eventually(
        Effect.map(Helpers.offsets(topic), (ends) => ends.reduce((n, e) => n + e.lastStable, 0) > records.length),
        { what: "the transaction's records below the last stable offsets" }
      )
      const read = yield* Helpers.readCommitted(topic)
      assert.deepStrictEqual(
        read.map((r) => [r.key, r.value, r.partition, r.timestamp, r.headers["n"]]).sort(),
        records.map((r) => [r.key, String(r.value), r.partition, r.timestamp, r.headers.n]).sort()
      )
    }), 90_000)

  // kafkajs looked the transaction coordinator up (FindCoordinator) before each AddPartitionsToTxn,
  // AddOffsetsToTxn and EndTxn, and the group coordinator before each TxnOffsetCommit. The patch
  // keeps both, and looks a coordinator up again once its connection is gone.
  it.scopedLive("Skein's producer looks its coordinators up once, and again after the coordinator's connection closed", () =>
    Effect.gen(function*() {
      const loaded = yield* PatchedKafkajs.loaded
      const clusterClass = createRequire(path.join(loaded.dir, "package.json"))(
        path.join(loaded.dir, "src", "cluster", "index.js")
      ) as { prototype: { findGroupCoordinator: (request: { readonly coordinatorType?: number }) => Promise<unknown> } }
      const find = clusterClass.prototype.findGroupCoordinator
      const lookups = { transaction: 0, group: 0 }
      let lastTransactionCoordinator: { disconnect: () => Promise<void> } | undefined
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          clusterClass.prototype.findGroupCoordinator = async function(this: unknown, request) {
            const broker = await find.call(this, request)
            // coordinatorType 1 is TRANSACTION (kafkajs/src/protocol/coordinatorTypes.js)
            if (request.coordinatorType === 1) {
              lookups.transaction++
              lastTransactionCoordinator = broker as { disconnect: () => Promise<void> }
            } else {
              lookups.group++
            }
            return broker
          }
        }),
        () => Effect.sync(() => {
          clusterClass.prototype.findGroupCoordinator = find
        })
      )
      const topic = Helpers.unique("coordinators")
      const input = Helpers.unique("coordinators-in")
      yield* Helpers.createTopics([{ name: topic, partitions: 3 }, { name: input, partitions: 1 }])
      const kafka = yield* Client.makeKafka({ clientId: "kafkajs-patch-coordinators", brokers: brokers() })
      const transactional = yield* Producer.make(kafka, {
        partition: 0,
        transactionalId: Helpers.unique("coordinators-txn"),
        transactionTimeout: Duration.seconds(30),
        maxMessageBytes: 1_048_576
      })
      const producer = yield* transactional.fence
      const groupId = Helpers.unique("coordinators-group")
      const transaction = (n: number) =>
        producer.commit(
          Array.from({ length: 30 }, (_, i) => ({ topic, key: `key-${n}-${i}`, value: `v${n}`, partition: i % 3 })),
          { groupId, offsets: [{ topic: input, partition: 0, offset: n + 1 }] }
        )
      for (let n = 0; n < 3; n++) yield* transaction(n)
      // One lookup each: the fence's InitProducerId found the transaction coordinator, the first
      // TxnOffsetCommit the group's; three transactions' eleven coordinator requests reused them.
      assert.deepStrictEqual(lookups, { transaction: 1, group: 1 })

      yield* Effect.promise(() => lastTransactionCoordinator!.disconnect())
      yield* transaction(3)
      assert.strictEqual(lookups.transaction, 2)
      // On a one-node cluster the group coordinator is the same broker: its connection may have
      // been closed at the same moment, and then the group is looked up again once too.
      assert.include([1, 2], lookups.group)
      assert.deepStrictEqual([...(yield* Helpers.groupOffsets(groupId, input))], [[0, 4]])
      yield* Helpers.eventually(
        Effect.map(Helpers.offsets(topic), (ends) => ends.reduce((n, e) => n + e.lastStable, 0) === 4 * 30 + 4 * 3),
        { what: "the four transactions' records and commit markers below the last stable offsets" }
      )
      const read = yield* Helpers.readCommitted(topic)
      assert.strictEqual(read.length, 4 * 30)
    }), 90_000)

  // The user's way: a program started from the unpatched install, under each runtime. It loads
  // kafkajs patched in memory and talks to the broker through Skein's client: lists topics, and
  // produces through the patch's lean encoder (its writer, wrapped, counts the batches).
  const probe = `
import { Effect } from "effect"
import { createRequire } from "node:module"
import * as path from "node:path"
import * as PatchedKafkajs from "./src/internal/kafka/patchedKafkajs.ts"
import * as Client from "./src/internal/kafka/client.ts"

Effect.gen(function*() {
  const { applied, dir } = yield* PatchedKafkajs.loaded
  const batchModule = createRequire(path.join(dir, "package.json"))(
    path.join(dir, "src", "protocol", "recordBatch", "v0", "index.js")
  ) as { writeUncompressedBatch: (...args: Array<unknown>) => number }
  const write = batchModule.writeUncompressedBatch
  let leanBatches = 0
  batchModule.writeUncompressedBatch = (...args) => {
    leanBatches++
    return write(...args)
  }
  const kafka = yield* Client.makeKafka({ clientId: "kafkajs-patch-probe", brokers: process.env.KAFKA_BROKERS!.split(",") })
  const admin = kafka.admin()
  yield* Effect.promise(() => admin.connect())
  const topics = yield* Effect.promise(() => admin.listTopics())
  const topic = process.env.PROBE_TOPIC!
  yield* Effect.promise(() => admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true }))
  yield* Effect.promise(() => admin.disconnect())
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  yield* Effect.promise(() => producer.connect())
  const messages = Array.from({ length: 20 }, (_, i) => ({
    key: "key-" + i,
    value: Buffer.from("value-" + i),
    timestamp: String(Date.now()),
    headers: { n: String(i) }
  }))
  yield* Effect.promise(() => producer.send({ topic, acks: -1, messages }))
  yield* Effect.promise(() => producer.disconnect())
  console.log(JSON.stringify({ applied, listed: Array.isArray(topics), produced: leanBatches > 0 }))
}).pipe(Effect.runPromise).then(
  () => process.exit(0),
  (error) => {
    console.error(String(error))
    process.exit(1)
  }
)
`
  const runtimes: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
    ["node (tsx)", ["tsx", "probe.ts"]],
    ["bun", ["bun", "probe.ts"]],
    ["deno", ["deno", "run", "-A", "probe.ts"]]
  ]
  for (const [runtime, args] of runtimes) {
    it.scoped(`a program run with ${runtime} from the unpatched install runs on kafkajs patched in memory`, () =>
      Effect.gen(function*() {
        const root = yield* unpatchedInstall
        yield* Effect.promise(() => fs.writeFile(path.join(root, "probe.ts"), probe))
        const ran = yield* run("npx", [...args], {
          cwd: root,
          env: { KAFKA_BROKERS: brokers().join(","), PROBE_TOPIC: Helpers.unique("probe") },
          timeout: 60_000
        })
        assert.strictEqual(ran.code, 0, ran.stdout + ran.stderr)
        assert.include(ran.stdout, JSON.stringify({ applied: "in-memory", listed: true, produced: true }))
      }), 90_000)
  }
})
