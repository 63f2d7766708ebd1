/**
 * Vitest global setup of the compatibility run (`npm run test:compat`,
 * vitest.compat.config.ts): the run's broker is Kafka 3.9.2, the last 3.x
 * line, instead of the default 4.4.0. `SKEIN_KAFKA_VERSION` still wins, so
 * `SKEIN_KAFKA_VERSION=4.4 npm run test:compat` runs the same tests on 4.4.0
 * to compare. With `KAFKA_BROKERS` set the version cannot be chosen: the run
 * fails at once unless that cluster runs the version asked for (or
 * `SKEIN_ALLOW_ANY_KAFKA_VERSION=1`; see test/globalSetup.ts).
 */
import type { TestProject } from "vitest/node"
import { setupKafka } from "../globalSetup.ts"

export default function setup(project: TestProject): Promise<() => Promise<void>> {
  return setupKafka(project, (process.env["SKEIN_KAFKA_VERSION"] ?? "").trim() === "" ? { version: "3.9.2" } : {})
}
