/**
 * A durable agent under SIGKILL (test/apps/agent.ts, a scripted model): the process kills
 * itself once per order at a point, the harness restarts it until every order's answer is
 * there, and the model's and the tool's own log says what ran how often.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { brokers, createTopics, produce, readCommitted, unique } from "../helpers/kafka.ts"
import { readLines } from "../helpers/scriptedModel.ts"

const app = path.join(import.meta.dirname, "..", "apps", "agent.ts")

const orders = [
  { order: "o1", quantity: "3" },
  { order: "o2", quantity: "21" }
]

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

const scenario = (kill: string) =>
  Effect.gen(function*() {
    const input = unique("agent-in")
    const output = unique("agent-out")
    const applicationId = unique("agent-app")
    yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
    yield* produce(input, orders.map((o) => ({ key: o.order, value: JSON.stringify(o) })))
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-agent-"))
    const log = path.join(dir, "calls.log")
    fs.writeFileSync(log, "")
    const env = {
      SKEIN_APPLICATION_ID: applicationId,
      // A SIGKILLed member leaves the group when its session expires: the broker's minimum.
      SKEIN_SESSION_TIMEOUT: "6 seconds",
      KAFKA_BROKERS: brokers().join(","),
      CHAOS_INPUT_TOPIC: input,
      CHAOS_OUTPUT_TOPIC: output,
      SKEIN_STATE_DIR: path.join(dir, "state"),
      AGENT_LOG: log,
      AGENT_KILL: kill
    }
    const done = () => Effect.runPromise(readCommitted(output)).then((records) => records.length >= orders.length)
    const endings: Array<string> = []
    for (let run = 0; run < 6; run++) {
      const ending = yield* runOnce(env, done)
      endings.push(ending)
      if (ending !== "SIGKILL") break
    }
    const lines = readLines(log)
    const count = (line: string) => lines.filter((l) => l === line).length
    const matching = (prefix: string) => lines.filter((l) => l.startsWith(prefix))
    const outputs = (yield* readCommitted(output)).map((r) => `${r.key}=${r.value ?? ""}`).sort()
    /** The answer each order must get: from the one tool result, with the pid of the process that ran it. */
    const expected = orders.map((o) => {
      const [tool] = matching(`tool ${o.order} `)
      const pid = Number(tool?.split(" ")[2])
      return `${o.order}=${o.order}: {"reserved":${Number(o.quantity)},"pid":${pid}} turns=2 tools=1`
    }).sort()
    return { endings, lines, count, matching, outputs, expected }
  })

// Independent scenarios (own topics, group, state and logs): they run concurrently.
describe.concurrent("durable agent under SIGKILL", () => {
  it.scopedLive("12a: killed after a tool call was stored, before the next LLM call: only that call is made on restart; the tool ran once; the answer exactly once", () =>
    Effect.gen(function*() {
      const run = yield* scenario("before-turn-2")
      const log = run.lines.join("\n")
      assert.deepStrictEqual(run.endings, ["SIGKILL", "SIGKILL", "exit 0"], log)
      for (const { order } of orders) {
        assert.strictEqual(run.count(`kill before-turn-2 ${order}`), 1, log)
        assert.strictEqual(run.count(`llm ${order} turn-1`), 1, `turn 1 of ${order} is not called again:\n${log}`)
        assert.strictEqual(run.count(`llm ${order} turn-2`), 1, `turn 2 of ${order} is called once, after the restart:\n${log}`)
        assert.strictEqual(run.matching(`tool ${order} `).length, 1, `the tool of ${order} ran once in total:\n${log}`)
        const prompts = run.matching(`prompt ${order} turn-2 `)
        assert.strictEqual(prompts.length, 2, "turn 2's call arrived before the kill and after the restart")
        assert.strictEqual(prompts[1], prompts[0], "the restarted run rebuilt the same prompt from the stored turn and tool result")
      }
      assert.strictEqual(run.matching("llm ").length, 4, "two LLM calls per order, no more")
      assert.deepStrictEqual(run.outputs, run.expected, "each answer once, read_committed, from the one tool result")
    }), { timeout: 120_000 })

  it.scopedLive("12b: killed after the run completed, before its batch committed: the redelivery makes no LLM call and no tool call", () =>
    Effect.gen(function*() {
      const run = yield* scenario("after-complete")
      const log = run.lines.join("\n")
      assert.deepStrictEqual(run.endings, ["SIGKILL", "SIGKILL", "exit 0"], log)
      for (const { order } of orders) {
        assert.strictEqual(run.count(`kill after-complete ${order}`), 1, log)
        assert.strictEqual(run.count(`llm ${order} turn-1`), 1, `the completed run of ${order} is read back, not re-run:\n${log}`)
        assert.strictEqual(run.count(`llm ${order} turn-2`), 1, log)
        assert.strictEqual(run.matching(`prompt ${order} `).length, 2, "no call even arrives at the model on redelivery")
        assert.strictEqual(run.matching(`tool ${order} `).length, 1, log)
      }
      assert.deepStrictEqual(run.outputs, run.expected, "each answer once, read_committed")
    }), { timeout: 120_000 })
})
