/**
 * A real Apache Kafka broker, or a cluster of them, run on this machine from
 * jars assembled from Maven Central: no Docker and no download site needed,
 * only Java 17+ (and Maven the first time, to fetch the jars).
 *
 * Use it for chaos tests and benchmarks that need to kill and restart nodes;
 * for plain tests prefer `KafkaBroker.layer`, which also honours
 * `KAFKA_BROKERS` and Docker.
 *
 * @since 0.1.0
 */
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Duration, Effect, Option, Ref, Schedule, Schema } from "effect"
import type { Scope } from "effect"
import { KafkaBrokerError } from "./KafkaBrokerError.ts"
import * as Distribution from "./internal/distribution.ts"
import { findJava, readHostEnvironment } from "./internal/environment.ts"
import * as NodeConfig from "./internal/nodeConfig.ts"
import { freePorts } from "./internal/ports.ts"
import { installHint, live, localProblems } from "./internal/preflight.ts"
import * as Proc from "./internal/process.ts"
import * as Security from "./internal/security.ts"

/**
 * A Kafka version the local broker can run: 4.4.0 (the default) or 3.9.2.
 *
 * @example
 * ```ts
 * import { LocalKafka } from "skein/testing"
 *
 * const version: LocalKafka.KafkaVersion = "3.9.2"
 * const cluster = LocalKafka.start({ version })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type KafkaVersion = Distribution.KafkaVersion

/**
 * The version started when none is asked for.
 *
 * @example
 * ```ts
 * import { LocalKafka } from "skein/testing"
 *
 * LocalKafka.defaultVersion // "4.4.0"
 * ```
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultVersion: KafkaVersion = Distribution.defaultVersion

/**
 * Resolves a version as a user writes it (`4.4`, `3.9.x`, `3.9.2`, ...).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LocalKafka } from "skein/testing"
 *
 * const cluster = Effect.gen(function*() {
 *   const version = yield* LocalKafka.parseVersion("3.9.x") // "3.9.2"
 *   return yield* LocalKafka.start({ version })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const parseVersion: (input: string) => Effect.Effect<KafkaVersion, KafkaBrokerError> =
  Distribution.parseVersion

/**
 * How to start a local cluster.
 *
 * @example
 * ```ts
 * import { LocalKafka } from "skein/testing"
 *
 * const cluster = LocalKafka.start({
 *   nodes: 3,
 *   tuning: "throughput",
 *   heap: "1g",
 *   serverProperties: { "log.retention.ms": "60000" }
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface StartOptions {
  /** How many combined broker+controller nodes (default 1). */
  readonly nodes?: number
  readonly version?: KafkaVersion
  /**
   * Where the nodes keep configs, logs and data (a `node-<id>` folder each).
   * Default: a fresh temporary folder.
   */
  readonly dataDir?: string
  /** Keep the node folders (logs, data) after `stop` (default false). */
  readonly keepData?: boolean
  /** The JVM heap of each node (default "512m"). */
  readonly heap?: string
  /**
   * JVM tuning. `"test"` (default) starts fast and lean: C1 JIT only and the
   * serial GC, about a third less CPU until ready. `"throughput"` uses the
   * flags of Kafka's own start script (full JIT, G1): for benchmarks.
   */
  readonly tuning?: Tuning
  /** More JVM flags for each node, after the tuning's (not another GC). */
  readonly jvmOptions?: ReadonlyArray<string>
  /** How long a node may take to become ready (default 180 s). */
  readonly startTimeout?: Duration.DurationInput
  /** How long a clean shutdown may take before SIGKILL (default 20 s). */
  readonly stopTimeout?: Duration.DurationInput
  /** Let the broker processes outlive this process (the CLI does). */
  readonly detached?: boolean
  /** Extra or overriding `server.properties` settings for every node. */
  readonly serverProperties?: Readonly<Record<string, string>>
  /**
   * Start secured (default false): clients connect over SASL_SSL
   * (SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN) or SSL with a client
   * certificate (mutual TLS), with a CA and certificates made per run,
   * `StandardAuthorizer` and ACLs: an admin super user and an ordinary user
   * allowed only what ACLs grant. See `LocalKafkaCluster.security`.
   */
  readonly secure?: boolean
}

