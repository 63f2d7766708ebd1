import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Logger, Option, Scope } from "effect"
import kafkajs from "kafkajs"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as KafkaBroker from "../src/testing/KafkaBroker.ts"
import * as LocalKafka from "../src/testing/LocalKafka.ts"
import { brokers } from "./utils/broker.ts"

const repoRoot = Path.resolve(import.meta.dirname, "..")

/** The current environment with some variables replaced. */
const envWith = (overrides: Record<string, string>) =>
  ConfigProvider.fromMap(new Map(Object.entries(overrides))).pipe(
    ConfigProvider.orElse(() => ConfigProvider.fromEnv())
  )

/** Only these variables: nothing else of this host's environment is seen. */
const envOnly = (variables: Record<string, string>) => ConfigProvider.fromMap(new Map(Object.entries(variables)))

/** pids of java processes running `kafka.Kafka`, from `ps`, with their config file. */
const kafkaProcesses = (): ReadonlyArray<{ readonly pid: number; readonly config: string }> =>
  ChildProcess.execFileSync("ps", ["-eo", "pid=,args="], { encoding: "utf8" })
    .split("\n")
    .map((line) => line.trim().match(/^(\d+)\s+\S*java\s.*\skafka\.Kafka\s+(\S+)$/))
    .flatMap((match) => (match === null ? [] : [{ pid: Number(match[1]), config: match[2] ?? "" }]))

/** The pid of the broker listening on `address`, found through `ps` and its config. */
const pidServing = (address: string): Option.Option<number> =>
  Option.fromNullable(
    kafkaProcesses().find((p) => {
      try {
        return Fs.readFileSync(p.config, "utf8").includes(`listeners=PLAINTEXT://${address},`)
      } catch {
        return false
      }
    })?.pid
  )

const isRunning = (pid: number) => kafkaProcesses().some((p) => p.pid === pid)

const describeCluster = (addresses: ReadonlyArray<string>) =>
  Effect.tryPromise(async () => {
    const admin = new kafkajs.Kafka({ brokers: [...addresses], logLevel: kafkajs.logLevel.NOTHING }).admin()
    await admin.connect()
    try {
      return await admin.describeCluster()
    } finally {
      await admin.disconnect()
    }
  })

const tempDir = (prefix: string) => Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))

