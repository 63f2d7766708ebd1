/**
 * A copier whose handler for the value "slow-fail" prints ENTERED, sleeps
 * 1.5 s and fails: a SIGTERM while it sleeps makes it fail during shutdownGrace.
 */
import { Data, Duration, Effect, Schema } from "effect"
import { Runner, SkeinConfig, Topic, Transformer } from "../../../src/index.ts"

class Rejected extends Data.TaggedError("Rejected")<{ readonly value: string }> {}

const env = (name: string): string => process.env[name] ?? ""
const In = Topic.make({ name: env("INPUT"), key: Schema.String, value: Schema.String })
const Out = Topic.make({ name: env("OUTPUT"), key: Schema.String, value: Schema.String })

const copy = Transformer.stateless({
  name: "grace-fail",
  inputs: [In],
  transform: (record) =>
    record.value === "slow-fail"
      ? Effect.sync(() => console.log("ENTERED")).pipe(
        Effect.zipRight(Effect.sleep("1500 millis")),
        Effect.zipRight(Effect.fail(new Rejected({ value: record.value })))
      )
      : Effect.succeed({ emit: [Topic.record(Out, record.key, record.value)] })
})

Runner.run(copy).pipe(
  Effect.provide(SkeinConfig.layer({
    applicationId: env("APPLICATION_ID"),
    brokers: env("BROKERS").split(","),
    shutdownGrace: Duration.seconds(10)
  })),
  Runner.runMain
)
