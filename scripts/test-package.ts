/**
 * The package as a team installs it: `npm run test:package [-- npm pnpm9 pnpm10 bun deno]`.
 *
 * 1. `npm pack` (prepack builds dist/), and publish the tarball to a local registry
 *    (verdaccio, `npx verdaccio@6`, proxying every other package to the npm registry), so that
 *    each tool installs `skein@0.1.0` by name, the way it would from npmjs.org.
 * 2. One Kafka broker for the run, from Skein's own `KafkaBroker` (local, Docker or
 *    `KAFKA_BROKERS`).
 * 3. For each tool, a fresh project in a temporary folder: install `skein` and `effect` with
 *    that tool's defaults (Skein has no install script, so kafkajs stays as published) and run
 *    `app.mjs` (a stateful transformer counting records per key, importing `skein` and
 *    `skein/testing`) with that tool's runtime. The output must be exactly once (read back
 *    read_committed with kafkajs, here): Skein patched kafkajs in memory.
 * 4. The npm project also type-checks a TypeScript consumer against the published `.d.ts`.
 *
 * Not part of `npm test` (it installs from the network and takes minutes).
 */
import { Effect, Exit, Scope } from "effect"
import kafkajs from "kafkajs"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as fs from "node:fs/promises"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as KafkaBroker from "../src/testing/KafkaBroker.ts"

const projectRoot = fileURLToPath(new URL("..", import.meta.url))
const bin = (name: string) => path.join(projectRoot, "node_modules", ".bin", name)
const manifest = JSON.parse(await fs.readFile(path.join(projectRoot, "package.json"), "utf8"))
const version: string = manifest.version
const effectVersion: string = manifest.dependencies.effect
const nodeTypesVersion: string = manifest.devDependencies["@types/node"]

// ---------------------------------------------------------------------------------------------
// Processes

interface Ran {
  readonly code: number | null
  readonly output: string
}

const log = (line: string) => process.stderr.write(`[test:package] ${line}\n`)

/** Runs a command to completion; the exit code is part of the result. */
const run = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: Record<string, string>; readonly timeout?: number }
): Promise<Ran> =>
  new Promise((resolve) => {
    execFile(
      command,
      [...args],
      {
        cwd: options.cwd,
        env: { ...process.env, ...options.env },
        timeout: options.timeout ?? 300_000,
        maxBuffer: 64 * 1024 * 1024
      },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : null
        resolve({ code, output: `${stdout}${stderr}` })
      }
    )
  })

const mustRun = async (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: Record<string, string> }
): Promise<string> => {
  const ran = await run(command, args, options)
  if (ran.code !== 0) throw new Error(`${command} ${args.join(" ")} exited ${ran.code}:\n${ran.output}`)
  return ran.output
}

/** A long-running child whose output is collected; `exited` resolves with its exit code. */
const start = (
  command: string,
  args: ReadonlyArray<string>,
  cwd: string,
  env: Record<string, string>,
  detached = false
) => {
  const child: ChildProcess = spawn(command, [...args], { cwd, env: { ...process.env, ...env }, detached })
  let output = ""
  child.stdout?.on("data", (chunk) => (output += String(chunk)))
  child.stderr?.on("data", (chunk) => (output += String(chunk)))
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
  return { child, exited, output: () => output }
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
    server.on("error", reject)
  })

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

// ---------------------------------------------------------------------------------------------
// The consumer's program