/**
 * How to reach a secured cluster (`StartOptions.secure`). The passwords are
 * random per run: test credentials, printed by `npm run kafka -- start --secure`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LocalKafka } from "skein/testing"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const { security } = yield* LocalKafka.start({ secure: true })
 *   if (security !== undefined) yield* Effect.log(`trust ${security.caFile}; log in as ${security.user.username}`)
 * }))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface SecurityInfo {
  /** SASL_SSL listeners (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN): also the cluster's `brokers`. */
  readonly saslSslBrokers: ReadonlyArray<string>
  /** SSL listeners requiring a client certificate (mutual TLS). */
  readonly sslBrokers: ReadonlyArray<string>
  /** The PEM CA that signed the brokers' certificates (trust it: `SKEIN_SSL_CA_FILE`). */
  readonly caFile: string
  /** A client certificate and key (PEM) signed by the CA, for the SSL listener. */
  readonly clientCertFile: string
  readonly clientKeyFile: string
  /** The principal of that certificate, for ACLs: `User:CN=skein-client`. */
  readonly clientPrincipal: string
  /** The super user (no ACL needed). */
  readonly admin: { readonly username: string; readonly password: string }
  /** An ordinary user: allowed only what ACLs grant (principal `User:<username>`). */
  readonly user: { readonly username: string; readonly password: string }
}

/**
 * The Kafka jars a cluster runs from.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LocalKafka } from "skein/testing"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const { jars } = yield* LocalKafka.start()
 *   yield* Effect.log(`Kafka ${jars.version} from ${jars.libDir}${jars.fetched ? " (fetched with Maven)" : ""}`)
 * }))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Jars {
  readonly version: KafkaVersion
  readonly libDir: string
  /** Whether starting this cluster ran Maven (false: cached jars were used). */
  readonly fetched: boolean
}

/**
 * One node of a local cluster.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LocalKafka } from "skein/testing"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const cluster = yield* LocalKafka.start({ nodes: 3 })
 *   for (const node of cluster.nodes) yield* Effect.log(`node ${node.nodeId} at ${node.address}, log ${node.logFile}`)
 * }))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface NodeInfo {
  /** 0-based position, the argument of `killNode` & co. */
  readonly index: number
  readonly nodeId: number
  /** The client address, `127.0.0.1:<port>`. */
  readonly address: string
  readonly port: number
  readonly controllerPort: number
  readonly dir: string
  /** The broker's log file. */
  readonly logFile: string
}

/**
 * How the broker JVMs are tuned: to start fast (`test`) or run fast (`throughput`).
 *
 * @example
 * ```ts
 * import { LocalKafka } from "skein/testing"
 *
 * const tuning: LocalKafka.Tuning = "throughput" // for benchmarks; "test" starts faster
 * const cluster = LocalKafka.start({ tuning })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Tuning = "test" | "throughput"

/**
 * A running local cluster.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LocalKafka } from "skein/testing"
 *
 * const chaos = Effect.scoped(Effect.gen(function*() {
 *   const cluster = yield* LocalKafka.start({ nodes: 3 })
 *   yield* cluster.killNode(2) // a crash: SIGKILL
 *   yield* cluster.restartNode(2) // back and ready
 * }))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface LocalKafkaCluster {
  readonly version: KafkaVersion
  /** Client addresses of all nodes. */
  readonly brokers: ReadonlyArray<string>
  /** `brokers` joined with commas. */
  readonly bootstrap: string
  readonly nodes: ReadonlyArray<NodeInfo>
  readonly dataDir: string
  readonly jars: Jars
  /** A secured cluster's listeners, CA and users (`StartOptions.secure`); `undefined` for PLAINTEXT. */
  readonly security: SecurityInfo | undefined
  /** The pid of node `index` while it runs. */
  readonly pid: (index: number) => Effect.Effect<Option.Option<number>>
  /** A serializable description, to `attach` to from another process. */
  readonly describe: Effect.Effect<ClusterDescription>
  /**
   * Stops every node (SIGTERM, SIGKILL after the stop timeout), waits until
   * they have exited and removes their folders unless `keepData`.
   */
  readonly stop: Effect.Effect<void>
  /** Like `stop`, but with SIGKILL: every node crashes at once. */
  readonly kill: Effect.Effect<void>
  /** Stops node `index` cleanly (controlled shutdown). */
  readonly stopNode: (index: number) => Effect.Effect<void, KafkaBrokerError>
  /** Kills node `index` with SIGKILL (a crash) and waits until it is gone. */
  readonly killNode: (index: number) => Effect.Effect<void, KafkaBrokerError>
  /** Starts node `index` again (stopping it first if it runs) and waits until it is ready. */
  readonly restartNode: (index: number) => Effect.Effect<void, KafkaBrokerError>
}

