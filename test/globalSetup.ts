/**
 * Vitest global setup: one Kafka broker for the whole test run.
 *
 * `KAFKA_BROKERS` set: that cluster is used (nothing is started). Otherwise
 * `KafkaBroker.make` starts one (Docker if a daemon answers, else a local
 * single-node broker) and teardown stops it, leaving no process behind. The
 * run tests Kafka 4.4.0 unless `SKEIN_KAFKA_VERSION` says otherwise
 * (test/compat/globalSetup.ts asks for 3.9.2), and the broker is asked which
 * release it runs (test/utils/brokerVersion.ts): the run fails at once if it
 * is not that version, unless `SKEIN_ALLOW_ANY_KAFKA_VERSION=1`. Its group and
 * transaction coordinators must answer before the first test runs
 * (test/utils/coordinatorsReady.ts). If no broker
 * can be had, the run fails at once with the one message saying what to
 * install or set.
 *
 * While the run lasts, the broker is watched (test/utils/brokerWatch.ts): if
 * it stops accepting connections, the run is cancelled (running tests are
 * interrupted, the rest skipped, as `--bail` does) and fails with a message
 * naming the broker, instead of every later test waiting out its timeout.
 * Tests read the address with `inject("kafkaBrokers")` (see test/utils/broker.ts).
 */
import { Cause, Effect, Exit, Fiber, Option, Scope } from "effect"
import type { TestProject } from "vitest/node"
import * as KafkaBroker from "../src/testing/KafkaBroker.ts"
import * as LocalKafka from "../src/testing/LocalKafka.ts"
import * as BrokerVersion from "./utils/brokerVersion.ts"
import * as BrokerWatch from "./utils/brokerWatch.ts"
import { coordinatorsReady } from "./utils/coordinatorsReady.ts"

declare module "vitest" {
  export interface ProvidedContext {
    /** Comma-separated `host:port` of the run's Kafka broker(s). */
    kafkaBrokers: string
  }
}

/** An error whose message says it all: frames would only distract. */
const plainError = (message: string): Error => {
  const error = new Error(message)
  error.stack = `Error: ${message}`
  return error
}

const failureMessage = <E extends { readonly message: string }>(cause: Cause.Cause<E>): string =>
  Option.match(Cause.failureOption(cause), { onSome: (error) => error.message, onNone: () => Cause.pretty(cause) })

/** `SKEIN_ALLOW_ANY_KAFKA_VERSION=1`: run against a broker of another version than the one claimed. */
const anyVersionAllowed = (): boolean => ["1", "true"].includes((process.env["SKEIN_ALLOW_ANY_KAFKA_VERSION"] ?? "").trim())

/** The run's broker: its bootstrap address and how to stop it. */
export interface RunBroker {
  readonly brokers: ReadonlyArray<string>
  readonly close: () => Promise<void>
}

/**
 * Starts (or connects to) the run's broker and checks that it runs the
 * claimed version: `options.version`, else `SKEIN_KAFKA_VERSION`, else 4.4.0.
 */
export async function startKafka(options: KafkaBroker.Options = {}): Promise<RunBroker> {
  const scope = Effect.runSync(Scope.make())
  const started = Date.now()
  const exit = await Effect.runPromiseExit(Effect.gen(function*() {
    const asked = (process.env["SKEIN_KAFKA_VERSION"] ?? "").trim()
    const claimed = options.version ?? (asked === "" ? LocalKafka.defaultVersion : yield* LocalKafka.parseVersion(asked))
    const broker = yield* Scope.extend(KafkaBroker.make(options), scope)
    const checked = yield* Effect.either(BrokerVersion.verify(broker.brokers, claimed))
    if (checked._tag === "Left") {
      if (!anyVersionAllowed()) return yield* checked.left
      yield* Effect.sync(() =>
        process.stderr.write(`[skein] SKEIN_ALLOW_ANY_KAFKA_VERSION=1, so the run goes on: ${checked.left.message}\n`)
      )
    }
    return { broker, label: checked._tag === "Right" ? `Kafka ${claimed}` : `a broker that is not Kafka ${claimed}` }
  }))
  if (Exit.isFailure(exit)) {
    await Effect.runPromise(Scope.close(scope, exit))
    throw plainError(failureMessage(exit.cause))
  }
  const { broker, label } = exit.value
  try {
    await coordinatorsReady(broker.brokers)
  } catch (error) {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    throw plainError(error instanceof Error ? error.message : String(error))
  }
  const bootstrap = broker.brokers.join(",")
  process.stderr.write(`[skein] ${label} (${broker.kind}) ready at ${bootstrap} in ${Date.now() - started} ms\n`)
  return { brokers: broker.brokers, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

/** Starts the run's broker, provides its address to the tests, and cancels the run if it goes away. */
export async function setupKafka(
  project: TestProject,
  options: KafkaBroker.Options = {}
): Promise<() => Promise<void>> {
  const broker = await startKafka(options)
  project.provide("kafkaBrokers", broker.brokers.join(","))
  let gone: string | undefined
  const watch = Effect.runFork(
    BrokerWatch.untilGone(broker.brokers, { interval: "1 second", failures: 3, connectTimeout: "5 seconds" }).pipe(
      Effect.tap((found) =>
        Effect.sync(() => {
          gone = `the run's Kafka broker at ${found.brokers.join(",")} is gone (${found.attempts} connection attempts ` +
            `failed in a row since ${found.since.toISOString()}, the last: ${found.lastError}): the run is cancelled, ` +
            "its running tests interrupted and the rest skipped (the broker's own log says why it stopped)."
          process.stderr.write(`\n[skein] ${gone}\n\n`)
          // Not awaited: the cancel resolves only when the run has ended.
          void project.vitest.cancelCurrentRun("test-failure")
        })
      )
    )
  )
  return async () => {
    await Effect.runPromise(Fiber.interrupt(watch))
    await broker.close()
    if (gone !== undefined) throw plainError(gone)
  }
}

export default function setup(project: TestProject): Promise<() => Promise<void>> {
  return setupKafka(project)
}
