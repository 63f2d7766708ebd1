/**
 * kafkajs 2.2.4's request queue armed a timer after every response, computed
 * from `throttledUntil` even when no throttle was ever set (-1): a timeout of
 * about minus the current epoch. Node 20 clamps it silently; Bun and Deno
 * print `TimeoutNegativeWarning: -1796114343960 is a negative number` on
 * stderr (seen in every Skein process under those runtimes). The timer then
 * re-armed itself from every check: a 1 ms timer loop per idle connection.
 *
 * The fix (patches/kafkajs+2.2.4.patch, applied by scripts/patch-kafkajs.mjs
 * at install) schedules a check only when a request is pending.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import * as path from "node:path"
import { brokers } from "./helpers/kafka.ts"

const root = path.join(import.meta.dirname, "..")
const script = path.join(import.meta.dirname, "apps", "kafkajs-admin.ts")
const bin = (name: string) => path.join(root, "node_modules", ".bin", name)

const run = (command: string, args: ReadonlyArray<string>) =>
  Effect.async<{ readonly stdout: string; readonly stderr: string }, Error>((resume) => {
    execFile(command, [...args], {
      cwd: root,
      env: { ...process.env, BROKERS: brokers().join(",") },
      timeout: 60_000
    }, (error, stdout, stderr) => {
      if (error) resume(Effect.fail(new Error(`${command} failed: ${error.message}\n${stdout}\n${stderr}`)))
      else resume(Effect.succeed({ stdout, stderr }))
    })
  })

describe.concurrent("kafkajs timers", () => {
  const runtimes: ReadonlyArray<readonly [string, string, ReadonlyArray<string>]> = [
    ["bun", bin("bun"), [script]],
    ["deno", bin("deno"), ["run", "-A", script]]
  ]
  for (const [name, command, args] of runtimes) {
    it.live(`under ${name}, requests set no timer from an unset throttle deadline (no TimeoutNegativeWarning)`, () =>
      Effect.gen(function*() {
        const { stdout, stderr } = yield* run(command, args)
        assert.include(stdout, "done")
        assert.notInclude(stderr, "TimeoutNegativeWarning", stderr)
        assert.notInclude(stderr, "is a negative number", stderr)
      }), 90_000)
  }
})