/**
 * What `describe` returns and `attach` takes (JSON-friendly).
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { LocalKafka } from "skein/testing"
 *
 * // In another process, from the JSON of `cluster.describe`:
 * const stopSaved = (json: string) => Effect.gen(function*() {
 *   const description = yield* Schema.decodeUnknown(LocalKafka.ClusterDescription)(JSON.parse(json))
 *   const cluster = yield* LocalKafka.attach(description)
 *   yield* cluster.stop
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const ClusterDescription = Schema.Struct({
  version: Schema.Literal("4.4.0", "3.9.2"),
  dataDir: Schema.String,
  ownsDataDir: Schema.Boolean,
  keepData: Schema.Boolean,
  libDir: Schema.String,
  heap: Schema.String,
  tuning: Schema.optionalWith(Schema.Literal("test", "throughput"), { default: () => "test" as const }),
  jvmOptions: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  detached: Schema.Boolean,
  startTimeoutMs: Schema.Number,
  stopTimeoutMs: Schema.Number,
  nodes: Schema.Array(Schema.Struct({
    port: Schema.Number,
    controllerPort: Schema.Number,
    saslSslPort: Schema.optional(Schema.Number),
    sslPort: Schema.optional(Schema.Number),
    pid: Schema.NullOr(Schema.Number)
  })),
  security: Schema.optional(Schema.Struct({
    dir: Schema.String,
    caFile: Schema.String,
    clientCertFile: Schema.String,
    clientKeyFile: Schema.String,
    keystoreFile: Schema.String,
    keystorePassword: Schema.String,
    admin: Schema.Struct({ username: Schema.String, password: Schema.String }),
    user: Schema.Struct({ username: Schema.String, password: Schema.String })
  }))
})

/**
 * The type of a `ClusterDescription`.
 *
 * @example
 * ```ts
 * import * as Fs from "node:fs"
 * import { LocalKafka } from "skein/testing"
 *
 * const save = (description: LocalKafka.ClusterDescription): void =>
 *   Fs.writeFileSync("kafka-cluster.json", JSON.stringify(description))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type ClusterDescription = typeof ClusterDescription.Type

// ---------------------------------------------------------------------------
// internals

interface Runtime {
  readonly java: string
  readonly libDir: string
  readonly backend: Distribution.LoggingBackend
  readonly heap: string
  readonly tuning: Tuning
  readonly jvmOptions: ReadonlyArray<string>
  readonly startTimeoutMs: number
  readonly stopTimeoutMs: number
  readonly detached: boolean
}

const READY_LINE = "Kafka Server started"
const PORT_IN_USE = "Address already in use"

const classpath = (libDir: string) => `${libDir}${Path.sep}*`

const tuningFlags: Record<Tuning, ReadonlyArray<string>> = {
  test: ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"],
  // As bin/kafka-run-class.sh.
  throughput: [
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent"
  ]
}

const jvmArgs = (runtime: Runtime, node: NodeConfig.NodeLayout): ReadonlyArray<string> => [
  `-Xmx${runtime.heap}`,
  ...tuningFlags[runtime.tuning],
  "-XX:-UsePerfData",
  "-Djava.awt.headless=true",
  `-Dkafka.logs.dir=${node.dir}`,
  NodeConfig.loggingFlag(node, runtime.backend),
  ...runtime.jvmOptions
]

const startError = (reason: "StartFailed" | "PortInUse" | "Timeout", node: NodeConfig.NodeLayout, what: string) =>
  new KafkaBrokerError({
    reason,
    detail: `node ${node.nodeId} (${node.host}:${node.port}) ${what}; its log is ${node.logFile}\n` +
      Proc.tail(readFrom(node.logFile, 0), 20) +
      (Fs.existsSync(node.outputFile) ? `\n${Proc.tail(readFrom(node.outputFile, 0), 10)}` : "")
  })

/** The text of `file` from byte `offset` on ("" if it does not exist). */
const readFrom = (file: string, offset: number): string => {
  let fd: number | undefined
  try {
    fd = Fs.openSync(file, "r")
    const size = Fs.fstatSync(fd).size
    if (size <= offset) return ""
    const buffer = Buffer.alloc(size - offset)
    Fs.readSync(fd, buffer, 0, buffer.length, offset)
    return buffer.toString("utf8")
  } catch {
    return ""
  } finally {
    if (fd !== undefined) Fs.closeSync(fd)
  }
}

