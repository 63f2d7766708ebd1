/**
 * Which broker the benchmark runs against.
 *  - KAFKA_BROKERS set: that one, untouched.
 *  - otherwise the project's own local broker through its CLI (scripts/kafka.ts, the same as
 *    `npm run kafka -- start|stop|status`): `start` prints the bootstrap address as its last
 *    stdout line. The harness stops it at the end only if it was not already running.
 */
import { existsSync } from "node:fs"
import { join } from "node:path"
import { exec } from "./setup.ts"

export interface BrokerHandle {
  readonly brokers: string
  readonly origin: string
  readonly release: () => Promise<void>
}

const ADDRESS = /^[\w.-]+:\d+(,[\w.-]+:\d+)*$/

const kafkaCli = (root: string, cmd: "start" | "stop" | "status") =>
  exec(process.execPath, ["--import", "tsx", join(root, "scripts", "kafka.ts"), cmd], { cwd: root, timeoutMs: 900_000 })

const lastAddress = (out: string): string | undefined =>
  out
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => ADDRESS.test(l))
    .pop()

export const acquireBroker = async (root: string, log: (m: string) => void): Promise<BrokerHandle> => {
  const env = process.env["KAFKA_BROKERS"]
  if (env !== undefined && env.trim() !== "") {
    return { brokers: env.trim(), origin: `KAFKA_BROKERS=${env.trim()}`, release: async () => undefined }
  }
  if (!existsSync(join(root, "scripts", "kafka.ts"))) {
    throw new Error(
      "the project's local broker (scripts/kafka.ts, `npm run kafka -- start`) is not there yet: " +
        "set KAFKA_BROKERS=host:port to run against a broker you started",
    )
  }
  const before = await kafkaCli(root, "status")
  const wasRunning = before.code === 0 && lastAddress(before.out) !== undefined
  log(wasRunning ? "project broker already running" : "starting the project's broker: npm run kafka -- start")
  const started = await kafkaCli(root, "start")
  const addr = lastAddress(started.out)
  if (started.code !== 0 || addr === undefined) {
    throw new Error(`npm run kafka -- start failed (exit ${started.code}): ${started.out.trim().split("\n").slice(-5).join(" | ")}`)
  }
  return {
    brokers: addr,
    origin: `project broker (scripts/kafka.ts) at ${addr}`,
    release: async () => {
      if (wasRunning) return
      log("stopping the project's broker: npm run kafka -- stop")
      await kafkaCli(root, "stop")
    },
  }
}
