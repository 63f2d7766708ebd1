/**
 * A stateless copier run as its own process by the zombie test. On the record
 * whose value is "stall" it blocks its whole process (no heartbeats) for
 * STALL_MS, once: the first process to reach it creates STALL_FILE.
 */
import { Duration, Effect, Schema } from "effect"
import * as fs from "node:fs"
import { Runner, SkeinConfig, Topic, Transformer } from "../../../src/index.ts"

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`${name} is not set`)
  return value
}

const In = Topic.make({ name: env("INPUT"), key: Schema.String, value: Schema.String })
const Out = Topic.make({ name: env("OUTPUT"), key: Schema.String, value: Schema.String })

const stallOnce = () => {
  try {
    fs.writeFileSync(env("STALL_FILE"), String(process.pid), { flag: "wx" })
  } catch {
    return
  }
  console.log(`stalling ${process.pid}`)
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Number(env("STALL_MS")))
  console.log(`woke ${process.pid}`)
}

const copy = Transformer.stateless({
  name: "copy",
  inputs: [In],
  transform: (record) =>
    Effect.sync(() => {
      if (record.value === "stall") stallOnce()
      return { emit: [Topic.record(Out, record.key, record.value)] }
    })
})

Runner.run(copy).pipe(
  Effect.provide(SkeinConfig.layer({
    applicationId: env("APPLICATION_ID"),
    brokers: env("BROKERS").split(","),
    maxPollRecords: 20,
    sessionTimeout: Duration.seconds(6),
    heartbeatInterval: Duration.millis(500)
  })),
  Effect.tapErrorCause((cause) => Effect.logError("run failed", cause)),
  Runner.runMain
)
