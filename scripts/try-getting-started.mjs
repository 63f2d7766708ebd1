#!/usr/bin/env node
// Follows docs/getting-started.md as a new user would, in an empty folder, with Skein's packed
// tarball instead of the registry's `skein`:
//
//   1. the page's commands of step 1 (`npm init`, `npm pkg set`, `npm install ...`),
//   2. its tsconfig.json and its ```ts file=... blocks written as the files they name,
//   3. `npx tsc --noEmit` and `npx vitest run` (the page's test: no broker),
//   4. with KAFKA_BROKERS set: the app against that broker (topics renamed with a run suffix so a
//      shared broker is not disturbed): three words in, the counts read back read_committed
//      (fox 1, dog 1, fox 2), then SIGTERM and exit code 0.
//
//   node scripts/try-getting-started.mjs [--tarball skein-x.y.z.tgz] [--keep]
//
// Not part of CI (an npm install from the registry, about a minute); run it after editing the
// page or the package. Without --tarball it runs `npm pack` here first (which builds dist/).

import { execFileSync, spawn } from "node:child_process"
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const args = process.argv.slice(2)
const keep = args.includes("--keep")
const tarballArg = args.includes("--tarball") ? args[args.indexOf("--tarball") + 1] : undefined
const log = (line) => console.log(`[try-getting-started] ${line}`)
const run = (command, argv, cwd) => {
  log(`${cwd === undefined ? "" : "(project) "}${command} ${argv.join(" ")}`)
  execFileSync(command, argv, { cwd, stdio: "inherit" })
}

const page = readFileSync(join(root, "docs", "getting-started.md"), "utf8")
const blocks = [...page.matchAll(/^```(\w+)([^\n]*)\n([\s\S]*?)^```$/gm)].map((m) => ({
  lang: m[1],
  attrs: m[2].trim().split(/\s+/).filter((a) => a !== ""),
  text: m[3]
}))

const work = mkdtempSync(join(tmpdir(), "skein-getting-started-"))
let tarball = tarballArg === undefined ? undefined : resolve(tarballArg)
if (tarball === undefined) {
  const packed = execFileSync("npm", ["pack", "--pack-destination", work], { cwd: root, encoding: "utf8" })
  tarball = join(work, packed.trim().split("\n").pop())
}
const project = join(work, "word-count")
mkdirSync(project)
log(`project ${project}, package ${tarball}`)

// 1. Step 1's commands, `skein` replaced by the tarball.
const setup = blocks.find((b) => b.lang === "sh" && b.text.includes("npm install skein"))
if (setup === undefined) throw new Error("docs/getting-started.md: no ```sh block with `npm install skein`")
for (const line of setup.text.split("\n").map((l) => l.trim())) {
  if (!line.startsWith("npm ")) continue // mkdir/cd: the project folder is made above
  const argv = line.split(/\s+/).slice(1).map((word) => (word === "skein" ? tarball : word))
  run("npm", argv, project)
}

// 2. The files.
const tsconfig = blocks.find((b) => b.lang === "json")
if (tsconfig === undefined) throw new Error("docs/getting-started.md: no tsconfig.json block")
writeFileSync(join(project, "tsconfig.json"), tsconfig.text)
const suffix = `-${Date.now()}`
const renamed = (text) =>
  process.env["KAFKA_BROKERS"] === undefined
    ? text
    : text.replace(/name: "(words|word-counts)"/g, `name: "$1${suffix}"`).replace(/"words-dead-letters"/g, `"words-dead-letters${suffix}"`)
for (const block of blocks.filter((b) => b.lang === "ts")) {
  const file = block.attrs.find((a) => a.startsWith("file="))?.slice(5)
  if (file === undefined) continue
  mkdirSync(dirname(join(project, file)), { recursive: true })
  writeFileSync(join(project, file), renamed(block.text))
  log(`wrote ${file}`)
}

// 3. Type-check and the test.
run("npx", ["tsc", "-p", "tsconfig.json", "--noEmit"], project)
run("npx", ["vitest", "run"], project)

// 4. The app against a broker.
const brokers = process.env["KAFKA_BROKERS"]
if (brokers === undefined) {
  log("KAFKA_BROKERS unset: the app's run against a broker skipped")
} else {
  const require = createRequire(join(project, "package.json"))
  const { Kafka, logLevel } = require("kafkajs")
  const kafka = new Kafka({ brokers: brokers.split(","), logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({
    waitForLeaders: true,
    topics: [`words${suffix}`, `word-counts${suffix}`, `words-dead-letters${suffix}`].map((topic) => ({ topic, numPartitions: 3 }))
  })
  await admin.disconnect()
  const app = spawn("node", ["--import", "tsx", "src/main.ts"], {
    cwd: project,
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, SKEIN_APPLICATION_ID: `word-count${suffix}`, SKEIN_STATE_DIR: join(work, "state") }
  })
  const exited = new Promise((done) => app.on("exit", (code, signal) => done({ code, signal })))
  const producer = kafka.producer({ idempotent: true })
  await producer.connect()
  await producer.send({
    topic: `words${suffix}`,
    acks: -1,
    messages: [["fox", "fox"], ["dog", "dog"], ["fox", "fox"]].map(([key, value]) => ({ key, value }))
  })
  await producer.disconnect()
  const counts = []
  const consumer = kafka.consumer({ groupId: `reader${suffix}`, readUncommitted: false })
  await consumer.connect()
  await consumer.subscribe({ topic: `word-counts${suffix}`, fromBeginning: true })
  await new Promise((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`only ${JSON.stringify(counts)} after 120 s`)), 120_000)
    consumer.run({
      eachMessage: async ({ message }) => {
        counts.push(`${message.key?.toString()} ${message.value?.toString()}`)
        if (counts.length === 3) {
          clearTimeout(timer)
          done()
        }
      }
    })
  })
  await consumer.disconnect()
  const expected = ["dog 1", "fox 1", "fox 2"]
  if (JSON.stringify([...counts].sort()) !== JSON.stringify(expected)) {
    throw new Error(`counts ${JSON.stringify(counts)}, expected ${JSON.stringify(expected)}`)
  }
  log(`counts read back read_committed: ${counts.join(", ")}`)
  app.kill("SIGTERM")
  const { code, signal } = await exited
  if (code !== 0) throw new Error(`the app exited with ${code ?? signal} after SIGTERM, expected 0`)
  log("SIGTERM: the app stopped gracefully, exit code 0")
}

if (!keep) rmSync(work, { recursive: true, force: true })
log(`docs/getting-started.md works as written${keep ? ` (kept: ${work})` : ""}`)
