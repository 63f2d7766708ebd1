/**
 * The kafkajs client: the one module that builds kafkajs instances.
 *
 * @internal
 */
import { Effect } from "effect"
import kafkajs from "kafkajs"
import type { Kafka, LogEntry } from "kafkajs"
import type { ConfigurationError } from "../../SkeinError.ts"
import { verifyPatched } from "./patchCheck.ts"

const { Kafka: KafkaClass, logLevel } = kafkajs

export type { Kafka }

const levels: Record<string, number> = {
  nothing: logLevel.NOTHING,
  error: logLevel.ERROR,
  warn: logLevel.WARN,
  info: logLevel.INFO,
  debug: logLevel.DEBUG
}

/**
 * kafkajs logs every retried request as an error, which is noise during
 * fencing and rebalances: Skein reports failures as typed errors instead.
 * Set `SKEIN_KAFKAJS_LOG=warn|info|debug` to see the client's own log.
 */
const configuredLevel = (): number => {
  const name = typeof process === "undefined" ? undefined : process.env["SKEIN_KAFKAJS_LOG"]
  return levels[name ?? "nothing"] ?? logLevel.NOTHING
}

const logCreator = () => (entry: LogEntry) => {
  const { message, ...extra } = entry.log
  console.error(`[kafkajs ${entry.namespace}] ${message} ${JSON.stringify(extra)}`)
}

/**
 * A kafkajs client for the given brokers. Fails with `ConfigurationError`
 * when the installed kafkajs lacks Skein's patch (see `patchCheck.ts`): no
 * client is ever built on an unpatched kafkajs.
 */
export const makeKafka = (options: {
  readonly clientId: string
  readonly brokers: ReadonlyArray<string>
}): Effect.Effect<Kafka, ConfigurationError> =>
  Effect.zipRight(
    verifyPatched,
    Effect.sync(() =>
      new KafkaClass({
        clientId: options.clientId,
        brokers: [...options.brokers],
        logLevel: configuredLevel(),
        logCreator,
        retry: { initialRetryTime: 100, retries: 8 }
      })
    )
  )
