/**
 * The configuration files of one local broker node: `server.properties`
 * (KRaft, combined broker + controller, settings that keep tests fast) and
 * the logging configuration that sends the broker's log to a file.
 *
 * @internal
 */
import * as Path from "node:path"
import type { LoggingBackend } from "./distribution.ts"

/** Where one node keeps its files. */
export interface NodeLayout {
  /** 0-based position in the cluster. */
  readonly index: number
  readonly nodeId: number
  readonly host: string
  /** The client port: PLAINTEXT, or in a secured node the inter-broker INTERNAL listener's. */
  readonly port: number
  readonly controllerPort: number
  /** A secured node's SASL_SSL and SSL (mutual TLS) listener ports. */
  readonly secure?: { readonly saslSslPort: number; readonly sslPort: number } | undefined
  /** The node's own folder: configs, logs and data. */
  readonly dir: string
  readonly dataDir: string
  readonly configFile: string
  readonly loggingFile: string
  /** Logging of the storage tool: warnings to the console only. */
  readonly toolLoggingFile: string
  /** The broker's log (log4j), where readiness is read from. */
  readonly logFile: string
  /** The JVM's stdout/stderr. */
  readonly outputFile: string
}

/** The files of node `index` under `clusterDir`. */
export const layout = (
  clusterDir: string,
  index: number,
  ports: {
    readonly port: number
    readonly controllerPort: number
    readonly saslSslPort?: number | undefined
    readonly sslPort?: number | undefined
  },
  backend: LoggingBackend
): NodeLayout => {
  const nodeId = index + 1
  const dir = Path.join(clusterDir, `node-${nodeId}`)
  return {
    index,
    nodeId,
    host: "127.0.0.1",
    port: ports.port,
    controllerPort: ports.controllerPort,
    secure: ports.saslSslPort === undefined || ports.sslPort === undefined
      ? undefined
      : { saslSslPort: ports.saslSslPort, sslPort: ports.sslPort },
    dir,
    dataDir: Path.join(dir, "data"),
    configFile: Path.join(dir, "server.properties"),
    loggingFile: Path.join(dir, backend === "log4j2" ? "log4j2.properties" : "log4j.properties"),
    toolLoggingFile: Path.join(dir, backend === "log4j2" ? "tools-log4j2.properties" : "tools-log4j.properties"),
    logFile: Path.join(dir, "server.log"),
    outputFile: Path.join(dir, "stdout.log")
  }
}

/**
 * Settings for a test cluster of `size` nodes: tiny internal topics, no
 * initial rebalance delay, fast cleanup of timed-out transactions, a small
 * cleaner buffer. From 3 nodes on: replication 3 (capped by size) with
 * min.insync.replicas 2 for topics, offsets and transaction state.
 */
export const testSettings = (size: number, backend: LoggingBackend): Record<string, string> => {
  const replication = String(Math.min(size, 3))
  const minIsr = size >= 3 ? "2" : "1"
  return {
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "default.replication.factor": replication,
    "min.insync.replicas": minIsr,
    "offsets.topic.replication.factor": replication,
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": replication,
    "transaction.state.log.min.isr": minIsr,
    "transaction.state.log.num.partitions": "1",
    // Share groups only exist from Kafka 4 on.
    ...(backend === "log4j2"
      ? {
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": minIsr
      }
      : {}),
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "log.cleaner.dedupe.buffer.size": "2097152",
    ...(size > 1
      ? {
        // A killed node is fenced (and leaves the ISR) after 6 s, not 9 s.
        "broker.heartbeat.interval.ms": "1000",
        "broker.session.timeout.ms": "6000"
      }
      : {})
  }
}

/** The `server.properties` of a node of `cluster`. */
export const serverProperties = (
  node: NodeLayout,
  cluster: ReadonlyArray<NodeLayout>,
  settings: Readonly<Record<string, string>>
): string => {
  const voters = cluster.map((n) => `${n.nodeId}@${n.host}:${n.controllerPort}`).join(",")
  // A secured node: inter-broker traffic on a loopback INTERNAL listener, clients on SASL_SSL and SSL.
  const client = node.secure === undefined
    ? `PLAINTEXT://${node.host}:${node.port}`
    : `INTERNAL://${node.host}:${node.port},SASL_SSL://${node.host}:${node.secure.saslSslPort},` +
      `SSL://${node.host}:${node.secure.sslPort}`
  const properties: Record<string, string> = {
    "process.roles": "broker,controller",
    "node.id": String(node.nodeId),
    "controller.quorum.voters": voters,
    "listeners": `${client},CONTROLLER://${node.host}:${node.controllerPort}`,
    "advertised.listeners": client,
    "inter.broker.listener.name": node.secure === undefined ? "PLAINTEXT" : "INTERNAL",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": node.secure === undefined
      ? "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
      : "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL",
    "log.dirs": node.dataDir,
    ...settings
  }
  return Object.entries(properties)
    .map(([key, value]) => `${key}=${escapeProperty(value)}`)
    .join("\n") + "\n"
}

const escapeProperty = (value: string): string => value.replace(/\\/g, "\\\\")

/** The logging configuration sending everything to `node.logFile`. */
export const loggingConfig = (node: NodeLayout, backend: LoggingBackend): string => {
  const file = escapeProperty(node.logFile)
  return backend === "log4j2"
    ? [
      "status = warn",
      "appender.file.type = File",
      "appender.file.name = FILE",
      `appender.file.fileName = ${file}`,
      "appender.file.append = true",
      "appender.file.layout.type = PatternLayout",
      "appender.file.layout.pattern = [%d] %p %m (%c)%n",
      "rootLogger.level = INFO",
      "rootLogger.appenderRef.file.ref = FILE",
      "logger.state.name = state.change.logger",
      "logger.state.level = WARN",
      ""
    ].join("\n")
    : [
      "log4j.rootLogger=INFO, file",
      "log4j.appender.file=org.apache.log4j.FileAppender",
      `log4j.appender.file.File=${file}`,
      "log4j.appender.file.Append=true",
      "log4j.appender.file.layout=org.apache.log4j.PatternLayout",
      "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n",
      "log4j.logger.state.change.logger=WARN",
      ""
    ].join("\n")
}

/** The logging configuration of the storage tool: warnings to stderr. */
export const toolLoggingConfig = (backend: LoggingBackend): string =>
  backend === "log4j2"
    ? [
      "status = warn",
      "appender.console.type = Console",
      "appender.console.name = STDERR",
      "appender.console.target = SYSTEM_ERR",
      "appender.console.layout.type = PatternLayout",
      "appender.console.layout.pattern = [%d] %p %m (%c)%n",
      "rootLogger.level = WARN",
      "rootLogger.appenderRef.console.ref = STDERR",
      ""
    ].join("\n")
    : [
      "log4j.rootLogger=WARN, stderr",
      "log4j.appender.stderr=org.apache.log4j.ConsoleAppender",
      "log4j.appender.stderr.Target=System.err",
      "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout",
      "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n",
      ""
    ].join("\n")

const loggingFlagFor = (file: string, backend: LoggingBackend): string =>
  backend === "log4j2" ? `-Dlog4j2.configurationFile=${file}` : `-Dlog4j.configuration=file:${file}`

/** The JVM flag pointing the broker's logging backend at its configuration. */
export const loggingFlag = (node: NodeLayout, backend: LoggingBackend): string =>
  loggingFlagFor(node.loggingFile, backend)

/** The JVM flag pointing the storage tool's logging backend at its configuration. */
export const toolLoggingFlag = (node: NodeLayout, backend: LoggingBackend): string =>
  loggingFlagFor(node.toolLoggingFile, backend)
