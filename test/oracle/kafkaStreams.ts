/**
 * Kafka Streams 4.4 as a test oracle: runs a named topology (test/oracle/kafka-streams/, see
 * `Topologies.java` for the registry and each topology's params) in its `TopologyTestDriver` on
 * the given input records and returns every output record, in order. The differential tests run
 * the same topology in Skein and compare.
 *
 * The Java program is built with Maven once per set of sources: the jar and its dependencies are
 * cached under `<cache>/oracle/kafka-streams-<hash of the sources>/` (cache: `SKEIN_CACHE_DIR`,
 * else `$XDG_CACHE_HOME/skein`, else `~/.cache/skein`, as for the test brokers' jars); Maven runs
 * offline first (the local repository usually has everything after the first build), online if
 * that fails. Needs Java 17+ and, until the jar is cached, Maven.
 *
 * One JVM start costs about a second: pass several scenarios to `runKafkaStreamsBatch` to run them
 * in one JVM.
 */
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Command } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { Duration, Effect, Option, Schema, type Scope, Stream } from "effect"
import { findJava, findMaven, type HostEnvironment, readHostEnvironment } from "../../src/testing/internal/environment.ts"
import { OracleError } from "./OracleError.ts"

/** A key or value as the oracle writes it: a string (String serde), an integer (Long serde), or null. */
export type Datum = string | number | null

/** One record piped into the topology. */
export interface InputRecord {
  readonly topic: string
  readonly key: Datum
  readonly value: Datum
  /** Milliseconds since the epoch: the record's event time. */
  readonly timestamp: number
  readonly headers?: Readonly<Record<string, string | null>>
}

/** Advance the driver's wall clock (it starts at 0) by `millis` after input number `afterInput` (-1: before the first). */
export interface WallClockAdvance {
  readonly afterInput: number
  readonly millis: number
}

/** A named topology, its params and its input, as the oracle reads them. */
export interface Scenario {
  /** A name registered in `Topologies.java`, e.g. `tumbling-count` or `tumbling-count-suppressed`. */
  readonly topology: string
  /** The topology's params (all it declares, in milliseconds), e.g. `{ sizeMs: 1000, graceMs: 0 }`. */
  readonly params?: Readonly<Record<string, number>>
  readonly inputs: ReadonlyArray<InputRecord>
  readonly advanceWallClock?: ReadonlyArray<WallClockAdvance>
}

const DatumSchema = Schema.Union(Schema.String, Schema.Number, Schema.Null)

/** One record the topology wrote, in the order Kafka Streams wrote it. */
export const OutputRecord = Schema.Struct({
  topic: Schema.String,
  key: DatumSchema,
  value: DatumSchema,
  timestamp: Schema.Number
})
export type OutputRecord = typeof OutputRecord.Type

const OutputLine = Schema.parseJson(Schema.Struct({ scenario: Schema.Int, ...OutputRecord.fields }))
const decodeLine = Schema.decodeUnknownEither(OutputLine)

/** The sources of the Java program: their hash names the cached build. */
export const projectDir: string = Path.join(import.meta.dirname, "kafka-streams")

/** A built oracle: the jar to run, and whether this call had to build it (with the build's time). */
export interface OracleJar {
  readonly jar: string
  readonly built: Option.Option<{ readonly millis: number; readonly offline: boolean }>
}

interface Ran {
  readonly exitCode: number
  readonly stdout: string
  readonly stderr: string
}

const collect = <E>(stream: Stream.Stream<Uint8Array, E>) =>
  stream.pipe(Stream.decodeText(), Stream.runFold("", (text, chunk) => text + chunk))

/** Runs a command to its end, feeding `stdin`, and collects its exit code, stdout and stderr. */
const exec = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd?: string; readonly stdin?: string; readonly env?: Record<string, string> }
): Effect.Effect<Ran, OracleError> => {
  let cmd = Command.make(command, ...args)
  if (options.cwd !== undefined) cmd = Command.workingDirectory(cmd, options.cwd)
  if (options.env !== undefined) cmd = Command.env(cmd, options.env)
  cmd = Command.feed(cmd, options.stdin ?? "")
  return Effect.scoped(
    Effect.gen(function*() {
      const process = yield* Command.start(cmd)
      const [stdout, stderr, exitCode] = yield* Effect.all(
        [collect(process.stdout), collect(process.stderr), process.exitCode],
        { concurrency: "unbounded" }
      )
      return { exitCode: Number(exitCode), stdout, stderr }
    })
  ).pipe(
    Effect.mapError((cause) =>
      new OracleError({ reason: "RunFailed", detail: `could not run ${command} ${args.join(" ")}: ${cause.message}`, cause })
    ),
    Effect.provide(NodeContext.layer)
  )
}

const tail = (text: string, lines = 60): string => text.trimEnd().split("\n").slice(-lines).join("\n")

const fsTry = <A>(reason: "BuildFailed" | "RunFailed", detail: string, f: () => A) =>
  Effect.try({ try: f, catch: (cause) => new OracleError({ reason, detail: `${detail}: ${String(cause)}`, cause }) })