/** What a consumer writes: plain ESM, so Node 20, Bun and Deno run the same file. */
const app = `
import { Duration, Effect, Layer, Option, Schema } from "effect"
import { Runner, SkeinConfig, Topic, Transformer } from "skein"
import { KafkaBroker } from "skein/testing"

const Input = Topic.make({ name: process.env.INPUT_TOPIC, key: Schema.String, value: Schema.String })
const Counts = Topic.make({ name: process.env.OUTPUT_TOPIC, key: Schema.String, value: Topic.json(Schema.Number) })

/** Counts the records of each key: changelog-backed state, one output per input. */
const Count = Transformer.make({
  name: "count",
  inputs: [Input],
  state: Schema.Number,
  transform: (record, count) => {
    const next = Option.getOrElse(count, () => 0) + 1
    return Effect.succeed({ emit: [Topic.record(Counts, record.key, next)], state: Transformer.set(next) })
  }
})

Effect.gen(function*() {
  const { brokers } = yield* KafkaBroker.KafkaBroker
  yield* Runner.run(Count).pipe(
    Effect.provide(SkeinConfig.layer({
      applicationId: process.env.APPLICATION_ID,
      brokers,
      stateDir: ".skein/state",
      commitInterval: Duration.millis(500)
    }))
  )
}).pipe(Effect.provide(Layer.orDie(KafkaBroker.layer())), Runner.runMain)
`

/** `skein/testing` starting a broker of its own (no KAFKA_BROKERS): up, reachable, stopped. */
const brokerApp = `
import { Effect } from "effect"
import kafkajs from "kafkajs"
import { KafkaBroker } from "skein/testing"

Effect.gen(function*() {
  const { brokers, kind } = yield* KafkaBroker.make()
  const admin = new kafkajs.Kafka({ brokers: [...brokers], logLevel: kafkajs.logLevel.NOTHING }).admin()
  yield* Effect.promise(() => admin.connect())
  const { brokers: nodes } = yield* Effect.promise(() => admin.describeCluster())
  yield* Effect.promise(() => admin.disconnect())
  console.log("broker " + kind + " " + brokers.join(",") + " nodes " + nodes.length)
}).pipe(Effect.scoped, Effect.runPromise).then(() => process.exit(0), (error) => {
  console.error(String(error))
  process.exit(1)
})
`

/** A TypeScript consumer, type-checked against the published declarations (not run). */
const typedApp = `
import { Effect, Option, Schema } from "effect"
import { Runner, SkeinConfig, SkeinError, Topic, Transformer } from "skein"
import { KafkaBroker } from "skein/testing"

const Input = Topic.make({ name: "in", key: Schema.String, value: Schema.String })
const Counts = Topic.make({ name: "out", key: Schema.String, value: Topic.json(Schema.Number) })

export const Count = Transformer.make({
  name: "count",
  inputs: [Input],
  state: Schema.Number,
  transform: (record, count) => {
    const key: string = record.key ?? "none"
    const next = Option.getOrElse(count, () => 0) + 1
    return Effect.succeed({ emit: [Topic.record(Counts, key, next)], state: Transformer.set(next) })
  }
})

export const program: Effect.Effect<never, SkeinError.RunnerError, KafkaBroker.KafkaBroker> = Effect.gen(function*() {
  const { brokers } = yield* KafkaBroker.KafkaBroker
  return yield* Runner.run(Count).pipe(Effect.provide(SkeinConfig.layer({ applicationId: "typed", brokers })))
})
`

const typedTsconfig = {
  compilerOptions: {
    target: "ES2022",
    lib: ["ES2022"],
    module: "NodeNext",
    moduleResolution: "NodeNext",
    strict: true,
    exactOptionalPropertyTypes: true,
    noEmit: true,
    skipLibCheck: false,
    types: ["node"]
  },
  include: ["typed.ts"]
}

// ---------------------------------------------------------------------------------------------
// Running the program and checking its output

const keys = Array.from({ length: 8 }, (_, i) => `key-${i}`)
const perKey = 25

type AppOutcome =
  | { readonly outcome: "exactly-once" }
  | { readonly outcome: "failed"; readonly code: number | null; readonly output: string }