const fileSize = (file: string): number => {
  try {
    return Fs.statSync(file).size
  } catch {
    return 0
  }
}

const fsEffect = <A>(detail: string, f: () => A): Effect.Effect<A, KafkaBrokerError> =>
  Effect.try({ try: f, catch: (cause) => new KafkaBrokerError({ reason: "StartFailed", detail, cause }) })

/** A Kafka cluster id: 16 random bytes, base64url, not starting with "-". */
const randomClusterId = (): string => {
  for (;;) {
    const id = Crypto.randomBytes(16).toString("base64url")
    if (!id.startsWith("-")) return id
  }
}

const writeNodeFiles = (
  nodes: ReadonlyArray<NodeConfig.NodeLayout>,
  runtime: Runtime,
  settings: Readonly<Record<string, string>>
) =>
  fsEffect("cannot write the node folders", () => {
    for (const node of nodes) {
      Fs.rmSync(node.dir, { recursive: true, force: true })
      Fs.mkdirSync(node.dataDir, { recursive: true })
      Fs.writeFileSync(node.configFile, NodeConfig.serverProperties(node, nodes, settings))
      Fs.writeFileSync(node.loggingFile, NodeConfig.loggingConfig(node, runtime.backend))
      Fs.writeFileSync(node.toolLoggingFile, NodeConfig.toolLoggingConfig(runtime.backend))
    }
  })

/**
 * `kafka-storage.sh format`: writes meta.properties and the bootstrap
 * metadata (with a secured cluster's SCRAM users).
 */
const format = (
  runtime: Runtime,
  node: NodeConfig.NodeLayout,
  clusterId: string,
  security: Security.Material | undefined
) =>
  Proc.run({
    command: runtime.java,
    args: [
      "-Xmx256m",
      "-XX:TieredStopAtLevel=1",
      "-XX:+UseSerialGC",
      "-XX:-UsePerfData",
      NodeConfig.toolLoggingFlag(node, runtime.backend),
      "-cp",
      classpath(runtime.libDir),
      "kafka.tools.StorageTool",
      "format",
      "-t",
      clusterId,
      "-c",
      node.configFile,
      ...(security === undefined ? [] : Security.scramArguments(security))
    ],
    cwd: node.dir,
    timeoutMs: 120_000
  }).pipe(
    Effect.tap((result) => Effect.sync(() => Fs.appendFileSync(node.outputFile, result.output))),
    Effect.filterOrFail(
      (result) => result.exitCode === 0,
      (result) => startError("StartFailed", node, `could not be formatted (exit ${result.exitCode})`)
    ),
    Effect.asVoid
  )

const launchNode = (runtime: Runtime, node: NodeConfig.NodeLayout) =>
  Proc.spawn({
    command: runtime.java,
    args: [...jvmArgs(runtime, node), "-cp", classpath(runtime.libDir), "kafka.Kafka", node.configFile],
    cwd: node.dir,
    outputFile: node.outputFile,
    detached: runtime.detached
  })

/**
 * Waits until the node logs that it started (after byte `offset` of its
 * log), failing fast if it exits or cannot bind its ports.
 */
