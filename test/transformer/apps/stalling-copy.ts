/**
 * A stateless copier run as its own process by the zombie and SIGTERM tests. On
 * the record whose value is "stall" it blocks its whole process (no heartbeats),
 * once: the first process to reach it creates STALL_FILE. The stall lasts until
 * the file RELEASE_FILE exists when that is set (the test's event), STALL_MS at
 * most.
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
  const cell = new Int32Array(new SharedArrayBuffer(4))
  const release = process.env["RELEASE_FILE"]
  const deadline = Date.now() + Number(env("STALL_MS"))
  if (release === undefined) {
    Atomics.wait(cell, 0, 0, Number(env("STALL_MS")))
  } else {
    // Still blocking the whole process: only the file is looked at, every 100 ms.
    while (!fs.existsSync(release) && Date.now() < deadline) Atomics.wait(cell, 0, 0, 100)
  }
  console.log(`woke ${process.pid}${release !== undefined && !fs.existsSync(release) ? " (STALL_MS ran out before RELEASE_FILE)" : ""}`)
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
