import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { brokers, caughtUp, createTopics, produce, readCommitted, sleep, unique } from "../helpers/kafka.ts"

const app = path.join(import.meta.dirname, "apps", "stalling-copy.ts")

const spawnApp = (env: Record<string, string>, log: Array<string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(process.execPath, ["--import", "tsx", app], {
        env: { ...process.env, ...env },
        stdio: ["ignore", "pipe", "pipe"]
      })
      child.stdout?.on("data", (d: Buffer) => log.push(d.toString()))
      child.stderr?.on("data", (d: Buffer) => log.push(d.toString()))
      return child
    }),
    (child: ChildProcess) => Effect.sync(() => child.kill("SIGKILL"))
  )

// EosIntegrationTest "zombie": an instance stalls past the session timeout, its
// partition moves, and when it wakes its commit is fenced.
describe("zombie instance", () => {
  it.scopedLive("a stalled instance's partition moves; its late commit is fenced; output exactly once", () =>
    Effect.gen(function*() {
      const input = unique("zombie-in")
      const output = unique("zombie-out")
      const applicationId = unique("zombie-app")
      const stallFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "skein-zombie-")), "stalled")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const env = {
        INPUT: input,
        OUTPUT: output,
        APPLICATION_ID: applicationId,
        BROKERS: brokers().join(","),
        STALL_FILE: stallFile,
        STALL_MS: "14000"
      }
      const log: Array<string> = []
      yield* spawnApp(env, log)
      yield* spawnApp(env, log)
      const first = Array.from({ length: 30 }, (_, i) => ({ key: `k${i}`, value: `a${i}`, partition: i % 2 }))
      yield* produce(input, first)
      yield* sleep(8000)
      // The stalling record and 29 more, on both partitions.
      const second = Array.from({ length: 30 }, (_, i) => ({
        key: `k${i}`,
        value: i === 0 ? "stall" : `b${i}`,
        partition: i % 2
      }))
      yield* produce(input, second)
      yield* caughtUp(applicationId, input, 90_000)
      // Let the zombie wake up and try to commit.
      yield* Effect.promise(async () => {
        const deadline = Date.now() + 30_000
        while (!log.join("").includes("woke") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200))
      })
      yield* sleep(3000)
      const output_ = yield* readCommitted(output)
      const values = output_.map((r) => r.value ?? "")
      const expected = [...first, ...second].map((r) => r.value)
      assert.include(log.join(""), "stalling", "an instance stalled")
      assert.include(log.join(""), "woke", "the stalled instance woke up")
      assert.include(log.join(""), "fenced by a newer owner", "its late commit was fenced")
      assert.strictEqual(values.length, expected.length, "60 records in, 60 out")
      assert.deepStrictEqual([...values].sort(), [...expected].sort())
    }), 300_000)
})