const awaitReady = (
  runtime: Runtime,
  node: NodeConfig.NodeLayout,
  running: Proc.Running,
  offset: number
): Effect.Effect<void, KafkaBrokerError> => {
  // Scan the log incrementally: only new bytes, plus the last partial line.
  let position = offset
  let carry = ""
  const check = Effect.suspend(() => {
    const chunk = readFrom(node.logFile, position)
    position += Buffer.byteLength(chunk)
    const text = carry + chunk
    carry = text.slice(text.lastIndexOf("\n") + 1)
    if (text.includes(READY_LINE)) return Effect.succeed(true)
    if (text.includes(PORT_IN_USE)) return Effect.fail(startError("PortInUse", node, "could not bind its ports"))
    return Effect.succeed(false)
  })
  const ready = check.pipe(
    Effect.repeat({ schedule: Schedule.spaced(Duration.millis(100)), until: (done) => done }),
    Effect.asVoid
  )
  const exited = running.awaitExit.pipe(
    Effect.zipRight(Effect.sleep(Duration.millis(100))), // let the last log lines land
    Effect.zipRight(Effect.suspend(() =>
      Effect.fail(
        readFrom(node.logFile, offset).includes(PORT_IN_USE)
          ? startError("PortInUse", node, "could not bind its ports")
          : startError("StartFailed", node, "exited before it was ready")
      )
    ))
  )
  return Effect.raceFirst(ready, exited).pipe(
    Effect.timeoutFail({
      duration: Duration.millis(runtime.startTimeoutMs),
      onTimeout: () => startError("Timeout", node, `was not ready after ${runtime.startTimeoutMs} ms`)
    })
  )
}

const killAll = (processes: ReadonlyArray<Proc.Running>) =>
  Effect.forEach(processes, (p) => Proc.terminate(p, "SIGKILL", 5_000), { concurrency: "unbounded", discard: true })

/** One try at starting a fresh cluster on newly chosen ports. */
const startOnce = (
  runtime: Runtime,
  dataDir: string,
  size: number,
  settings: Readonly<Record<string, string>>,
  security: Security.Material | undefined
) =>
  Effect.gen(function*() {
    const perNode = security === undefined ? 2 : 4
    const ports = yield* freePorts("127.0.0.1", size * perNode)
    const nodes = Array.from(
      { length: size },
      (_, i) =>
        NodeConfig.layout(dataDir, i, {
          port: ports[perNode * i] ?? 0,
          controllerPort: ports[perNode * i + 1] ?? 0,
          saslSslPort: security === undefined ? undefined : ports[perNode * i + 2] ?? 0,
          sslPort: security === undefined ? undefined : ports[perNode * i + 3] ?? 0
        }, runtime.backend)
    )
    yield* writeNodeFiles(nodes, runtime, settings)
    const clusterId = randomClusterId()
    yield* Effect.forEach(nodes, (node) => format(runtime, node, clusterId, security), { concurrency: "unbounded" })
    const started: Array<Proc.Running> = []
    yield* Effect.forEach(nodes, (node) =>
      launchNode(runtime, node).pipe(
        Effect.tap((running) => Effect.sync(() => started.push(running))),
        Effect.flatMap((running) => awaitReady(runtime, node, running, 0))
      ), { concurrency: "unbounded", discard: true }).pipe(Effect.onError(() => killAll(started)))
    return { nodes, processes: [...started] }
  })

