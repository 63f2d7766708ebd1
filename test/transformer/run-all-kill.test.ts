/**
 * Two transformers in one process (`Runner.runAll`: split lines, count words), SIGKILLed
 * three times while lines flow and restarted each time: the process resumes both from their
 * commits, the count's state restored, and every word is counted exactly once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { brokers, caughtUp, createTopics, eventually, produce, readCommitted, sleep, unique } from "../helpers/kafka.ts"

const app = path.join(import.meta.dirname, "apps", "split-and-count.ts")

const start = (env: Record<string, string>) => {
  const child = spawn(process.execPath, ["--import", "tsx", app], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] })
  let output = ""
  child.stdout.on("data", (chunk) => (output += String(chunk)))
  child.stderr.on("data", (chunk) => (output += String(chunk)))
  const exited = new Promise<string>((resolve) => child.on("exit", (code, signal) => resolve(signal ?? `exit ${code}`)))
  return { child, exited: Effect.promise(() => exited), output: () => output }
}

describe("Runner.runAll under SIGKILL", () => {
  it.scopedLive("a killed-and-restarted process resumes both transformers: every word counted exactly once", () =>
    Effect.gen(function*() {
      const [lines, words, counts] = [unique("ra-lines"), unique("ra-words"), unique("ra-counts")]
      const applicationId = unique("ra-app")
      yield* createTopics([lines, words, counts].map((name) => ({ name, partitions: 2 })))
      const env = {
        SKEIN_APPLICATION_ID: applicationId,
        // A SIGKILLed member leaves the group when its session expires: the broker's minimum.
        SKEIN_SESSION_TIMEOUT: "6 seconds",
        KAFKA_BROKERS: brokers().join(","),
        SKEIN_STATE_DIR: fs.mkdtempSync(path.join(os.tmpdir(), "skein-run-all-kill-")),
        LINES: lines,
        WORDS: words,
        COUNTS: counts
      }
      const rounds = 60
      const perRound = 20
      const line = (i: number) => `w${i % 10} w${(i * 3 + 1) % 10}`
      const producer = yield* Effect.fork(Effect.gen(function*() {
        for (let round = 0; round < rounds; round++) {
          yield* produce(lines, Array.from({ length: perRound }, (_, j) => {
            const i = round * perRound + j
            return { key: `l${i}`, value: line(i), partition: i % 2 }
          }))
          yield* sleep(150)
        }
      }))
      const endings: Array<string> = []
      let committed = 0
      for (let kill = 0; kill < 3; kill++) {
        const running = start(env)
        // Killed mid-stream: once this process has committed counts of its own.
        const before = committed
        yield* eventually(Effect.map(readCommitted(counts), (records) => (committed = records.length) > before), {
          what: "the restarted process to commit counts"
        })
        yield* sleep(300)
        running.child.kill("SIGKILL")
        endings.push(yield* running.exited)
      }
      yield* Fiber.join(producer)
      const last = start(env)
      // Its count task restored (so it is up, and SIGTERM is a graceful stop), then caught up.
      yield* eventually(Effect.sync(() => /restored \d+ changelog records/.test(last.output())), { what: "the last process to start its tasks" })
      yield* caughtUp(`${applicationId}-split`, lines)
      yield* caughtUp(`${applicationId}-count`, words)
      last.child.kill("SIGTERM")
      endings.push(yield* last.exited)
      assert.deepStrictEqual(endings, ["SIGKILL", "SIGKILL", "SIGKILL", "exit 0"], last.output().slice(-3000))

      const expected = new Map<string, number>()
      for (let i = 0; i < rounds * perRound; i++) {
        for (const word of line(i).split(" ")) expected.set(word, (expected.get(word) ?? 0) + 1)
      }
      const seen = new Map<string, Array<number>>()
      for (const record of yield* readCommitted(counts)) {
        seen.set(record.key ?? "", [...(seen.get(record.key ?? "") ?? []), Number(record.value)])
      }
      for (const [word, n] of expected) {
        const sequence = seen.get(word) ?? []
        assert.deepStrictEqual(sequence, Array.from({ length: n }, (_, i) => i + 1), `${word}: counted 1..${n}, each once, in order`)
      }
      assert.strictEqual(seen.size, expected.size)
    }), { timeout: 180_000 })
})
