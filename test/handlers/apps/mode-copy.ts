/**
 * A stateless copier run as its own process by the delivery-modes test, so
 * that the test can SIGKILL it. PROCESSING_GUARANTEE picks the mode and
 * COMMIT_INTERVAL_MS how often at-least-once commits offsets.
 */
import { Duration, Effect, Schema } from "effect"
import { Runner, SkeinConfig, Topic, Transformer } from "../../../src/index.ts"

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`${name} is not set`)
  return value
}

const guarantee = env("PROCESSING_GUARANTEE")
if (guarantee !== "exactly-once" && guarantee !== "at-least-once") {
  throw new Error(`PROCESSING_GUARANTEE must be exactly-once or at-least-once, got ${guarantee}`)
}

const In = Topic.make({ name: env("INPUT"), key: Schema.String, value: Schema.String })
const Out = Topic.make({ name: env("OUTPUT"), key: Schema.String, value: Schema.String })

const copy = Transformer.stateless({
  name: "copy",
  inputs: [In],
  transform: (record) => Effect.succeed({ emit: [Topic.record(Out, record.key, record.value)] })
})

Runner.run(copy).pipe(
  Effect.provide(SkeinConfig.layer({
    applicationId: env("APPLICATION_ID"),
    brokers: env("BROKERS").split(","),
    processingGuarantee: guarantee,
    commitInterval: Duration.millis(Number(env("COMMIT_INTERVAL_MS"))),
    maxPollRecords: 50,
    // A SIGKILLed member holds its partitions until its session times out: keep that short.
    sessionTimeout: Duration.seconds(6),
    heartbeatInterval: Duration.millis(500),
    rebalanceTimeout: Duration.seconds(10),
    revocationGrace: Duration.seconds(2)
  })),
  Effect.tapErrorCause((cause) => Effect.logError("run failed", cause)),
  Runner.runMain
)
