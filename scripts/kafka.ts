/**
 * A local Kafka broker for development, left running in the background.
 *
 *   npm run kafka -- start [--nodes 3] [--version 3.9.x] [--tuning throughput] [--secure]
 *                                                        prints the bootstrap address last
 *     --secure: SASL_SSL (SCRAM-SHA-512/256, PLAIN) and mutual-TLS SSL listeners, a CA made
 *     for the run, StandardAuthorizer with ACLs; prints the users, passwords and CA file
 *   npm run kafka -- stop
 *   npm run kafka -- status
 *   npm run kafka -- kill <node-index> | restart <node-index>
 *
 * State lives in `<cache>/run/state.json` (cache: SKEIN_CACHE_DIR or ~/.cache/skein),
 * broker folders (logs, data) in `<cache>/run/cluster/node-<id>`.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Cause, Effect, Logger, Option, Schema } from "effect"
import { KafkaBrokerError } from "../src/testing/KafkaBrokerError.ts"
import * as LocalKafka from "../src/testing/LocalKafka.ts"

const usage = "usage: npm run kafka -- start [--nodes N] [--version 4.4|3.9.x] [--tuning test|throughput] [--secure]" +
  " | stop | status | kill <i> | restart <i>"

const State = Schema.Struct({
  bootstrap: Schema.String,
  startedAt: Schema.String,
  cluster: LocalKafka.ClusterDescription
})
type State = typeof State.Type

const decodeState = Schema.decodeUnknown(Schema.parseJson(State))
const encodeState = Schema.encode(Schema.parseJson(State, { space: 2 }))

const invalid = (detail: string) => new KafkaBrokerError({ reason: "InvalidArgument", detail })

const paths = Effect.map(LocalKafka.cacheDirectory, (cache) => ({
  stateFile: Path.join(cache, "run", "state.json"),
  dataDir: Path.join(cache, "run", "cluster")
}))

const say = (line: string) => Effect.sync(() => process.stderr.write(`${line}\n`))

const readState = Effect.gen(function*() {
  const { stateFile } = yield* paths
  if (!Fs.existsSync(stateFile)) return Option.none<State>()
  const text = Fs.readFileSync(stateFile, "utf8")
  return yield* decodeState(text).pipe(
    Effect.map(Option.some),
    Effect.mapError((cause) => invalid(`cannot read ${stateFile}: ${cause.message}`))
  )
})

const writeState = (cluster: LocalKafka.LocalKafkaCluster, startedAt: string) =>
  Effect.gen(function*() {
    const { stateFile } = yield* paths
    const text = yield* encodeState({ bootstrap: cluster.bootstrap, startedAt, cluster: yield* cluster.describe }).pipe(
      Effect.orDie
    )
    Fs.mkdirSync(Path.dirname(stateFile), { recursive: true })
    Fs.writeFileSync(stateFile, `${text}\n`)
  })

const removeState = Effect.flatMap(paths, ({ stateFile }) => Effect.sync(() => Fs.rmSync(stateFile, { force: true })))

const runningPids = (cluster: LocalKafka.LocalKafkaCluster) =>
  Effect.forEach(cluster.nodes, (node) => cluster.pid(node.index))

const option = (args: ReadonlyArray<string>, name: string): Option.Option<string> => {
  const i = args.indexOf(name)
  if (i >= 0) return Option.fromNullable(args[i + 1])
  const inline = args.find((arg) => arg.startsWith(`${name}=`))
  return Option.map(Option.fromNullable(inline), (arg) => arg.slice(name.length + 1))
}

/** How to connect to a secured cluster, as environment settings (test credentials, random per run). */
const securityLines = (security: LocalKafka.SecurityInfo): ReadonlyArray<string> => [
  "secured: SASL_SSL (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN) and SSL with a client certificate (mutual TLS)",
  `  CA file:        ${security.caFile}`,
  `  SASL_SSL:       ${security.saslSslBrokers.join(",")}`,
  `  SSL (mTLS):     ${security.sslBrokers.join(",")}  cert ${security.clientCertFile}  key ${security.clientKeyFile}` +
  `  (${security.clientPrincipal})`,
  `  super user:     ${security.admin.username} / ${security.admin.password}`,
  `  ordinary user:  ${security.user.username} / ${security.user.password}  (only what ACLs grant)`,
  "  e.g.:",
  `  export SKEIN_BROKERS=${security.saslSslBrokers.join(",")} SKEIN_SECURITY_PROTOCOL=SASL_SSL ` +
  `SKEIN_SASL_MECHANISM=SCRAM-SHA-512 SKEIN_SASL_USERNAME=${security.admin.username} ` +
  `SKEIN_SASL_PASSWORD=${security.admin.password} SKEIN_SSL_CA_FILE=${security.caFile}`
]

