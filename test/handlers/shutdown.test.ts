import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { spawnApp } from "../helpers/appProcess.ts"
import { brokers, caughtUp, createTopics, eventually, groupOffsets, produce, readCommitted, sleep, unique } from "../helpers/kafka.ts"

const app = path.join(import.meta.dirname, "..", "transformer", "apps", "stalling-copy.ts")

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
      const chunk = 200
      let produced = 0
      const produceChunk = Effect.suspend(() => {
        const start = produced
        produced += chunk
        return produce(input, Array.from({ length: chunk }, (_, i) => ({ key: `k${(start + i) % 40}`, value: `v${start + i}` })))
      })
      // Records flow (up to 2,000) until the SIGTERM is sent, and one chunk more comes after it:
      // the stop is mid-stream.
      const signalled = yield* Deferred.make<void>()
      const driver = yield* Effect.fork(Effect.gen(function*() {
        while (!(yield* Deferred.isDone(signalled)) && produced < 2000) {
          yield* produceChunk
          yield* sleep(300)
        }
        yield* Deferred.await(signalled)
        yield* produceChunk
      }))
      const running = yield* spawnApp(app, env)
      const log = () => `\n--- app output ---\n${running.output()}`
      // SIGTERM once the app has committed work (a transaction with its input offsets), not
      // after a fixed time: its start alone (imports, join) takes seconds on a busy machine.
      yield* eventually(
        Effect.map(groupOffsets(applicationId, input), (committed) => [...committed.values()].some((o) => o > 0)),
        { what: "the app's first commit", timeout: 120_000 }
      )
      yield* running.signal("SIGTERM")
      yield* Deferred.succeed(signalled, undefined)
      // A guard against a hang, not a measure.
      const code = yield* running.exited.pipe(Effect.timeout("60 seconds"))
      assert.strictEqual(code, 0, `SIGTERM ends the run with exit code 0${log()}`)
      const afterStop = yield* readCommitted(output)
      const committedAtStop = [...(yield* groupOffsets(applicationId, input)).values()].reduce((n, o) => n + Math.max(0, o), 0)
      yield* Fiber.join(driver)
      const total = produced
      process.stderr.write(`shutdown: ${afterStop.length} of ${total} records committed by the stopped process\n`)
      assert.strictEqual(afterStop.length, committedAtStop, "every output has its input offset committed")
      assert.isAbove(afterStop.length, 0, "work finished before SIGTERM was committed")
      assert.isBelow(afterStop.length, total, "the SIGTERM landed while records were flowing")

      yield* Effect.scoped(Effect.zipRight(spawnApp(app, env), caughtUp(applicationId, input, 120_000)))
      const values = (yield* readCommitted(output)).map((r) => r.value ?? "")
      assert.strictEqual(new Set(values).size, total, "nothing lost")
      assert.strictEqual(values.length, total, "nothing duplicated after the restart")
    }), 300_000)
})
