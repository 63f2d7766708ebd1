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

// The record-metadata example: Protobuf codecs, binary and repeated headers, partitions, timestamps.
describe("record-metadata example", () => {
  it.live("keeps headers byte for byte, sets partitions, carries timestamps, dead-letters a missing partition", () =>
    Effect.gen(function*() {
      const stdout = yield* runExample(process.execPath, ["--import", "tsx", "examples/record-metadata.ts"])
      assert.include(stdout, "o1 1250 partition=0 timestamp=order's trace=0001,fffe,beef source=web")
      assert.include(stdout, "o2 99 partition=2 timestamp=order's trace=0001,fffe,beef source=web")
      assert.include(stdout, "o3 4000 partition=1 timestamp=order's trace=0001,fffe,beef source=web")
      assert.include(stdout, "dead letters (1):")
      assert.include(stdout, "o4: PartitionOutOfRange: An output for")
      assert.include(stdout, "names partition 9, but the topic has 3 (0 to 2)")
    }), 150_000)
})

// The workflow example: a durable @effect/workflow workflow as a Kafka handler.
describe("workflow example", () => {
  it.live("ships each order once; the retried charge does not re-run the reservation; failures are dead-lettered", () =>
    Effect.gen(function*() {
      const stdout = yield* runExample(process.execPath, ["--import", "tsx", "examples/workflow.ts"])
      assert.include(stdout, `o1: "stock-kettle paid-o1 courier-2"`)
      assert.include(stdout, `o2: "stock-lamp paid-o2 courier-3"`)
      assert.match(stdout, /reserve o1\s+1\n/)
      assert.match(stdout, /charge o1\s+2\n/)
      assert.match(stdout, /book-courier o1\s+1\n/)
      assert.include(stdout, "dead letters (2):")
      assert.match(stdout, /o3: OutOfStock/)
      assert.match(stdout, /o4: Cannot decode the value/)
    }), 150_000)
})