describe("KafkaBroker", () => {
  it.effect("the run's broker (globalSetup) answers", () =>
    Effect.gen(function*() {
      const cluster = yield* describeCluster(brokers())
      assert.isAtLeast(cluster.brokers.length, 1)
    }))

  it.effect("a local broker starts, serves and stops, leaving no java process", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const broker = yield* KafkaBroker.make().pipe(
        Scope.extend(scope),
        Effect.withConfigProvider(envWith({ SKEIN_KAFKA_PROVIDER: "local" }))
      )
      assert.strictEqual(broker.kind, "local")
      assert.strictEqual(broker.brokers.length, 1)
      const address = broker.brokers[0] ?? ""
      assert.match(address, /^127\.0\.0\.1:\d+$/)
      const pid = pidServing(address)
      assert.isTrue(Option.isSome(pid), `a java process serves ${address}`)
      const cluster = yield* describeCluster(broker.brokers)
      assert.deepStrictEqual(cluster.brokers.map((b) => `${b.host}:${b.port}`), [address])

      yield* Scope.close(scope, Exit.void)
      assert.isFalse(isRunning(Option.getOrThrow(pid)), "the broker's java process has exited")
      assert.isTrue(Option.isNone(pidServing(address)))
    }))

  it.effect("a second start reuses the cached jars and never runs Maven", () =>
    Effect.gen(function*() {
      // A PATH with java only: Maven cannot run, so the jars must come from the cache.
      const java = ChildProcess.execFileSync("sh", ["-c", "command -v java"], { encoding: "utf8" }).trim()
      const bin = tempDir("skein-bin-")
      Fs.symlinkSync(java, Path.join(bin, "java"))
      const cluster = yield* LocalKafka.start().pipe(
        Effect.withConfigProvider(envWith({ PATH: bin })),
        Effect.scoped,
        Effect.tap((cluster) => Effect.sync(() => assert.isTrue(Option.isNone(pidServing(cluster.bootstrap)))))
      )
      assert.isFalse(cluster.jars.fetched, "the jars came from the cache")
      assert.isTrue(Fs.existsSync(Path.join(cluster.jars.libDir, "kafka_2.13-4.4.0.jar")))
      assert.isFalse(Fs.existsSync(cluster.dataDir), "the broker's folder was removed")
      Fs.rmSync(bin, { recursive: true, force: true })
    }))

  it.effect("KAFKA_BROKERS is used as is, and nothing is started", () =>
    Effect.gen(function*() {
      const broker = yield* KafkaBroker.make().pipe(
        Effect.withConfigProvider(envOnly({ KAFKA_BROKERS: " 10.0.0.1:9092, 10.0.0.2:9092 ", PATH: "/nonexistent" })),
        Effect.scoped
      )
      assert.deepStrictEqual(broker, { brokers: ["10.0.0.1:9092", "10.0.0.2:9092"], kind: "external" })
    }))

  it.effect("KAFKA_BROKERS with a version asked for: used as is, with a warning that the version cannot be chosen", () =>
    Effect.gen(function*() {
      const warnings: Array<string> = []
      const collect = Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => warnings.push(String(message))))
      const broker = yield* KafkaBroker.make({ version: "3.9.2" }).pipe(
        Effect.withConfigProvider(envOnly({ KAFKA_BROKERS: "10.0.0.1:9092", PATH: "/nonexistent" })),
        Effect.scoped,
        Effect.provide(collect)
      )
      assert.deepStrictEqual(broker, { brokers: ["10.0.0.1:9092"], kind: "external" })
      assert.isTrue(
        warnings.some((w) => w.includes("Kafka 3.9.2 was asked for, but KAFKA_BROKERS is set")),
        warnings.join("\n")
      )
    }))

  it.effect("SKEIN_KAFKA_VERSION picks the version of the broker it starts; a bad one fails at once", () =>
    Effect.gen(function*() {
      yield* Effect.scoped(Effect.gen(function*() {
        const broker = yield* KafkaBroker.make().pipe(
          Effect.withConfigProvider(envWith({ SKEIN_KAFKA_PROVIDER: "local", SKEIN_KAFKA_VERSION: "3.9.x" }))
        )
        assert.strictEqual(broker.kind, "local")
        assert.strictEqual(broker.version, "3.9.2")
        const cluster = yield* describeCluster(broker.brokers)
        assert.strictEqual(cluster.brokers.length, 1)
      }))
      const error = yield* KafkaBroker.make().pipe(
        Effect.withConfigProvider(envOnly({ SKEIN_KAFKA_VERSION: "2.8", PATH: "/nonexistent" })),
        Effect.scoped,
        Effect.flip
      )
      assert.strictEqual(error.reason, "InvalidArgument")
      assert.include(error.message, "unsupported Kafka version \"2.8\"")
    }))

  it.effect("fails fast with one typed error saying what to install when nothing can provide a broker", () =>
    Effect.gen(function*() {
      const cache = tempDir("skein-empty-cache-")
      const started = Date.now()
      const error = yield* KafkaBroker.make().pipe(
        Effect.withConfigProvider(envOnly({
          PATH: "/nonexistent",
          SKEIN_CACHE_DIR: cache,
          HOME: cache,
          DOCKER_HOST: "unix:///nonexistent/docker.sock"
        })),
        Effect.scoped,
        Effect.flip
      )
      // Fast because it tries nothing: printed, not asserted; what it did not do is asserted.
      process.stderr.write(`broker: no provider, failed after ${Date.now() - started} ms\n`)
      assert.deepStrictEqual(Fs.readdirSync(cache), [], "nothing downloaded or built into the cache")
      assert.strictEqual(error._tag, "KafkaBrokerError")
      assert.strictEqual(error.reason, "Unavailable")
      assert.include(error.message, "KAFKA_BROKERS")
      assert.include(error.message, "Docker")
      assert.include(error.message, "java is not on PATH")
      assert.include(error.message, "mvn is not on PATH")
      assert.include(error.message, "apt-get install openjdk-17-jre-headless maven")
      Fs.rmSync(cache, { recursive: true, force: true })
    }))

  it.effect("the CLI fails fast with the same message when java and mvn are missing", () =>
    Effect.gen(function*() {
      const cache = tempDir("skein-empty-cache-")
      const result = ChildProcess.spawnSync(
        process.execPath,
        [Path.join(repoRoot, "node_modules", "tsx", "dist", "cli.mjs"), "scripts/kafka.ts", "start"],
        {
          cwd: repoRoot,
          encoding: "utf8",
          timeout: 60_000,
          env: { PATH: "/nonexistent", HOME: cache, SKEIN_CACHE_DIR: cache, DOCKER_HOST: "unix:///nonexistent" }
        }
      )
      assert.strictEqual(result.status, 1, result.stderr)
      assert.strictEqual(result.stdout, "")
      assert.include(result.stderr, "Kafka broker Unavailable: cannot run a local Kafka broker")
      assert.include(result.stderr, "java is not on PATH")
      assert.include(result.stderr, "mvn is not on PATH")
      Fs.rmSync(cache, { recursive: true, force: true })
    }))

  it.effect("runs Kafka 3.9 as a second version", () =>
    Effect.gen(function*() {
      const version = yield* LocalKafka.parseVersion("3.9.x")
      assert.strictEqual(version, "3.9.2")
      const cluster = yield* LocalKafka.start({ version })
      assert.isTrue(Fs.existsSync(Path.join(cluster.jars.libDir, "kafka_2.13-3.9.2.jar")))
      assert.isTrue(Fs.existsSync(Path.join(cluster.jars.libDir, "slf4j-reload4j-1.7.36.jar")))
      const described = yield* describeCluster(cluster.brokers)
      assert.strictEqual(described.brokers.length, 1)
      const log = Fs.readFileSync(cluster.nodes[0]?.logFile ?? "", "utf8")
      assert.include(log, "Kafka version: 3.9.2")

      // A hard stop: SIGKILL, and the folders are still removed.
      const pid = Option.getOrThrow(yield* cluster.pid(0))
      yield* cluster.kill
      assert.isFalse(isRunning(pid))
      assert.isFalse(Fs.existsSync(cluster.dataDir))
    }).pipe(Effect.scoped), 300_000)

  it.effect("rejects unknown versions", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(LocalKafka.parseVersion("2.8"))
      assert.strictEqual(error.reason, "InvalidArgument")
    }))
})