const start = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const secure = args.includes("--secure")
    const nodesArg = Option.getOrElse(option(args, "--nodes"), () => "1")
    const nodes = Number(nodesArg)
    if (!Number.isInteger(nodes) || nodes < 1) return yield* invalid(`--nodes must be a positive integer, got ${nodesArg}`)
    const version = yield* Option.match(option(args, "--version"), {
      onNone: () => Effect.succeed(LocalKafka.defaultVersion),
      onSome: LocalKafka.parseVersion
    })
    const tuning = Option.getOrElse(option(args, "--tuning"), () => "test")
    if (tuning !== "test" && tuning !== "throughput") {
      return yield* invalid(`--tuning must be test or throughput, got ${tuning}`)
    }
    const previous = yield* readState
    if (Option.isSome(previous)) {
      const cluster = yield* LocalKafka.attach(previous.value.cluster)
      const pids = yield* runningPids(cluster)
      if (pids.some(Option.isSome)) {
        if (cluster.version === version && cluster.nodes.length === nodes && (cluster.security !== undefined) === secure) {
          yield* say(`Kafka ${version} (${nodes} node(s)) already runs`)
          if (cluster.security !== undefined) for (const line of securityLines(cluster.security)) yield* say(line)
          return previous.value.bootstrap
        }
        return yield* invalid(
          `Kafka ${cluster.version} with ${cluster.nodes.length} node(s) already runs at ${previous.value.bootstrap}: ` +
            "npm run kafka -- stop first"
        )
      }
      yield* cluster.stop
      yield* removeState
    }
    const { dataDir } = yield* paths
    yield* say(`starting Kafka ${version}, ${nodes} node(s), ${tuning} tuning${secure ? ", secured" : ""}, in ${dataDir}`)
    const started = Date.now()
    const cluster = yield* LocalKafka.launch({ nodes, version, dataDir, tuning, detached: true, secure })
    yield* writeState(cluster, new Date().toISOString())
    yield* say(
      `ready in ${Date.now() - started} ms${cluster.jars.fetched ? " (jars fetched with Maven)" : ""}; ` +
        `logs: ${cluster.nodes.map((n) => n.logFile).join(", ")}`
    )
    if (cluster.security !== undefined) for (const line of securityLines(cluster.security)) yield* say(line)
    return cluster.bootstrap
  })

const stop = Effect.gen(function*() {
  const state = yield* readState
  if (Option.isNone(state)) return "no Kafka started by this tool"
  const cluster = yield* LocalKafka.attach(state.value.cluster)
  yield* cluster.stop
  yield* removeState
  return `stopped Kafka ${cluster.version} at ${state.value.bootstrap}`
})

const status = Effect.gen(function*() {
  const state = yield* readState
  if (Option.isNone(state)) return "not running"
  const cluster = yield* LocalKafka.attach(state.value.cluster)
  const pids = yield* runningPids(cluster)
  const lines = cluster.nodes.map((node, i) =>
    Option.match(pids[i] ?? Option.none(), {
      onNone: () => `node ${node.nodeId} ${node.address} stopped (log ${node.logFile})`,
      onSome: (pid) => `node ${node.nodeId} ${node.address} running pid ${pid} (log ${node.logFile})`
    })
  )
  const running = pids.filter(Option.isSome).length
  return [
    `Kafka ${cluster.version}: ${running}/${cluster.nodes.length} node(s) running since ${state.value.startedAt}`,
    ...lines,
    ...(cluster.security === undefined ? [] : securityLines(cluster.security)),
    state.value.bootstrap
  ].join("\n")
})

const nodeCommand = (args: ReadonlyArray<string>, what: "kill" | "restart") =>
  Effect.gen(function*() {
    const index = Number(args[0])
    const state = yield* readState
    if (Option.isNone(state)) return yield* invalid("no Kafka started by this tool")
    const cluster = yield* LocalKafka.attach(state.value.cluster)
    yield* what === "kill" ? cluster.killNode(index) : cluster.restartNode(index)
    yield* writeState(cluster, state.value.startedAt)
    return `${what === "kill" ? "killed" : "restarted"} node ${index + 1} (index ${index})`
  })

const main = (argv: ReadonlyArray<string>): Effect.Effect<string, KafkaBrokerError> => {
  const [command, ...args] = argv
  switch (command) {
    case "start":
      return start(args)
    case "stop":
      return stop
    case "status":
      return status
    case "kill":
    case "restart":
      return nodeCommand(args, command)
    default:
      return Effect.fail(invalid(usage))
  }
}

main(process.argv.slice(2)).pipe(
  Effect.provide(Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))),
  Effect.runPromiseExit
).then((exit) => {
  if (exit._tag === "Success") {
    process.stdout.write(`${exit.value}\n`)
  } else {
    const failure = Option.match(Cause.failureOption(exit.cause), {
      onSome: (error) => error.message,
      onNone: () => Cause.pretty(exit.cause)
    })
    process.stderr.write(`kafka: ${failure}\n`)
    process.exitCode = 1
  }
})
