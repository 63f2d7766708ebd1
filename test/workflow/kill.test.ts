/**
 * A durable workflow under SIGKILL at the worst moments (test/apps/workflow.ts): the
 * process kills itself once per order at a point, the harness restarts it until every
 * order's output is there, and the steps' own log says what ran how often.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { brokers, createTopics, listTopics, produce, readCommitted, unique } from "../helpers/kafka.ts"

const app = path.join(import.meta.dirname, "..", "apps", "workflow.ts")

const orders = [
  { order: "o1", placed: "2026-11-30T10:00:00.000Z", quantity: "3" },
  { order: "o2", placed: "2026-12-01T08:30:00.000Z", quantity: "21" }
]
/** What step 3 computes from the decoded payload: the Date back to ISO, the number doubled. */
const expected = orders.map((o) => `${o.order}:${o.placed}/${Number(o.quantity) * 2}`).sort()

/** Runs the app until it exits; resolves with how (a SIGKILL it gave itself, or an exit code). */
const runOnce = (env: Record<string, string>, done: () => Promise<boolean>) =>
  Effect.async<string>((resume) => {
    const child = spawn(process.execPath, ["--import", "tsx", app], { env: { ...process.env, ...env }, stdio: "ignore" })
    const timer = setInterval(() => {
      void done().then((finished) => {
        if (finished) child.kill("SIGTERM")
      })
    }, 1000)
    child.on("exit", (code, signal) => {
      clearInterval(timer)
      resume(Effect.succeed(signal ?? `exit ${code}`))
    })
    return Effect.sync(() => {
      clearInterval(timer)
      child.kill("SIGKILL")
    })
  })

const scenario = (kill: string, durable: boolean, processingGuarantee: "exactly-once" | "at-least-once" = "exactly-once") =>
  Effect.gen(function*() {
    const input = unique("wf-in")
    const output = unique("wf-out")
    const applicationId = unique("wf-app")
    yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
    yield* produce(input, orders.map((o) => ({ key: o.order, value: JSON.stringify(o) })))
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-wf-"))
    const log = path.join(dir, "steps.log")
    fs.writeFileSync(log, "")
    const env = {
      SKEIN_APPLICATION_ID: applicationId,
      // A SIGKILLed member leaves the group when its session expires: the broker's minimum.
      SKEIN_SESSION_TIMEOUT: "6 seconds",
      KAFKA_BROKERS: brokers().join(","),
      CHAOS_INPUT_TOPIC: input,
      CHAOS_OUTPUT_TOPIC: output,
      SKEIN_STATE_DIR: path.join(dir, "state"),
      WORKFLOW_LOG: log,
      WORKFLOW_KILL: kill,
      WORKFLOW_DURABLE: String(durable),
      SKEIN_PROCESSING_GUARANTEE: processingGuarantee
    }
    const done = () => Effect.runPromise(readCommitted(output)).then((records) => records.length >= orders.length)
    const endings: Array<string> = []
    for (let run = 0; run < 6; run++) {
      const ending = yield* runOnce(env, done)
      endings.push(ending)
      if (ending !== "SIGKILL") break
    }
    const lines = fs.readFileSync(log, "utf8").trim().split("\n")
    const count = (what: string, order: string) => lines.filter((line) => line === `${what} ${order}`).length
    const outputs = (yield* readCommitted(output)).map((r) => r.value ?? "").sort()
    const runStoreExists = (yield* listTopics).includes(`${applicationId}-orders-runs`)
    return { endings, lines, count, outputs, runStoreExists }
  })