const environment = Effect.mapError(
  readHostEnvironment,
  (cause) => new OracleError({ reason: "RunFailed", detail: cause.detail, cause })
)

const installHint = "install them (apt-get install -y openjdk-17-jdk-headless maven; scripts/ci-preflight.sh does it in CI)"

/** The java executable, checked to be version 17 or later. */
const java = (env: HostEnvironment): Effect.Effect<string, OracleError> =>
  Effect.gen(function*() {
    const found = findJava(env)
    if (Option.isNone(found)) {
      return yield* new OracleError({
        reason: "JavaMissing",
        detail: `the Kafka Streams oracle needs Java 17+: no java in JAVA_HOME nor on PATH; ${installHint}`
      })
    }
    const ran = yield* exec(found.value, ["-version"], {}).pipe(
      Effect.mapError((error) => new OracleError({ reason: "JavaMissing", detail: error.detail, cause: error }))
    )
    const major = Number(/version "(\d+)/.exec(ran.stderr)?.[1] ?? "0")
    if (major < 17) {
      return yield* new OracleError({
        reason: "JavaMissing",
        detail: `the Kafka Streams oracle needs Java 17+, ${found.value} is ${major === 0 ? "of an unknown version" : `version ${major}`}; ${installHint}`
      })
    }
    return found.value
  })

/** A hash of the Java program's sources (pom.xml and src/), naming its cached build. */
export const sourceHash = (dir: string = projectDir): string => {
  const hash = Crypto.createHash("sha256")
  const files: Array<string> = ["pom.xml"]
  const walk = (relative: string): void => {
    for (const entry of Fs.readdirSync(Path.join(dir, relative), { withFileTypes: true })) {
      const child = Path.join(relative, entry.name)
      if (entry.isDirectory()) walk(child)
      else files.push(child)
    }
  }
  walk("src")
  for (const file of files.sort()) {
    hash.update(file).update("\0").update(Fs.readFileSync(Path.join(dir, file))).update("\0")
  }
  return hash.digest("hex").slice(0, 16)
}

const COMPLETE = ".complete"

const errnoCode = (cause: unknown): unknown =>
  typeof cause === "object" && cause !== null && "code" in cause ? cause.code : undefined

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (cause) {
    return errnoCode(cause) === "EPERM"
  }
}

/** Takes `file` as a lock (created exclusively, holding this pid): `true` if taken, `false` if a live process holds it. */
const tryLock = (file: string): boolean => {
  try {
    Fs.mkdirSync(Path.dirname(file), { recursive: true })
    Fs.writeFileSync(file, String(process.pid), { flag: "wx" })
    return true
  } catch (cause) {
    if (errnoCode(cause) !== "EEXIST") throw cause
    const holder = Number(Fs.readFileSync(file, "utf8"))
    if (Number.isInteger(holder) && holder > 0 && isAlive(holder)) return false
    Fs.rmSync(file, { force: true }) // its holder died: take it on the next try
    return false
  }
}

/**
 * One Maven build of the oracle at a time per machine (test files run in parallel forks, on two
 * cores): waits while a live process holds the lock, released with the scope.
 */
const buildLock = (file: string): Effect.Effect<void, OracleError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      while (!(yield* fsTry("BuildFailed", `cannot take the build lock ${file}`, () => tryLock(file)))) {
        yield* Effect.sleep(Duration.millis(500))
      }
    }).pipe(
      Effect.timeoutFail({
        duration: Duration.minutes(20),
        onTimeout: () =>
          new OracleError({ reason: "Timeout", detail: `another process held the oracle's build lock ${file} for 20 minutes` })
      })
    ),
    () => Effect.sync(() => Fs.rmSync(file, { force: true }))
  )

/**
 * The oracle's jar: from the cache, else built with Maven (offline first, then online) in a
 * temporary copy of the project and moved into the cache when complete, so concurrent test files
 * never see a partial build.
 */
