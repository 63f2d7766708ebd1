/**
 * An app as the documentation writes one, run as its own process by the signals test: a stateless
 * copier whose handler takes SLEEP_MS per record, and SLOW_MS for a record
 * whose value starts with "slow" (printing "slow handler started" as it
 * begins), with a long session timeout (30 s) so that a member that did not
 * leave the group stays visible. It prints "starting" as its program begins,
 * before the runner connects, and "exit <code>" as the process exits (not
 * when it is killed). "starting" comes once Skein has loaded kafkajs: that is
 * ~100 ms (more on a busy CPU) of synchronous module loading in which no
 * signal handler runs, and the tsx CLI SIGKILLs a child that does not
 * acknowledge a relayed signal within 30 ms (docs/operations.md, "Rebalances
 * and shutdown"); a test signalling "during startup" signals the runner's start,
 * not that.
 */
import { Duration, Effect, Schema } from "effect"
import { Runner, SkeinConfig, Topic, Transformer } from "../../../src/index.ts"
import * as PatchedKafkajs from "../../../src/internal/kafka/patchedKafkajs.ts"

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
  transform: (record) =>
    Effect.gen(function*() {
      const slow = record.value.startsWith("slow")
      if (slow) console.log("slow handler started")
      yield* Effect.sleep(Duration.millis(Number(env(slow ? "SLOW_MS" : "SLEEP_MS"))))
      return { emit: [Topic.record(Out, record.key, record.value)] }
    })
})

process.on("exit", (code) => console.log(`exit ${code}`))

PatchedKafkajs.load.pipe(
  Effect.zipRight(Effect.sync(() => console.log("starting"))),
  Effect.zipRight(Runner.run(copy)),
  Effect.provide(SkeinConfig.layer({
    applicationId: env("APPLICATION_ID"),
    brokers: env("BROKERS").split(","),
    processingGuarantee: guarantee,
    // At-least-once: offsets are committed only at shutdown (and before revocations).
    commitInterval: Duration.minutes(10),
    maxPollRecords: 20,
    stateDir: env("STATE_DIR"),
    sessionTimeout: Duration.seconds(30),
    heartbeatInterval: Duration.seconds(1),
    shutdownGrace: Duration.seconds(10)
  })),
  Runner.runMain
)