// The scenarios are independent (own topics, group, state and log) and mostly wait for the
// broker: they run concurrently.
describe.concurrent("durable workflow under SIGKILL", () => {
  it.scopedLive("killed between step 2 and step 3: steps 1-2 never run again, step 3 runs once, output exactly once", () =>
    Effect.gen(function*() {
      const run = yield* scenario("between-2-3", true)
      assert.deepStrictEqual(run.endings, ["SIGKILL", "SIGKILL", "exit 0"], run.lines.join("\n"))
      assert.isTrue(run.runStoreExists)
      for (const { order } of orders) {
        assert.strictEqual(run.count("kill between-2-3", order), 1)
        assert.strictEqual(run.count("step1", order), 1, `step1 of ${order}:\n${run.lines.join("\n")}`)
        assert.strictEqual(run.count("step2", order), 1, `step2 of ${order}`)
        assert.strictEqual(run.count("step3", order), 1, `step3 of ${order}`)
        assert.strictEqual(run.count("body", order), 2, "the body re-runs on resume; its activities do not")
      }
      assert.deepStrictEqual(run.outputs, expected, "each output once, read_committed, from the decoded Date and number")
    }), { timeout: 120_000 })

  it.scopedLive("killed inside step 3 before its result is stored: step 3 runs at most twice, steps 1-2 once", () =>
    Effect.gen(function*() {
      const run = yield* scenario("in-3", true)
      assert.deepStrictEqual(run.endings, ["SIGKILL", "SIGKILL", "exit 0"], run.lines.join("\n"))
      for (const { order } of orders) {
        assert.strictEqual(run.count("step1", order), 1, `step1 of ${order}:\n${run.lines.join("\n")}`)
        assert.strictEqual(run.count("step2", order), 1)
        assert.strictEqual(run.count("step3", order), 2)
      }
      assert.deepStrictEqual(run.outputs, expected)
    }), { timeout: 120_000 })

  it.scopedLive("killed after the run completed, before its batch committed: nothing runs again, output exactly once", () =>
    Effect.gen(function*() {
      const run = yield* scenario("after-complete", true)
      assert.deepStrictEqual(run.endings, ["SIGKILL", "SIGKILL", "exit 0"], run.lines.join("\n"))
      for (const { order } of orders) {
        assert.strictEqual(run.count("kill after-complete", order), 1)
        assert.strictEqual(run.count("body", order), 1, `the completed run is read back, not re-run:\n${run.lines.join("\n")}`)
        for (const step of ["step1", "step2", "step3"]) assert.strictEqual(run.count(step, order), 1)
      }
      assert.deepStrictEqual(run.outputs, expected)
    }), { timeout: 120_000 })

  it.scopedLive("at-least-once delivery, killed between step 2 and step 3: steps never run again; each output at least once, one value", () =>
    Effect.gen(function*() {
      const run = yield* scenario("between-2-3", true, "at-least-once")
      assert.deepStrictEqual(run.endings, ["SIGKILL", "SIGKILL", "exit 0"], run.lines.join("\n"))
      for (const { order } of orders) {
        for (const step of ["step1", "step2", "step3"]) assert.strictEqual(run.count(step, order), 1, `${step} of ${order}`)
      }
      // Produced, then offsets committed: a kill between them re-produces, always the stored result.
      assert.deepStrictEqual([...new Set(run.outputs)].sort(), expected)
      assert.isAtLeast(run.outputs.length, orders.length)
    }), { timeout: 120_000 })

  it.scopedLive("durable: false keeps no run store: after a SIGKILL every step runs again", () =>
    Effect.gen(function*() {
      const run = yield* scenario("between-2-3", false)
      assert.deepStrictEqual(run.endings, ["SIGKILL", "SIGKILL", "exit 0"], run.lines.join("\n"))
      assert.isFalse(run.runStoreExists, "no run store topic")
      // Each order was interrupted once (and o1 again when o2's kill aborted their shared batch).
      for (const { order } of orders) {
        assert.isAtLeast(run.count("step1", order), 2, `step1 of ${order}:\n${run.lines.join("\n")}`)
        assert.isAtLeast(run.count("step2", order), 2)
        assert.isAtLeast(run.count("step3", order), 1)
      }
      assert.deepStrictEqual(run.outputs, expected, "the output is still exactly once: outputs and offsets commit together")
    }), { timeout: 120_000 })
})
