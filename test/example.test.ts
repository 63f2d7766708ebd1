import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import * as path from "node:path"
import { brokers } from "./helpers/kafka.ts"

const root = path.join(import.meta.dirname, "..")
const bin = (name: string) => path.join(root, "node_modules", ".bin", name)

const runExample = (command: string, args: ReadonlyArray<string>) =>
  Effect.async<string, Error>((resume) => {
    execFile(command, [...args], {
      cwd: root,
      env: { ...process.env, KAFKA_BROKERS: brokers().join(",") },
      timeout: 120_000
    }, (error, stdout, stderr) => {
      if (error) resume(Effect.fail(new Error(`${command} failed: ${error.message}\n${stdout}\n${stderr}`)))
      else resume(Effect.succeed(stdout))
    })
  })

// The word-count example, end to end, on each runtime Skein supports.
describe("word-count example", () => {
  const runtimes: ReadonlyArray<readonly [string, string, ReadonlyArray<string>]> = [
    ["node", process.execPath, ["--import", "tsx", "examples/word-count.ts"]],
    ["bun", bin("bun"), ["examples/word-count.ts"]],
    ["deno", bin("deno"), ["run", "-A", "examples/word-count.ts"]]
  ]
  for (const [name, command, args] of runtimes) {
    it.live(`runs on ${name} and prints the counts it read back`, () =>
      Effect.gen(function*() {
        const stdout = yield* runExample(command, args)
        assert.include(stdout, "read back 20 committed records")
        assert.match(stdout, /the\s+4/)
        assert.match(stdout, /fox\s+2/)
        assert.match(stdout, /once\s+2/)
      }), 150_000)
  }
})

// The dead-letters example: a retry rule and a dead letter topic, end to end.
describe("dead-letters example", () => {
  it.live("retries the flaky ledger, dead-letters poison and failing payments, keeps exact balances", () =>
    Effect.gen(function*() {
      const stdout = yield* runExample(process.execPath, ["--import", "tsx", "examples/dead-letters.ts"])
      assert.match(stdout, /alice\s+70/)
      assert.match(stdout, /bob\s+40/)
      assert.match(stdout, /flaky\s+7/)
      assert.notMatch(stdout, /down\s+\d/, "the payment of the down account never reached a balance")
      assert.include(stdout, "ledger attempts for the flaky account's payment: 3")
      assert.include(stdout, "dead letters (3):")
      assert.match(stdout, /p6: LedgerUnavailable/)
      assert.match(stdout, /p3: Cannot decode the value/)
      assert.match(stdout, /p7: Cannot decode the value/)
    }), 150_000)
})
