/**
 * Contender 4: Kafka Streams 4.4.0, processing.guarantee=exactly_once_v2, KTable count over a
 * RocksDB store with a changelog (bench/peers/streams/SkeinBenchCount.java); the windowed job's
 * peer is bench/peers/streams/SkeinBenchWindowed.java, the enrichment job's SkeinBenchEnrichment.java.
 * Jars come from Maven Central into <cache>/jars/streams; classes go to bench/peers/build/.
 */
import { join } from "node:path"
import { javac, mavenJars } from "../lib/setup.ts"
import { appArgs } from "./types.ts"
import type { ProcessContender, SetupContext } from "./types.ts"

const jarDir = (ctx: { cache: string }): string => join(ctx.cache, "jars", "streams")
const classDir = (root: string): string => join(root, "bench", "peers", "build", "streams")
let resolved: { jars: string; classes: string } | undefined

/** The JVM's flags and class path of the peers (SkeinBenchCount, SkeinBenchWindowed, SkeinBenchEnrichment). */
const jvmArgs = (): ReadonlyArray<string> => {
  if (resolved === undefined) throw new Error("kafka-streams: setup() not run")
  return [
    "-XX:+UseG1GC",
    "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-cp",
    `${resolved.classes}:${resolved.jars}/*`,
  ]
}

export const kafkaStreams: ProcessContender = {
  kind: "process",
  name: "kafka-streams-eos",
  description:
    "Kafka Streams 4.4.0, exactly_once_v2, KTable count (RocksDB + changelog, record cache off), 1 stream thread, JVM default heap",
  hasState: true,
  restartPhase: true,
  setup: async (ctx: SetupContext) => {
    const jars = jarDir(ctx)
    const j = await mavenJars(join(ctx.root, "bench", "peers", "streams", "pom.xml"), jars, ctx.log)
    if (!j.ok) return j
    const classes = classDir(ctx.root)
    const sources = ["SkeinBenchCount.java", "SkeinBenchWindowed.java", "SkeinBenchEnrichment.java"].map((f) => join(ctx.root, "bench", "peers", "streams", f))
    const c = await javac(sources, jars, classes, ctx.log)
    if (!c.ok) return c
    resolved = { jars, classes }
    return { ok: true }
  },
  command: (s) => {
    return {
      cmd: "java",
      args: [
        ...jvmArgs(),
        "SkeinBenchCount",
        ...appArgs(s, { stateful: true }),
        "--mode",
        "eos",
        ...(s.clientConfig === undefined ? [] : ["--client-config", s.clientConfig.java]),
      ],
    }
  },
  windowedDescription:
    "Kafka Streams 4.4.0, exactly_once_v2: groupBy (repartition topic) → windowedBy(TimeWindows 1 min + grace) → count (RocksDB window store + changelog, record cache at its default 10 MiB) → suppress(untilWindowCloses(unbounded())), 1 stream thread, JVM default heap",
  windowed: (s) => ({
    cmd: "java",
    args: [
      ...jvmArgs(),
      "SkeinBenchWindowed",
      ...appArgs(s, { stateful: true }),
      "--grace-ms",
      String(s.graceMs),
      ...(s.clientConfig === undefined ? [] : ["--client-config", s.clientConfig.java]),
    ],
  }),
  enrichmentDescription:
    "Kafka Streams 4.4.0, exactly_once_v2: KStream.leftJoin(builder.table(table topic)) (RocksDB + changelog, defaults: " +
    "record cache 10 MiB, no topology optimization), 1 stream thread, JVM default heap",
  enrichment: (s) => ({
    cmd: "java",
    args: [
      ...jvmArgs(),
      "SkeinBenchEnrichment",
      ...appArgs(s, { stateful: true }),
      "--table",
      s.table,
      ...(s.clientConfig === undefined ? [] : ["--client-config", s.clientConfig.java]),
    ],
  }),
}
