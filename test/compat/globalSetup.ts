/**
 * Vitest global setup of the compatibility run (`npm run test:compat`,
 * vitest.compat.config.ts): the run's broker is Kafka 3.9.2, the last 3.x
 * line, instead of the default 4.4.0. `SKEIN_KAFKA_VERSION` still wins, so
 * `SKEIN_KAFKA_VERSION=4.4 npm run test:compat` runs the same tests on 4.4.0
 * to compare. With `KAFKA_BROKERS` set the version cannot be chosen: the run
 * warns and uses that cluster as it is.
 */
import type { TestProject } from "vitest/node"
import { setupKafka } from "../globalSetup.ts"

export default function setup(project: TestProject): Promise<() => Promise<void>> {
  return setupKafka(project, (process.env["SKEIN_KAFKA_VERSION"] ?? "").trim() === "" ? { version: "3.9.2" } : {})
}
