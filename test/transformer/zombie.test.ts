import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { spawnApp } from "../helpers/appProcess.ts"
import { brokers, caughtUp, createTopics, describeGroup, eventually, produce, readCommitted, unique } from "../helpers/kafka.ts"

const app = path.join(import.meta.dirname, "apps", "stalling-copy.ts")

// EosIntegrationTest "zombie": an instance stalls past the session timeout, its
// partition moves, and when it wakes its commit is fenced. Each step waits for its event: the
// stall ends once the new owner has committed past the stalling record, not after a fixed time.
describe("zombie instance", () => {
  it.scopedLive("a stalled instance's partition moves; its late commit is fenced; output exactly once", () =>
    Effect.gen(function*() {
      const input = unique("zombie-in")
      const output = unique("zombie-out")
      const applicationId = unique("zombie-app")
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-zombie-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      const stallFile = path.join(dir, "stalled")
      const releaseFile = path.join(dir, "release")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const env = {
        INPUT: input,
        OUTPUT: output,
        APPLICATION_ID: applicationId,
        BROKERS: brokers().join(","),
        STALL_FILE: stallFile,
        RELEASE_FILE: releaseFile,
        // Only a guard: the stall ends when the test writes RELEASE_FILE.
        STALL_MS: "240000"
      }
      const apps = [yield* spawnApp(app, env), yield* spawnApp(app, env)]
      const log = () => apps.map((a, i) => `\n--- app ${i} ---\n${a.output()}`).join("")
      const first = Array.from({ length: 30 }, (_, i) => ({ key: `k${i}`, value: `a${i}`, partition: i % 2 }))
      yield* produce(input, first)
      // Both instances in the group, one partition each, the first records committed.
      yield* eventually(
        Effect.map(describeGroup(applicationId), (g) => g.state === "Stable" && g.members.length === 2),
        { what: "both instances to join", timeout: 120_000 }
      )
      yield* caughtUp(applicationId, input, 120_000)
      // The stalling record and 29 more, on both partitions.
      const second = Array.from({ length: 30 }, (_, i) => ({
        key: `k${i}`,
        value: i === 0 ? "stall" : `b${i}`,
        partition: i % 2
      }))
      yield* produce(input, second)
      yield* eventually(Effect.sync(() => log().includes("stalling")), { what: "an instance to stall" })
      // The stalled instance cannot commit: the group is caught up once the other instance owns
      // the stalled partition (after the session timeout) and has committed past the record.
      yield* caughtUp(applicationId, input, 180_000)
      assert.notInclude(log(), "woke", `the stalled instance woke before its partition moved${log()}`)
      // Wake the zombie; its late commit must be fenced.
      fs.writeFileSync(releaseFile, "wake")
      yield* eventually(Effect.sync(() => log().includes("fenced by a newer owner")), {
        what: "the woken instance's commit to be fenced",
        timeout: 120_000
      })
      const values = (yield* readCommitted(output)).map((r) => r.value ?? "")
      const expected = [...first, ...second].map((r) => r.value)
      assert.include(log(), "woke", "the stalled instance woke up")
      assert.notInclude(log(), "STALL_MS ran out", "woken by the test's event")
      assert.strictEqual(values.length, expected.length, "60 records in, 60 out")
      assert.deepStrictEqual([...values].sort(), [...expected].sort())
    }), 420_000)
})
