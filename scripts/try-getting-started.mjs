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
//   5. then the first examples of docs/workflows.md and docs/extractors.md in the same project
//      (with the packages the README's install table names for them), type-checked, and with
//      KAFKA_BROKERS run: two orders and a malformed one through the workflow (a shipment, a
//      declined payment and the malformed value in the dead letter topic), and the extractor
//      over a local HTTP API standing in for api.example.com (every order of both tenants once).
//
//   node scripts/try-getting-started.mjs [--tarball skein-x.y.z.tgz] [--keep]
//
// Not part of CI (npm installs from the registry; about 1 min without a broker, 3.5 min with
// the shared broker under load); run it after editing these pages or the package. Without --tarball it runs `npm pack` here first (which builds dist/).

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

// 5. The workflow and extractor pages.
const firstTs = (file) => {
  const text = readFileSync(join(root, "docs", file), "utf8")
  const match = /^```ts\n([\s\S]*?)^```$/m.exec(text)
  if (match === null) throw new Error(`docs/${file}: no plain \`\`\`ts block`)
  return match[1]
}
run("npm", ["install", "@effect/workflow@0.19.1", "@effect/platform@0.97.2"], project)
const workflow = firstTs("workflows.md")
  .replace(/"orders"/g, `"orders${suffix}"`).replace(/"shipments"/g, `"shipments${suffix}"`)
  .replace(/"orders-dead-letters"/g, `"orders-dead-letters${suffix}"`)
writeFileSync(join(project, "src", "workflow.ts"), workflow)
const apiPort = 18_000 + Math.floor(Math.random() * 1000)
const extractor = firstTs("extractors.md")
  .replace("https://api.example.com", `http://127.0.0.1:${apiPort}`).replace(/name: "orders", key/, `name: "orders-x${suffix}", key`)
writeFileSync(join(project, "src", "extractor.ts"), extractor)
run("npx", ["tsc", "-p", "tsconfig.json", "--noEmit"], project)

/** Runs `file` until `until(records)` holds for what the topics hold (read_committed), then SIGTERM. */
const runUntil = async (file, applicationId, topics, until) => {
  const require = createRequire(join(project, "package.json"))
  const { Kafka, logLevel } = require("kafkajs")
  const kafka = new Kafka({ brokers: brokers.split(","), logLevel: logLevel.NOTHING })
  const app = spawn("node", ["--import", "tsx", file], {
    cwd: project,
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, SKEIN_APPLICATION_ID: applicationId, SKEIN_STATE_DIR: join(work, `state-${applicationId}`) }
  })
  const exited = new Promise((done) => app.on("exit", (code, signal) => done({ code, signal })))
  const records = []
  const consumer = kafka.consumer({ groupId: `reader-${applicationId}`, readUncommitted: false })
  await consumer.connect()
  await consumer.subscribe({ topics, fromBeginning: true })
  await new Promise((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`${file}: only ${JSON.stringify(records)} after 120 s`)), 120_000)
    consumer.run({
      eachMessage: async ({ topic, message }) => {
        records.push({ topic, key: message.key?.toString(), value: message.value?.toString() ?? "" })
        if (until(records)) {
          clearTimeout(timer)
          done()
        }
      }
    })
  })
  await consumer.disconnect()
  app.kill("SIGTERM")
  const { code, signal } = await exited
  if (code !== 0) throw new Error(`${file} exited with ${code ?? signal} after SIGTERM, expected 0`)
  return records
}

if (brokers !== undefined) {
  const require = createRequire(join(project, "package.json"))
  const { Kafka, logLevel } = require("kafkajs")
  const kafka = new Kafka({ brokers: brokers.split(","), logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({
    waitForLeaders: true,
    topics: [`orders${suffix}`, `shipments${suffix}`, `orders-dead-letters${suffix}`, `orders-x${suffix}`]
      .map((topic) => ({ topic, numPartitions: 2 }))
  })
  await admin.disconnect()
  const producer = kafka.producer({ idempotent: true })
  await producer.connect()
  await producer.send({
    topic: `orders${suffix}`,
    acks: -1,
    messages: [
      { key: "o1", value: JSON.stringify({ order: "o1", item: "kettle", placed: "2026-12-01T09:00:00.000Z" }) },
      { key: "test-1", value: JSON.stringify({ order: "test-1", item: "lamp", placed: "2026-12-01T09:00:00.000Z" }) },
      { key: "o3", value: "{ not an order" }
    ]
  })
  await producer.disconnect()
  const shipped = await runUntil("src/workflow.ts", `ship${suffix}`, [`shipments${suffix}`, `orders-dead-letters${suffix}`], (r) => r.length >= 3)
  const seen = shipped.map((r) => `${r.topic === `shipments${suffix}` ? "shipped" : "dead"} ${r.key}`).sort()
  if (JSON.stringify(seen) !== JSON.stringify(["dead o3", "dead test-1", "shipped o1"])) {
    throw new Error(`workflow: ${JSON.stringify(shipped)}`)
  }
  log(`docs/workflows.md: ${seen.join(", ")}`)

  // The stand-in for api.example.com: 7 orders per tenant, 3 per page.
  const { createServer } = await import("node:http")
  const orders = Array.from({ length: 7 }, (_, i) => ({ id: i + 1, customer: `c${i % 3}`, cents: 100 * (i + 1) }))
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://localhost")
    const after = Number(url.searchParams.get("after") ?? 0)
    const page = orders.filter((o) => o.id > after).slice(0, 3)
    response.setHeader("content-type", "application/json")
    response.end(JSON.stringify({ orders: page, hasMore: page.length > 0 && page[page.length - 1].id < orders.length }))
  })
  await new Promise((done) => server.listen(apiPort, "127.0.0.1", done))
  const extracted = await runUntil("src/extractor.ts", `shop${suffix}`, [`orders-x${suffix}`], (r) => r.length >= 14)
  server.close()
  const keys = extracted.map((r) => `${r.key} ${JSON.parse(r.value).id}`)
  if (new Set(keys).size !== 14 || extracted.length !== 14) throw new Error(`extractor: ${JSON.stringify(keys)}`)
  log("docs/extractors.md: 7 orders of each of 2 tenants, each once")
}

if (!keep) rmSync(work, { recursive: true, force: true })
log(`docs/getting-started.md, workflows.md and extractors.md work as written${keep ? ` (kept: ${work})` : ""}`)
