/**
 * Vitest global setup: one Kafka broker for the whole test run.
 *
 * `KAFKA_BROKERS` set: that cluster is used (nothing is started). Otherwise
 * `KafkaBroker.make` starts one (Docker if a daemon answers, else a local
 * single-node broker) and teardown stops it, leaving no process behind. Its
 * version is Kafka 4.4.0 unless `SKEIN_KAFKA_VERSION` says otherwise
 * (test/compat/globalSetup.ts asks for 3.9.2). If no
 * broker can be had, the run fails at once with the one message saying what
 * to install or set. Tests read the address with `inject("kafkaBrokers")`
 * (see test/utils/broker.ts).
 */
import { Cause, Effect, Exit, Option, Scope } from "effect"
import type { TestProject } from "vitest/node"
import * as KafkaBroker from "../src/testing/KafkaBroker.ts"

declare module "vitest" {
  export interface ProvidedContext {
    /** Comma-separated `host:port` of the run's Kafka broker(s). */
    kafkaBrokers: string
  }
}

/** Starts (or connects to) the run's broker and provides its address to the tests. */
export async function setupKafka(
  project: TestProject,
  options: KafkaBroker.Options = {}
): Promise<() => Promise<void>> {
  const scope = Effect.runSync(Scope.make())
  const started = Date.now()
  const exit = await Effect.runPromiseExit(Scope.extend(KafkaBroker.make(options), scope))
  if (Exit.isFailure(exit)) {
    await Effect.runPromise(Scope.close(scope, exit))
    const message = Option.match(Cause.failureOption(exit.cause), {
      onSome: (error) => error.message,
      onNone: () => Cause.pretty(exit.cause)
    })
    const error = new Error(message)
    error.stack = `Error: ${message}` // the message says it all; frames would only distract
    throw error
  }
  const broker = exit.value
  const bootstrap = broker.brokers.join(",")
  if (broker.kind !== "external") {
    const version = broker.version === undefined ? "" : ` ${broker.version}`
    process.stderr.write(`[skein] Kafka${version} (${broker.kind}) ready at ${bootstrap} in ${Date.now() - started} ms\n`)
  }
  project.provide("kafkaBrokers", bootstrap)
  return async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

export default function setup(project: TestProject): Promise<() => Promise<void>> {
  return setupKafka(project)
}
