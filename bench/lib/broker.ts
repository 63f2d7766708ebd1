/**
 * Which broker the benchmark runs against.
 *  - KAFKA_BROKERS set: that one, untouched.
 *  - otherwise a private single-node broker started with the project's own
 *    src/testing/LocalKafka.ts (`launch`, fresh temporary data folder), stopped at the end.
 *    It is not the shared one of `npm run kafka -- start`, so concurrent tests neither disturb
 *    the benchmark's broker nor lose theirs when the benchmark ends.
 */
import { Effect } from "effect"
import * as LocalKafka from "../../src/testing/LocalKafka.ts"

export interface BrokerHandle {
  readonly brokers: string
  readonly origin: string
  readonly release: () => Promise<void>
}

export const acquireBroker = async (log: (m: string) => void): Promise<BrokerHandle> => {
  const env = process.env["KAFKA_BROKERS"]
  if (env !== undefined && env.trim() !== "") {
    return { brokers: env.trim(), origin: `KAFKA_BROKERS=${env.trim()}`, release: async () => undefined }
  }
  const heap = process.env["BENCH_KAFKA_HEAP"] ?? "1g"
  log(`starting a private broker with src/testing/LocalKafka.ts (Kafka ${LocalKafka.defaultVersion}, heap ${heap})`)
  const t0 = Date.now()
  const cluster = await Effect.runPromise(LocalKafka.launch({ nodes: 1, heap }))
  log(`broker ready at ${cluster.bootstrap} in ${((Date.now() - t0) / 1000).toFixed(1)} s${cluster.jars.fetched ? " (jars fetched with Maven)" : ""}`)
  return {
    brokers: cluster.bootstrap,
    origin: `project broker (src/testing/LocalKafka.ts, Kafka ${cluster.version}, 1 node, heap ${heap})`,
    release: async () => {
      log("stopping the broker")
      await Effect.runPromise(cluster.stop)
    },
  }
}
