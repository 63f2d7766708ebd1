/**
 * examples/agent.ts as a user runs it. Without OPENAI_API_KEY it says what to set and exits 0
 * without contacting anything. With a key it runs end to end through `@effect/ai-openai`'s
 * real layers, here against a local stand-in for OpenAI's Responses API (OPENAI_API_URL), so
 * that the requests the provider builds from the agent's rebuilt prompts are checked too.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { execFile } from "node:child_process"
import * as http from "node:http"
import * as path from "node:path"
import { brokers } from "../helpers/kafka.ts"

const root = path.join(import.meta.dirname, "..", "..")

/** What the test reads of a Responses API request (other fields are ignored). */
const RequestBody = Schema.parseJson(Schema.Struct({
  input: Schema.optional(Schema.Array(Schema.Struct({ type: Schema.optional(Schema.String), output: Schema.optional(Schema.Unknown) }))),
  tools: Schema.optional(Schema.Array(Schema.Struct({ name: Schema.optional(Schema.String) })))
}))

interface Request {
  readonly authorization: string
  readonly body: typeof RequestBody.Type
}

/**
 * A stand-in for `POST /v1/responses`: a first call (no tool output in its input) asks for
 * OrderStatus of the order named in the prompt; a call with the tool's output answers with it.
 */
const fakeOpenAi = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly requests: Array<Request>; readonly server: http.Server }>((resume) => {
    const requests: Array<Request> = []
    let n = 0
    const server = http.createServer((req, res) => {
      let text = ""
      req.on("data", (chunk: Buffer) => {
        text += chunk.toString("utf8")
      })
      req.on("end", () => {
        n++
        const body = Schema.decodeUnknownSync(RequestBody)(text === "" ? "{}" : text)
        requests.push({ authorization: req.headers.authorization ?? "", body })
        const order = /order (A-\d+)/.exec(text)?.[1] ?? "?"
        const toolOutput = (body.input ?? []).find((item) => item.type === "function_call_output")?.output
        const output = toolOutput === undefined
          ? [{ type: "function_call", id: `fc_${n}`, call_id: `call_${n}`, name: "OrderStatus", arguments: JSON.stringify({ order }), status: "completed" }]
          : [{
            type: "message",
            id: `msg_${n}`,
            role: "assistant",
            status: "completed",
            content: [{ type: "output_text", text: `Order ${order}: ${toolOutput}`, annotations: [] }]
          }]
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({
          id: `resp_${n}`,
          object: "response",
          created_at: Math.floor(Date.now() / 1000),
          status: "completed",
          error: null,
          incomplete_details: null,
          instructions: null,
          model: "gpt-4o-mini",
          tools: [],
          tool_choice: "auto",
          parallel_tool_calls: true,
          metadata: null,
          temperature: null,
          top_p: null,
          output
        }))
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resume(Effect.succeed({ url: `http://127.0.0.1:${port}/v1`, requests, server }))
    })
  }),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.close(() => resume(Effect.void))
    })
)

/** Runs the example with `env` (OPENAI_API_KEY removed first); resolves with its exit code and output. */
const runExample = (env: Record<string, string>) =>
  Effect.async<{ readonly code: number; readonly stdout: string; readonly stderr: string }>((resume) => {
    const { OPENAI_API_KEY: _key, ...inherited } = process.env
    execFile(process.execPath, ["--import", "tsx", "examples/agent.ts"], {
      cwd: root,
      env: { ...inherited, ...env },
      timeout: 120_000
    }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1
      resume(Effect.succeed({ code, stdout, stderr }))
    })
  })

describe("agent example", () => {
  it.scopedLive("without OPENAI_API_KEY: says what to set and exits 0, contacting neither OpenAI nor Kafka", () =>
    Effect.gen(function*() {
      const openAi = yield* fakeOpenAi
      // Nothing listens on port 9: any Kafka connection attempt would fail the run.
      const run = yield* runExample({ KAFKA_BROKERS: "127.0.0.1:9", OPENAI_API_URL: openAi.url })
      assert.strictEqual(run.code, 0, run.stderr)
      assert.include(run.stdout, "needs an API key: set OPENAI_API_KEY")
      assert.include(run.stdout, "OPENAI_API_KEY=... npm run example:agent")
      assert.include(run.stdout, "Skipped: no broker was started and nothing was contacted")
      assert.strictEqual(openAi.requests.length, 0)
    }), 150_000)

  it.scopedLive("with a key: the agent answers every question through @effect/ai-openai, two LLM calls and one tool call each", () =>
    Effect.gen(function*() {
      const openAi = yield* fakeOpenAi
      const run = yield* runExample({
        KAFKA_BROKERS: brokers().join(","),
        OPENAI_API_KEY: "sk-test-key",
        OPENAI_API_URL: openAi.url
      })
      assert.strictEqual(run.code, 0, `${run.stdout}\n${run.stderr}`)
      assert.include(run.stdout, "read back 3 committed answers")
      assert.include(run.stdout, `Order A-1001: {"status":"shipped","carrier":"DHL","eta":"2026-12-04"}`)
      assert.include(run.stdout, `Order A-1002: {"status":"packing","carrier":"UPS","eta":"2026-12-06"}`)
      assert.include(run.stdout, `Order A-9999: {"error":"no order A-9999"}`, "a failureMode \"return\" failure reached the model")
      assert.strictEqual((run.stdout.match(/\(2 LLM turns, 1 tool call\)/g) ?? []).length, 3)
      assert.strictEqual(openAi.requests.length, 6, "two LLM calls per question")
      assert.isTrue(openAi.requests.every((r) => r.authorization === "Bearer sk-test-key"))
      assert.deepStrictEqual(openAi.requests[0]?.body.tools?.map((t) => t.name), ["OrderStatus"])
      const withToolOutput = openAi.requests.filter((r) => (r.body.input ?? []).some((i) => i.type === "function_call_output"))
      assert.strictEqual(withToolOutput.length, 3, "each second call carries the stored tool result")
      assert.notInclude(run.stdout + run.stderr, "sk-test-key", "the key is never printed")
    }), 150_000)
})