const makeCluster = (params: {
  readonly version: KafkaVersion
  readonly runtime: Runtime
  readonly jars: Jars
  readonly dataDir: string
  readonly ownsDataDir: boolean
  readonly keepData: boolean
  readonly nodes: ReadonlyArray<NodeConfig.NodeLayout>
  readonly processes: ReadonlyArray<Option.Option<Proc.Running>>
  readonly security: Security.Material | undefined
}): Effect.Effect<LocalKafkaCluster> =>
  Effect.gen(function*() {
    const { nodes, runtime } = params
    const slots = yield* Effect.forEach(nodes, (_, i) => Ref.make(params.processes[i] ?? Option.none()))
    const stopped = yield* Ref.make(false)
    const lock = yield* Effect.makeSemaphore(1)

    const slot = (index: number) =>
      Effect.gen(function*() {
        if (yield* Ref.get(stopped)) {
          return yield* new KafkaBrokerError({ reason: "InvalidArgument", detail: "the cluster was stopped" })
        }
        const node = nodes[index]
        const ref = slots[index]
        if (!Number.isInteger(index) || node === undefined || ref === undefined) {
          return yield* new KafkaBrokerError({
            reason: "InvalidArgument",
            detail: `no node ${index}: indexes are 0..${nodes.length - 1}`
          })
        }
        return { node, ref }
      })

    const endNode = (ref: Ref.Ref<Option.Option<Proc.Running>>, signal: NodeJS.Signals) =>
      Effect.gen(function*() {
        const current = yield* Ref.get(ref)
        if (Option.isSome(current)) {
          const { forced } = yield* Proc.terminate(current.value, signal, runtime.stopTimeoutMs)
          if (forced && signal === "SIGTERM") {
            yield* Effect.logWarning(`Kafka node pid ${current.value.pid} ignored SIGTERM; killed it`)
          }
        }
        yield* Ref.set(ref, Option.none())
      })

    const pid = (index: number) =>
      Effect.gen(function*() {
        const ref = slots[index]
        if (ref === undefined) return Option.none<number>()
        const current = yield* Ref.get(ref)
        if (Option.isNone(current)) return Option.none<number>()
        return (yield* current.value.isAlive) ? Option.some(current.value.pid) : Option.none<number>()
      })

    const describe: Effect.Effect<ClusterDescription> = Effect.gen(function*() {
      const pids = yield* Effect.forEach(nodes, (_, i) => pid(i))
      return {
        version: params.version,
        dataDir: params.dataDir,
        ownsDataDir: params.ownsDataDir,
        keepData: params.keepData,
        libDir: runtime.libDir,
        heap: runtime.heap,
        tuning: runtime.tuning,
        jvmOptions: runtime.jvmOptions,
        detached: runtime.detached,
        startTimeoutMs: runtime.startTimeoutMs,
        stopTimeoutMs: runtime.stopTimeoutMs,
        nodes: nodes.map((node, i) => ({
          port: node.port,
          controllerPort: node.controllerPort,
          ...(node.secure === undefined ? {} : node.secure),
          pid: Option.getOrNull(pids[i] ?? Option.none())
        })),
        ...(params.security === undefined ? {} : { security: params.security })
      }
    })

    const shutdown = (signal: NodeJS.Signals): Effect.Effect<void> =>
      lock.withPermits(1)(Effect.gen(function*() {
        if (yield* Ref.getAndSet(stopped, true)) return
        yield* Effect.forEach(slots, (ref) => endNode(ref, signal), { concurrency: "unbounded", discard: true })
        if (!params.keepData) {
          yield* Effect.sync(() => {
            for (const node of nodes) Fs.rmSync(node.dir, { recursive: true, force: true })
            if (params.security !== undefined) Fs.rmSync(params.security.dir, { recursive: true, force: true })
            if (params.ownsDataDir) Fs.rmSync(params.dataDir, { recursive: true, force: true })
          }).pipe(Effect.catchAllDefect((cause) => Effect.logWarning(`cannot remove ${params.dataDir}`, cause)))
        }
      }))

    const restartNode = (index: number) =>
      lock.withPermits(1)(
        Effect.gen(function*() {
          const { node, ref } = yield* slot(index)
          yield* endNode(ref, "SIGTERM")
          const offset = fileSize(node.logFile)
          const running = yield* launchNode(runtime, node)
          yield* Ref.set(ref, Option.some(running))
          yield* awaitReady(runtime, node, running, offset).pipe(
            Effect.onError(() => endNode(ref, "SIGKILL"))
          )
        })
      )

    const material = params.security
    const saslSslBrokers = nodes.map((node) => `${node.host}:${node.secure?.saslSslPort ?? node.port}`)
    const brokers = material === undefined ? nodes.map((node) => `${node.host}:${node.port}`) : saslSslBrokers
    return {
      version: params.version,
      brokers,
      bootstrap: brokers.join(","),
      security: material === undefined ? undefined : {
        saslSslBrokers,
        sslBrokers: nodes.map((node) => `${node.host}:${node.secure?.sslPort ?? node.port}`),
        caFile: material.caFile,
        clientCertFile: material.clientCertFile,
        clientKeyFile: material.clientKeyFile,
        clientPrincipal: Security.clientPrincipal,
        admin: material.admin,
        user: material.user
      },
      nodes: nodes.map((node) => ({
        index: node.index,
        nodeId: node.nodeId,
        address: `${node.host}:${node.port}`,
        port: node.port,
        controllerPort: node.controllerPort,
        dir: node.dir,
        logFile: node.logFile
      })),
      dataDir: params.dataDir,
      jars: params.jars,
      pid,
      describe,
      stop: live(shutdown("SIGTERM")),
      kill: live(shutdown("SIGKILL")),
      stopNode: (index) => live(lock.withPermits(1)(Effect.flatMap(slot(index), ({ ref }) => endNode(ref, "SIGTERM")))),
      killNode: (index) => live(lock.withPermits(1)(Effect.flatMap(slot(index), ({ ref }) => endNode(ref, "SIGKILL")))),
      restartNode: (index) => live(restartNode(index))
    } satisfies LocalKafkaCluster
  })

