/**
 * Contender 6: Kafka's own perf tools (org.apache.kafka:kafka-tools 4.4.0) on the same broker,
 * the machine's ceiling. Two rows:
 *  - kafka-perf-produce: ProducerPerformance, N records of valueBytes, acks=all, unthrottled
 *    (throughput); then throttled to the latency rate: p50/p99 = produce->ack latency.
 *  - kafka-perf-consume: ConsumerPerformance over N records (fetch.nMsg.sec, i.e. excluding the
 *    group join); latency = EndToEndLatency (one record at a time, produce -> consume, acks=all).
 * Jars come from Maven Central into <cache>/jars/tools. On a secured cluster every tool gets the
 * harness's Java client properties (bench/lib/security.ts) with --command-config.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { runToEnd } from "../lib/proc.ts"
import type { ClientConfigFiles } from "../lib/security.ts"
import { mavenJars } from "../lib/setup.ts"
import type { CeilingContender, SetupContext } from "./types.ts"

let javaBase: ReadonlyArray<string> | undefined

const setup = async (ctx: SetupContext) => {
  const jars = join(ctx.cache, "jars", "tools")
  const r = await mavenJars(join(ctx.root, "bench", "peers", "tools", "pom.xml"), jars, ctx.log)
  if (!r.ok) return r
  const log4j = join(ctx.cache, "tools-log4j2.properties")
  writeFileSync(
    log4j,
    [
      "status = error",
      "appender.console.type = Console",
      "appender.console.name = STDERR",
      "appender.console.target = SYSTEM_ERR",
      "appender.console.layout.type = PatternLayout",
      "appender.console.layout.pattern = [%d] %p %m (%c)%n",
      "rootLogger.level = WARN",
      "rootLogger.appenderRef.stderr.ref = STDERR",
      "",
    ].join("\n"),
  )
  javaBase = ["-XX:+UseG1GC", "-Djava.awt.headless=true", `-Dlog4j2.configurationFile=${log4j}`, "-cp", `${jars}/*`]
  return { ok: true } as const
}

const java = (main: string, args: ReadonlyArray<string>) => {
  if (javaBase === undefined) throw new Error("kafka-tools: setup() not run")
  return { cmd: "java", args: [...javaBase, `org.apache.kafka.tools.${main}`, ...args] }
}

/** The tools' --command-config of a secured cluster (none for PLAINTEXT). */
const commandConfig = (files: ClientConfigFiles | undefined): ReadonlyArray<string> =>
  files === undefined ? [] : ["--command-config", files.java]

const producerPerf = (
  brokers: string,
  topic: string,
  n: number,
  size: number,
  throughput: number,
  files: ClientConfigFiles | undefined,
) =>
  java("ProducerPerformance", [
    "--bootstrap-server",
    brokers,
    "--topic",
    topic,
    "--num-records",
    String(n),
    "--record-size",
    String(size),
    "--throughput",
    String(throughput),
    "--command-property",
    "acks=all",
    ...commandConfig(files),
  ])

// "1000000 records sent, 104895.1 records/sec (10.00 MB/sec), 449.98 ms avg latency, 669.00 ms max
//  latency, 461 ms 50th, 562 ms 95th, 573 ms 99th, 581 ms 99.9th."
const parseProducer = (out: string): { rps?: number; p50?: number; p99?: number } => {
  const line = out.split("\n").filter((l) => l.includes("records sent")).pop() ?? ""
  const rps = /([\d.]+) records\/sec/.exec(line)?.[1]
  const p50 = /(\d+) ms 50th/.exec(line)?.[1]
  const p99 = /(\d+) ms 99th/.exec(line)?.[1]
  return {
    ...(rps !== undefined ? { rps: Number(rps) } : {}),
    ...(p50 !== undefined ? { p50: Number(p50) } : {}),
    ...(p99 !== undefined ? { p99: Number(p99) } : {}),
  }
}

export const kafkaPerfProduce: CeilingContender = {
  kind: "ceiling",
  name: "kafka-perf-produce",
  description: "Kafka ProducerPerformance 4.4.0 (JVM), acks=all, unthrottled; latency = produce->ack at the fixed rate",
  setup,
  run: async (a) => {
    await a.createTopic(`${a.topic}.tp`)
    const t = await runToEnd(producerPerf(a.brokers, `${a.topic}.tp`, a.records, a.valueBytes, -1, a.clientConfig), a.logFile, 600_000)
    const tp = parseProducer(t.stdout)
    await a.createTopic(`${a.topic}.lat`)
    const n = Math.max(1, Math.round(a.rate * a.latencySeconds))
    const l = await runToEnd(producerPerf(a.brokers, `${a.topic}.lat`, n, a.valueBytes, a.rate, a.clientConfig), a.logFile, 600_000)
    const lat = parseProducer(l.stdout)
    return {
      ...(tp.rps !== undefined ? { throughput: tp.rps } : {}),
      ...(lat.p50 !== undefined ? { p50: lat.p50 } : {}),
      ...(lat.p99 !== undefined ? { p99: lat.p99 } : {}),
      peakRssMiB: t.peakRssMiB,
      ...(tp.rps === undefined ? { note: `ProducerPerformance failed (exit ${t.code}), see ${a.logFile}` } : {}),
    }
  },
}

export const kafkaPerfConsume: CeilingContender = {
  kind: "ceiling",
  name: "kafka-perf-consume",
  description:
    "Kafka ConsumerPerformance 4.4.0 (JVM), fetch rate excluding group join; latency = EndToEndLatency (1 record in flight)",
  setup,
  run: async (a) => {
    const topic = `${a.topic}.tc`
    await a.createTopic(topic)
    await runToEnd(producerPerf(a.brokers, topic, a.records, a.valueBytes, -1, a.clientConfig), a.logFile, 600_000)
    const c = await runToEnd(
      java("ConsumerPerformance", [
        "--bootstrap-server",
        a.brokers,
        "--topic",
        topic,
        "--num-records",
        String(a.records),
        "--group",
        `${topic}.g`,
        "--timeout",
        "60000",
        ...commandConfig(a.clientConfig),
      ]),
      a.logFile,
      600_000,
    )
    // header: start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    //         rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    const row = c.stdout
      .split("\n")
      .filter((l) => /^\d{4}-/.test(l))
      .pop()
    const cols = row?.split(",").map((s) => s.trim()) ?? []
    const fetchRps = cols[9] !== undefined ? Number(cols[9]) : undefined
    await a.createTopic(`${a.topic}.e2e`)
    const e = await runToEnd(
      java("EndToEndLatency", [
        "--bootstrap-server",
        a.brokers,
        "--topic",
        `${a.topic}.e2e`,
        "--num-records",
        "2000",
        "--producer-acks",
        "all",
        "--record-size",
        String(a.valueBytes),
        ...commandConfig(a.clientConfig),
      ]),
      a.logFile,
      300_000,
    )
    const pct = /50th = ([\d.]+), 99th = ([\d.]+)/.exec(e.stdout)
    return {
      ...(fetchRps !== undefined && Number.isFinite(fetchRps) ? { throughput: fetchRps } : {}),
      ...(pct?.[1] !== undefined ? { p50: Number(pct[1]) } : {}),
      ...(pct?.[2] !== undefined ? { p99: Number(pct[2]) } : {}),
      peakRssMiB: c.peakRssMiB,
      ...(fetchRps === undefined ? { note: `ConsumerPerformance failed (exit ${c.code}), see ${a.logFile}` } : {}),
    }
  },
}