export const oracleJar: Effect.Effect<OracleJar, OracleError> = Effect.gen(function*() {
  const env = yield* environment
  const hash = yield* fsTry("BuildFailed", `cannot read the oracle's sources in ${projectDir}`, () => sourceHash())
  const root = Path.join(env.cacheDir, "oracle")
  const target = Path.join(root, `kafka-streams-${hash}`)
  const jar = Path.join(target, "oracle.jar")
  if (Fs.existsSync(Path.join(target, COMPLETE))) return { jar, built: Option.none() }
  const mvn = findMaven(env)
  if (Option.isNone(mvn)) {
    return yield* new OracleError({
      reason: "MavenMissing",
      detail: `the Kafka Streams oracle is not built in ${target} and Maven (mvn) is not on PATH to build it; ${installHint}`
    })
  }
  yield* java(env)
  yield* buildLock(Path.join(root, `kafka-streams-${hash}.lock`))
  // Another process may have built it while this one waited for the lock.
  if (Fs.existsSync(Path.join(target, COMPLETE))) return { jar, built: Option.none() }
  const work = Path.join(root, `build-${process.pid}-${Crypto.randomBytes(4).toString("hex")}`)
  return yield* Effect.gen(function*() {
    yield* fsTry("BuildFailed", `cannot copy ${projectDir} to ${work}`, () => {
      Fs.mkdirSync(work, { recursive: true })
      Fs.cpSync(Path.join(projectDir, "pom.xml"), Path.join(work, "pom.xml"))
      Fs.cpSync(Path.join(projectDir, "src"), Path.join(work, "src"), { recursive: true })
    })
    const started = Date.now()
    const mavenEnv = Option.match(env.javaHome, { onNone: () => ({}), onSome: (home) => ({ JAVA_HOME: home }) })
    const build = (offline: boolean) =>
      exec(mvn.value, ["-B", ...(offline ? ["-o", "-q"] : []), "package"], { cwd: work, env: mavenEnv }).pipe(
        Effect.mapError((error) => new OracleError({ reason: "BuildFailed", detail: error.detail, cause: error }))
      )
    yield* Effect.logInfo(`Building the Kafka Streams oracle with Maven into ${target} (once per source change)`)
    const offline = yield* build(true)
    const offlineWorked = offline.exitCode === 0
    const result = offlineWorked ? offline : yield* build(false)
    if (result.exitCode !== 0) {
      return yield* new OracleError({
        reason: "BuildFailed",
        detail: `mvn package of ${projectDir} failed (exit ${result.exitCode}):\n${tail(result.stdout + result.stderr)}`
      })
    }
    yield* fsTry("BuildFailed", `cannot move the build into ${target}`, () => {
      const staged = Path.join(work, "staged")
      Fs.mkdirSync(staged)
      Fs.renameSync(Path.join(work, "target", "oracle.jar"), Path.join(staged, "oracle.jar"))
      Fs.renameSync(Path.join(work, "target", "lib"), Path.join(staged, "lib"))
      Fs.writeFileSync(Path.join(staged, COMPLETE), `built ${new Date().toISOString()}\n`)
      if (Fs.existsSync(Path.join(target, COMPLETE))) return // another process built it meanwhile
      Fs.rmSync(target, { recursive: true, force: true })
      Fs.renameSync(staged, target)
    })
    const millis = Date.now() - started
    yield* Effect.logInfo(`Kafka Streams oracle built in ${millis} ms (${offlineWorked ? "offline" : "online"})`)
    return { jar, built: Option.some({ millis, offline: offlineWorked }) }
  }).pipe(
    Effect.timeoutFail({
      duration: Duration.minutes(15),
      onTimeout: () => new OracleError({ reason: "Timeout", detail: `building the oracle in ${work} took over 15 minutes` })
    }),
    Effect.ensuring(Effect.sync(() => Fs.rmSync(work, { recursive: true, force: true })))
  )
}).pipe(Effect.scoped)

/**
 * The oracle's JVM flags: a short run on a loaded 2-core machine is fastest with the C1 compiler
 * only and the serial collector (12 scenarios of 1,000 records: 4.3 s, against 11-14 s with the
 * defaults, whose C2 and parallel GC threads compete with the other processes).
 */
const jvmOptions: ReadonlyArray<string> = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]

/**
 * Runs several scenarios in one JVM (each in its own fresh `TopologyTestDriver`) and returns each
 * one's output records, in order.
 */
export const runKafkaStreamsBatch = (
  scenarios: ReadonlyArray<Scenario>
): Effect.Effect<ReadonlyArray<ReadonlyArray<OutputRecord>>, OracleError> =>
  Effect.gen(function*() {
    const env = yield* environment
    const { jar } = yield* oracleJar
    const javaPath = yield* java(env)
    const ran = yield* exec(javaPath, [...jvmOptions, "-jar", jar], { stdin: JSON.stringify(scenarios) }).pipe(
      Effect.timeoutFail({
        duration: Duration.minutes(10),
        onTimeout: () => new OracleError({ reason: "Timeout", detail: `the oracle did not finish ${scenarios.length} scenario(s) in 10 minutes` })
      })
    )
    if (ran.exitCode !== 0) {
      return yield* new OracleError({ reason: "RunFailed", detail: `exit ${ran.exitCode}: ${tail(ran.stderr, 20)}` })
    }
    const outputs: Array<Array<OutputRecord>> = scenarios.map(() => [])
    for (const [n, line] of ran.stdout.split("\n").entries()) {
      if (line === "") continue
      const decoded = decodeLine(line)
      if (decoded._tag === "Left") {
        return yield* new OracleError({ reason: "BadOutput", detail: `stdout line ${n + 1} is not an output record: ${line}` })
      }
      const { scenario, ...record } = decoded.right
      const target = outputs[scenario]
      if (target === undefined) {
        return yield* new OracleError({ reason: "BadOutput", detail: `stdout line ${n + 1} names scenario ${scenario} of ${scenarios.length}` })
      }
      target.push(record)
    }
    return outputs
  })

/**
 * Runs one topology on `inputs` in Kafka Streams' `TopologyTestDriver` and returns every output
 * record, in order.
 */
export const runKafkaStreams = (scenario: Scenario): Effect.Effect<ReadonlyArray<OutputRecord>, OracleError> =>
  Effect.map(runKafkaStreamsBatch([scenario]), (outputs) => outputs[0] ?? [])