const unavailable = (problems: ReadonlyArray<string>) =>
  new KafkaBrokerError({
    reason: "Unavailable",
    detail: `cannot run a local Kafka broker: it needs ${problems.join(" and ")}. ${installHint}`
  })

/**
 * Checks that this host can run a local broker of `version`: java is found,
 * and the jars are cached or Maven is found to fetch them. Fails with
 * `reason: "Unavailable"` saying what to install otherwise.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LocalKafka } from "skein/testing"
 *
 * const cluster = LocalKafka.preflight("3.9.2").pipe(
 *   Effect.zipRight(LocalKafka.start({ version: "3.9.2" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const preflight = (version: KafkaVersion = defaultVersion): Effect.Effect<void, KafkaBrokerError> =>
  Effect.flatMap(readHostEnvironment, (env) => {
    const problems = localProblems(env, version)
    return problems.length === 0 ? Effect.void : Effect.fail(unavailable(problems))
  })

/**
 * Starts a local cluster and returns once every node is ready. The caller
 * owns it and must `stop` it; prefer `start`, which stops it with its scope.
 * Assembles the jars with Maven on first use (cached afterwards).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LocalKafka } from "skein/testing"
 *
 * const program = Effect.gen(function*() {
 *   const cluster = yield* LocalKafka.launch({ nodes: 3, detached: true })
 *   yield* Effect.log(`Kafka at ${cluster.bootstrap}`)
 *   return yield* cluster.describe // to attach to it later
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const launch = (options: StartOptions = {}): Effect.Effect<LocalKafkaCluster, KafkaBrokerError> =>
  Effect.gen(function*() {
    const size = options.nodes ?? 1
    if (!Number.isInteger(size) || size < 1) {
      return yield* new KafkaBrokerError({ reason: "InvalidArgument", detail: `nodes must be >= 1, got ${size}` })
    }
    const version = options.version ?? defaultVersion
    const env = yield* readHostEnvironment
    const problems = localProblems(env, version)
    const java = findJava(env)
    if (problems.length > 0 || Option.isNone(java)) return yield* unavailable(problems)
    const distribution = yield* Distribution.ensure(env, version)
    const backend = Distribution.loggingBackend(version)
    const runtime: Runtime = {
      java: java.value,
      libDir: distribution.libDir,
      backend,
      heap: options.heap ?? "512m",
      tuning: options.tuning ?? "test",
      jvmOptions: options.jvmOptions ?? [],
      startTimeoutMs: Duration.toMillis(options.startTimeout ?? Duration.seconds(180)),
      stopTimeoutMs: Duration.toMillis(options.stopTimeout ?? Duration.seconds(20)),
      detached: options.detached ?? false
    }
    const ownsDataDir = options.dataDir === undefined
    const dataDir = yield* fsEffect("cannot create the data folder", () => {
      if (options.dataDir === undefined) return Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-kafka-"))
      Fs.mkdirSync(options.dataDir, { recursive: true })
      return Path.resolve(options.dataDir)
    })
    const security = options.secure === true ? yield* Security.generate(Path.join(dataDir, "security")) : undefined
    const settings = {
      ...NodeConfig.testSettings(size, backend),
      ...(security === undefined ? {} : Security.serverSettings(security)),
      ...options.serverProperties
    }
    const started = Date.now()
    const { nodes, processes } = yield* startOnce(runtime, dataDir, size, settings, security).pipe(
      Effect.tapError((error) =>
        error.reason === "PortInUse" ? Effect.logDebug("a port was taken; retrying on new ports") : Effect.void
      ),
      Effect.retry({ times: 3, while: (error) => error.reason === "PortInUse" }),
      Effect.onError(() =>
        ownsDataDir && options.keepData !== true
          ? Effect.sync(() => Fs.rmSync(dataDir, { recursive: true, force: true }))
          : Effect.void
      )
    )
    yield* Effect.logDebug(`Kafka ${version}: ${size} node(s) ready in ${Date.now() - started} ms`)
    return yield* makeCluster({
      version,
      runtime,
      jars: { version, libDir: distribution.libDir, fetched: distribution.fetched },
      dataDir,
      ownsDataDir,
      keepData: options.keepData ?? false,
      nodes,
      processes: processes.map(Option.some),
      security
    })
  }).pipe(live)

/**
 * Starts a local cluster for the life of the current scope: closing the
 * scope stops every node and waits until its process has exited.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LocalKafka } from "skein/testing"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const cluster = yield* LocalKafka.start({ nodes: 3 })
 *   yield* Effect.log(`Kafka ${cluster.version} at ${cluster.bootstrap}`)
 * })) // every node has exited here
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const start = (options: StartOptions = {}): Effect.Effect<LocalKafkaCluster, KafkaBrokerError, Scope.Scope> =>
  Effect.uninterruptibleMask((restore) =>
    restore(launch(options)).pipe(Effect.tap((cluster) => Effect.addFinalizer(() => cluster.stop)))
  )

/**
 * A handle on a cluster started by another process (from its `describe`),
 * e.g. by `npm run kafka -- start`: to stop it or kill and restart nodes.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LocalKafka } from "skein/testing"
 *
 * const stop = (description: LocalKafka.ClusterDescription) => Effect.gen(function*() {
 *   const cluster = yield* LocalKafka.attach(description)
 *   yield* cluster.stop
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const attach = (description: ClusterDescription): Effect.Effect<LocalKafkaCluster, KafkaBrokerError> =>
  Effect.gen(function*() {
    const env = yield* readHostEnvironment
    // java is only needed to restart a node: stopping needs nothing.
    const java = Option.getOrElse(findJava(env), () => "java")
    const backend = Distribution.loggingBackend(description.version)
    const nodes = description.nodes.map((node, i) => NodeConfig.layout(description.dataDir, i, node, backend))
    return yield* makeCluster({
      version: description.version,
      runtime: {
        java,
        libDir: description.libDir,
        backend,
        heap: description.heap,
        tuning: description.tuning,
        jvmOptions: description.jvmOptions,
        startTimeoutMs: description.startTimeoutMs,
        stopTimeoutMs: description.stopTimeoutMs,
        detached: description.detached
      },
      jars: { version: description.version, libDir: description.libDir, fetched: false },
      dataDir: description.dataDir,
      ownsDataDir: description.ownsDataDir,
      keepData: description.keepData,
      nodes,
      security: description.security,
      processes: description.nodes.map((node, i) => {
        const layout = nodes[i]
        return node.pid === null || layout === undefined
          ? Option.none()
          : Option.some(Proc.attach(node.pid, layout.configFile))
      })
    })
  })

/**
 * The folder where Kafka jars (and the CLI's broker state) are cached:
 * `SKEIN_CACHE_DIR`, else `$XDG_CACHE_HOME/skein`, else `~/.cache/skein`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LocalKafka } from "skein/testing"
 *
 * const program = Effect.gen(function*() {
 *   const dir = yield* LocalKafka.cacheDirectory
 *   yield* Effect.log(`Kafka jars are cached in ${dir}`)
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const cacheDirectory: Effect.Effect<string, KafkaBrokerError> = Effect.map(
  readHostEnvironment,
  (env) => env.cacheDir
)

/**
 * An unsecured JWS token (`alg: none`) for `subject`: what a secured local
 * broker's OAUTHBEARER mechanism accepts (principal `User:<subject>`), e.g.
 * as `SkeinConfig.oauthBearerToken`. Real clusters validate tokens signed by
 * an identity provider.
 *
 * @example
 * ```ts
 * import { Effect, Redacted } from "effect"
 * import { SkeinConfig } from "skein"
 * import { KafkaBroker, LocalKafka } from "skein/testing"
 *
 * const oauth = (security: LocalKafka.SecurityInfo) => SkeinConfig.layer({
 *   applicationId: "oauth-test", ...KafkaBroker.connection(security, { mechanism: "PLAIN" }),
 *   saslMechanism: "OAUTHBEARER",
 *   oauthBearerToken: Effect.sync(() => Redacted.make(LocalKafka.unsecuredToken(security.user.username)))
 * })
 * ```
 *
 * @since 0.1.0
 * @category utils
 */
export const unsecuredToken: (subject: string, lifetimeSeconds?: number) => string = Security.unsecuredToken
