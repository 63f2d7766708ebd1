/**
 * A stateless copier run as its own process by the delivery test. Its output
 * for the value "nokey" has a null key: a compacted output topic rejects it
 * (INVALID_RECORD), so every transaction of that batch fails.
 */
import { Duration, Effect, Schema } from "effect"
import { Runner, SkeinConfig, Topic, Transformer } from "../../../src/index.ts"

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`${name} is not set`)
  return value
}

const In = Topic.make({ name: env("INPUT"), key: Schema.String, value: Schema.String })
const Out = Topic.make({ name: env("OUTPUT"), key: Schema.String, value: Schema.String })

const copy = Transformer.stateless({
  name: "null-key-copy",
  inputs: [In],
  transform: (record) =>
    Effect.succeed({ emit: [Topic.record(Out, record.value === "nokey" ? null : record.key, record.value)] })
})

Runner.run(copy).pipe(
  Effect.provide(SkeinConfig.layer({
    applicationId: env("APPLICATION_ID"),
    brokers: env("BROKERS").split(","),
    deliveryBackoff: Duration.millis(Number(env("DELIVERY_BACKOFF_MS")))
  })),
  Effect.tapErrorCause((cause) => Effect.logError("run failed", cause)),
  Runner.runMain
)
