import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { brokers, caughtUp, createTopics, offsets, produce, readCommitted, sleep, unique } from "../helpers/kafka.ts"

const app = path.join(import.meta.dirname, "..", "transformer", "apps", "stalling-copy.ts")

/** Runs the copier as its own process (Runner.runMain); resolves with its exit code. */
const runApp = (env: Record<string, string>, signalAfter?: number) =>
  Effect.async<number | null>((resume) => {
    const child = spawn(process.execPath, ["--import", "tsx", app], {
      env: { ...process.env, ...env },
      stdio: "ignore"
    })
    const timer = signalAfter === undefined ? undefined : setTimeout(() => child.kill("SIGTERM"), signalAfter)
    child.on("exit", (code) => {
      if (timer !== undefined) clearTimeout(timer)
      resume(Effect.succeed(code))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("SIGTERM", () => {
  it.scopedLive("during load: the process exits 0, finished work is committed, nothing is duplicated after a restart", () =>
    Effect.gen(function*() {
      const input = unique("term-in")
      const output = unique("term-out")
      const applicationId = unique("term-app")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const stallFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "skein-term-")), "never-stall")
      fs.writeFileSync(stallFile, "taken")
      const env = { INPUT: input, OUTPUT: output, APPLICATION_ID: applicationId, BROKERS: brokers().join(","), STALL_FILE: stallFile, STALL_MS: "0" }
      const total = 4000
      const driver = yield* Effect.fork(Effect.gen(function*() {
        for (let start = 0; start < total; start += 200) {
          yield* produce(input, Array.from({ length: 200 }, (_, i) => ({ key: `k${(start + i) % 40}`, value: `v${start + i}` })))
          yield* sleep(300)
        }
      }))
      // Stopped with SIGTERM while records flow.
      const code = yield* runApp(env, 5000)
      assert.strictEqual(code, 0, "SIGTERM ends the run with exit code 0")
      const endsAtStop = yield* offsets(input)
      const afterStop = yield* readCommitted(output)
      yield* Fiber.join(driver)
      const restarted = yield* Effect.fork(runApp(env))
      yield* caughtUp(applicationId, input, 120_000)
      yield* Fiber.interrupt(restarted)
      const records = yield* readCommitted(output)
      const values = records.map((r) => r.value ?? "")
      assert.isAbove(afterStop.length, 0, "work finished before SIGTERM was committed")
      assert.isBelow(afterStop.length, endsAtStop.reduce((n, e) => n + e.lastStable, 0) + 1)
      assert.isBelow(afterStop.length, total, "the SIGTERM landed while records were flowing")
      assert.strictEqual(new Set(values).size, total, "nothing lost")
      assert.strictEqual(values.length, total, "nothing duplicated after the restart")
    }), 240_000)
})