/** Produces the input, runs the consumer's program, and checks what it wrote. */
const runApp = async (
  brokers: ReadonlyArray<string>,
  label: string,
  cwd: string,
  command: ReadonlyArray<string>
): Promise<AppOutcome> => {
  const id = `${label}-${Date.now()}`
  const input = `package-in-${id}`
  const output = `package-out-${id}`
  const kafka = new kafkajs.Kafka({ brokers: [...brokers], logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({
    waitForLeaders: true,
    topics: [{ topic: input, numPartitions: 3 }, { topic: output, numPartitions: 3 }]
  })
  await admin.disconnect()
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  await producer.send({
    topic: input,
    acks: -1,
    messages: keys.flatMap((key) => Array.from({ length: perKey }, (_, i) => ({ key, value: `${i}` })))
  })
  await producer.disconnect()

  const started = start(command[0], command.slice(1), cwd, {
    KAFKA_BROKERS: brokers.join(","),
    INPUT_TOPIC: input,
    OUTPUT_TOPIC: output,
    APPLICATION_ID: `package-${id}`
  })

  const seen = new Map<string, Array<number>>()
  let received = 0
  const reader = kafka.consumer({ groupId: `package-reader-${id}`, readUncommitted: false })
  await reader.connect()
  await reader.subscribe({ topic: output, fromBeginning: true })
  await reader.run({
    eachMessage: async ({ message }) => {
      received++
      const key = message.key?.toString() ?? ""
      seen.set(key, [...(seen.get(key) ?? []), Number(message.value?.toString())])
    }
  })
  const expected = keys.length * perKey
  let exitCode: number | null | undefined
  void started.exited.then((code) => (exitCode = code))
  const deadline = Date.now() + 180_000
  while (received < expected && exitCode === undefined && Date.now() < deadline) await sleep(250)
  if (exitCode === undefined && received >= expected) await sleep(3_000) // room for a duplicate to show
  await reader.disconnect()
  if (exitCode !== undefined) {
    return { outcome: "failed", code: exitCode, output: started.output() }
  }
  started.child.kill("SIGTERM")
  const code = await Promise.race([started.exited, sleep(60_000).then(() => "timeout" as const)])
  if (code === "timeout") {
    started.child.kill("SIGKILL")
    throw new Error(`${label}: the program did not stop within 60 s of SIGTERM\n${started.output()}`)
  }
  if (received !== expected) {
    throw new Error(`${label}: read ${received} committed records, expected ${expected}\n${started.output()}`)
  }
  for (const key of keys) {
    const counts = [...(seen.get(key) ?? [])].sort((a, b) => a - b)
    const want = Array.from({ length: perKey }, (_, i) => i + 1)
    if (counts.join(",") !== want.join(",")) {
      throw new Error(`${label}: ${key} has counts ${counts.join(",")}, expected 1..${perKey} once each`)
    }
  }
  if (code !== 0) throw new Error(`${label}: exit code ${code} after SIGTERM\n${started.output()}`)
  return { outcome: "exactly-once" }
}

// ---------------------------------------------------------------------------------------------
// The tools

interface Case {
  readonly name: string
  /** Files of the fresh project besides package.json and .npmrc. */
  readonly files?: Record<string, string>
  /** package.json fields besides name, type and dependencies. */
  readonly manifest?: Record<string, unknown>
  readonly install: ReadonlyArray<ReadonlyArray<string>>
  readonly run: ReadonlyArray<string>
  /** Type-check a TypeScript consumer (with @types/node, which Skein's API needs for Buffer). */
  readonly typecheck?: boolean
  /** Start a broker with `skein/testing` itself (local provider; needs kafkajs as a dependency). */
  readonly ownBroker?: boolean
}

const cases: ReadonlyArray<Case> = [
  {
    name: "npm",
    install: [["npm", "install"]],
    run: ["node", "app.mjs"],
    typecheck: true,
    ownBroker: true,
    manifest: { dependencies: { skein: version, effect: effectVersion, kafkajs: "2.2.4" } }
  },
  {
    name: "npm-ignore-scripts",
    install: [["npm", "install", "--ignore-scripts"]],
    run: ["node", "app.mjs"]
  },
  {
    // Installed twice from one store: pnpm's side-effects cache would skip an install script.
    name: "pnpm9",
    install: [["npx", "-y", "pnpm@9", "install"], ["sh", "-c", "rm -rf node_modules"], ["npx", "-y", "pnpm@9", "install"]],
    run: ["node", "app.mjs"]
  },
  {
    name: "pnpm10",
    install: [["npx", "-y", "pnpm@10", "install"]],
    run: ["node", "app.mjs"]
  },
  {
    // The current pnpm: an install with undecided build scripts fails (ERR_PNPM_IGNORED_BUILDS),
    // so a project decides each one; Skein has none, the others have prebuilt binaries.
    name: "pnpm12",
    files: {
      "pnpm-workspace.yaml": [
        "allowBuilds:",
        "  classic-level: false",
        "  \"@parcel/watcher\": false",
        "  msgpackr-extract: false",
        // pnpm 12 holds back versions younger than a day; this one was published a moment ago.
        "minimumReleaseAgeExclude:",
        "  - skein",
        ""
      ].join("\n")
    },
    install: [["npx", "-y", "pnpm@12", "install"]],
    run: ["node", "app.mjs"]
  },
  {
    // The README's pnpm command.
    name: "pnpm10-readme",
    manifest: { dependencies: {} },
    install: [["npx", "-y", "pnpm@10", "add", `skein@${version}`, `effect@${effectVersion}`]],
    run: ["node", "app.mjs"]
  },
  {
    // The README's Bun command.
    name: "bun-readme",
    manifest: { dependencies: {} },
    install: [[bin("bun"), "add", `skein@${version}`, `effect@${effectVersion}`]],
    run: [bin("bun"), "app.mjs"]
  },
  {
    // The README's Deno command (the version was published a moment ago: Deno's minimum
    // dependency age, 24 h, would hide it).
    name: "deno-readme",
    manifest: { dependencies: {} },
    install: [[
      bin("deno"),
      "add",
      "--minimum-dependency-age=0",
      `npm:skein@${version}`,
      `npm:effect@${effectVersion}`
    ]],
    run: [bin("deno"), "run", "-A", "app.mjs"]
  },
  {
    name: "bun",
    install: [[bin("bun"), "install"]],
    run: [bin("bun"), "app.mjs"]
  },
  {
    name: "deno",
    install: [[bin("deno"), "install", "--minimum-dependency-age=0"]],
    run: [bin("deno"), "run", "-A", "app.mjs"]
  }
]

const makeProject = async (root: string, registry: string, c: Case): Promise<string> => {
  const dir = path.join(root, c.name)
  await fs.mkdir(dir, { recursive: true })
  const manifest = {
    name: `consumer-${c.name}`,
    version: "1.0.0",
    private: true,
    type: "module",
    dependencies: { skein: version, effect: effectVersion },
    ...(c.typecheck === true ? { devDependencies: { "@types/node": nodeTypesVersion } } : {}),
    ...c.manifest
  }
  await fs.writeFile(path.join(dir, "package.json"), JSON.stringify(manifest, null, 2))
  await fs.writeFile(path.join(dir, ".npmrc"), `registry=${registry}\n`)
  await fs.writeFile(path.join(dir, "app.mjs"), app)
  for (const [file, text] of Object.entries(c.files ?? {})) await fs.writeFile(path.join(dir, file), text)
  return dir
}

const kafkajsState = async (dir: string): Promise<string> => {
  const script = path.join(dir, "node_modules", "skein", "scripts", "patch-kafkajs.mjs")
  const ran = await run("node", [script, "--check"], { cwd: dir })
  return ran.code === 0 ? "patched" : ran.code === 1 ? "unpatched" : `unknown (${ran.output.trim()})`
}

const testCase = async (root: string, registry: string, brokers: ReadonlyArray<string>, c: Case): Promise<string> => {
  const caches = path.join(root, "caches")
  const env = {
    npm_config_registry: registry,
    NPM_CONFIG_REGISTRY: registry,
    BUN_CONFIG_REGISTRY: registry,
    // Every tool caches registry metadata under the registry's host and port, and pnpm (exact
    // versions), Bun and Deno trust a cached skein@0.1.0 without asking the registry: a run
    // whose random port an earlier run had would install that run's tarball. Caches of this run.
    npm_config_cache: path.join(caches, "npm"),
    BUN_INSTALL_CACHE_DIR: path.join(caches, "bun"),
    DENO_DIR: path.join(caches, "deno")
  }
  const dir = await makeProject(root, registry, c)
  const began = Date.now()
  for (const command of c.install) {
    const pnpm = command[0] === "npx" && command[2]?.startsWith("pnpm@") === true
    const args = pnpm ? [...command.slice(1), "--cache-dir", path.join(caches, "pnpm")] : command.slice(1)
    await mustRun(command[0], args, { cwd: dir, env })
  }
  const installed = await kafkajsState(dir)
  log(`${c.name}: installed in ${((Date.now() - began) / 1000).toFixed(0)} s, kafkajs on disk ${installed}`)
  // Skein has no install script: kafkajs stays as published, and Skein patches it when it loads it.
  if (installed !== "unpatched") throw new Error(`${c.name}: kafkajs is ${installed} on disk after install, expected unpatched`)
  if (c.typecheck === true) {
    await fs.writeFile(path.join(dir, "typed.ts"), typedApp)
    await fs.writeFile(path.join(dir, "tsconfig.json"), JSON.stringify(typedTsconfig, null, 2))
    await mustRun(bin("tsc"), ["-p", "tsconfig.json"], { cwd: dir })
    log(`${c.name}: a TypeScript consumer type-checks against the published .d.ts (skipLibCheck: false)`)
  }
  if (c.ownBroker === true) {
    await fs.writeFile(path.join(dir, "broker.mjs"), brokerApp)
    const env = { SKEIN_KAFKA_PROVIDER: "local" }
    const out = await mustRun("node", ["broker.mjs"], { cwd: dir, env })
    if (!/broker local 127\.0\.0\.1:\d+ nodes 1/.test(out)) throw new Error(`${c.name}: skein/testing broker: ${out}`)
    log(`${c.name}: skein/testing started and stopped a local broker of its own`)
  }
  const ran = await runApp(brokers, c.name, dir, c.run)
  if (ran.outcome !== "exactly-once") throw new Error(`${c.name}: exit ${ran.code}\n${ran.output}`)
  return `${c.name}: plain install, kafkajs patched in memory; output exactly once`
}

// ---------------------------------------------------------------------------------------------
// The local registry

const startRegistry = async (root: string, tarball: string) => {
  // A fixed port (SKEIN_PACKAGE_REGISTRY_PORT) reproduces a run whose port an earlier run had.
  const fixedPort = Number(process.env.SKEIN_PACKAGE_REGISTRY_PORT)
  const port = Number.isInteger(fixedPort) && fixedPort > 0 ? fixedPort : await freePort()
  const registry = `http://127.0.0.1:${port}/`
  const dir = path.join(root, "registry")
  await fs.mkdir(dir)
  await fs.writeFile(
    path.join(dir, "config.yaml"),
    [
      "storage: ./storage",
      "uplinks:",
      "  npmjs:",
      "    url: https://registry.npmjs.org/",
      "packages:",
      "  'skein':",
      "    access: $all",
      "    publish: $anonymous $authenticated",
      "  '**':",
      "    access: $all",
      "    proxy: npmjs",
      "log: { type: stdout, format: pretty, level: warn }",
      ""
    ].join("\n")
  )
  const args = ["-y", "verdaccio@6", "--config", "./config.yaml", "--listen", `127.0.0.1:${port}`]
  const server = start("npx", args, dir, {}, true)
  const deadline = Date.now() + 120_000
  for (;;) {
    const ok = await fetch(`${registry}-/ping`).then((r) => r.ok, () => false)
    if (ok) break
    if (Date.now() > deadline) throw new Error(`verdaccio did not start:\n${server.output()}`)
    await sleep(500)
  }
  const host = registry.replace(/^http:/, "")
  await mustRun("npm", ["publish", tarball, "--registry", registry, `--${host}:_authToken=local`, "--ignore-scripts"], {
    cwd: dir
  })
  // npx runs verdaccio in a child of its own: stop the whole process group this script started.
  const pid = server.child.pid
  return { registry, stop: () => pid !== undefined && process.kill(-pid, "SIGTERM") }
}

// ---------------------------------------------------------------------------------------------

/** What a consumer needs, and all the tarball may hold. */
const consumerFiles =
  /^package\/(dist|src|patches)\/|^package\/scripts\/patch-kafkajs\.mjs$|^package\/(package\.json|README\.md|LICENSE|CHANGELOG\.md)$/
const requiredFiles = [
  "package.json",
  "LICENSE",
  "README.md",
  "dist/index.js",
  "dist/index.d.ts",
  "dist/testing/index.js",
  "dist/testing/index.d.ts",
  "scripts/patch-kafkajs.mjs",
  `patches/kafkajs+${manifest.dependencies.kafkajs}.patch`
]

const main = async () => {
  const selected = process.argv.slice(2)
  const unknown = selected.filter((name) => !cases.some((c) => c.name === name))
  if (unknown.length > 0) throw new Error(`no such case: ${unknown.join(", ")} (have: ${cases.map((c) => c.name).join(", ")})`)
  const chosen = selected.length === 0 ? cases : cases.filter((c) => selected.includes(c.name))
  const root = await fs.mkdtemp(path.join(os.tmpdir(), "skein-package-"))
  const scope = Effect.runSync(Scope.make())
  let registry: { readonly registry: string; readonly stop: () => boolean } | undefined
  const results: Array<string> = []
  try {
    await mustRun("npm", ["pack", "--pack-destination", root], { cwd: projectRoot })
    const tarball = path.join(root, `skein-${version}.tgz`)
    const { size } = await fs.stat(tarball)
    const listing = await mustRun("tar", ["tzf", tarball], { cwd: root })
    const files = listing.trim().split("\n")
    const outside = files.filter((file) => !consumerFiles.test(file))
    if (outside.length > 0) throw new Error(`the tarball holds files a consumer does not need: ${outside.join(", ")}`)
    const missing = requiredFiles.filter((file) => !files.includes(`package/${file}`))
    if (missing.length > 0) throw new Error(`the tarball lacks ${missing.join(", ")}`)
    log(`packed ${path.basename(tarball)}: ${(size / 1024).toFixed(1)} kB, ${files.length} files`)
    registry = await startRegistry(root, tarball)
    log(`local registry at ${registry.registry} serves skein@${version}`)
    const broker = await Effect.runPromise(Scope.extend(KafkaBroker.make(), scope))
    log(`Kafka (${broker.kind}) at ${broker.brokers.join(",")}`)
    for (const c of chosen) {
      results.push(await testCase(root, registry.registry, broker.brokers, c))
      log(results[results.length - 1])
    }
  } finally {
    registry?.stop()
    await Effect.runPromise(Scope.close(scope, Exit.void))
    if (process.env.SKEIN_KEEP_PACKAGE_TEST === undefined) await fs.rm(root, { recursive: true, force: true })
    else log(`kept ${root}`)
  }
  console.log(results.join("\n"))
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error instanceof Error ? error.message : String(error))
    process.exit(1)
  }
)
