/**
 * Runs the chaos harness's CLI (`test/chaos/cli.ts`) as a child process and
 * reads its verdict lines, for the bounded chaos runs of the test suites.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..", "..")

export interface CliRun {
  readonly code: number | null
  readonly output: string
}

/** Runs the CLI to its end (interrupting it sends SIGINT); `undefined` removes a variable. */
export const runCli = (args: ReadonlyArray<string>, env: Readonly<Record<string, string | undefined>>) =>
  Effect.async<CliRun>((resume) => {
    const child = ChildProcess.spawn(process.execPath, ["--import", "tsx", "test/chaos/cli.ts", ...args], {
      cwd: root,
      env: Object.fromEntries(
        Object.entries({ ...process.env, ...env }).filter((entry): entry is [string, string] => entry[1] !== undefined)
      ),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (d: Buffer) => {
      output += d.toString("utf8")
    })
    child.stderr.on("data", (d: Buffer) => {
      output += d.toString("utf8")
    })
    child.on("exit", (code) => resume(Effect.succeed({ code, output })))
    return Effect.sync(() => {
      child.kill("SIGINT")
    })
  })

const SUMMARY = /^EOS (\w+): records=(\d+) duplicates=(\d+) lost=(\d+) state_mismatches=(\d+) kills=(\d+) bounces=(\d+) broker_kills=(\d+) -> (PASS|FAIL)$/

/** The `EOS <app>: ...` verdict lines of a run. */
export const summaries = (output: string) =>
  output.split("\n").flatMap((line) => {
    const m = SUMMARY.exec(line.trim())
    return m === null ? [] : [{
      app: m[1] ?? "",
      records: Number(m[2]),
      duplicates: Number(m[3]),
      lost: Number(m[4]),
      stateMismatches: Number(m[5]),
      kills: Number(m[6]),
      bounces: Number(m[7]),
      brokerKills: Number(m[8]),
      verdict: m[9] ?? ""
    }]
  })

/** Sum of the verifier's "N committed and M aborted transactions" lines. */
export const abortedTransactions = (output: string) =>
  [...output.matchAll(/committed and (\d+) aborted transactions/g)].reduce((n, m) => n + Number(m[1]), 0)

/** Asserts that exactly `apps` passed, each with `records` records and no duplicate, loss or wrong state. */
export const assertAllPass = (run: CliRun, records: number, apps: ReadonlyArray<string> = ["echo", "aggregate", "pipeline"]) => {
  const lines = summaries(run.output)
  const context = `exit ${run.code}; output tail:\n${run.output.split("\n").slice(-60).join("\n")}`
  assert.deepStrictEqual(lines.map((l) => l.app), [...apps], context)
  for (const line of lines) {
    assert.strictEqual(line.verdict, "PASS", `${line.app}: ${context}`)
    assert.strictEqual(line.records, records, context)
    assert.strictEqual(line.duplicates + line.lost + line.stateMismatches, 0, context)
  }
  assert.strictEqual(run.code, 0, context)
  return lines
}

/** The apps of `singleBrokerChaosArgs`' run, in the order of their verdict lines. */
export const singleBrokerChaosApps: ReadonlyArray<string> = ["echo", "aggregate", "pipeline", "windowed"]

/**
 * The chaos run of the default suite and of the random-seed soak: every app (the windowed one
 * too) on node, bun and deno, two instances, 8 SIGKILLs (one inside an open transaction, by
 * event), 4 bounces and 2 pauses, `records` records at 50 a second, under `seed`'s fault schedule.
 */
export const singleBrokerChaosArgs = (records: number, seed: number): ReadonlyArray<string> => [
  "--app",
  "all,windowed",
  "--instances",
  "2",
  "--kills",
  "8",
  "--bounces",
  "4",
  "--pauses",
  "2",
  "--records",
  String(records),
  "--rate",
  "50",
  "--runtimes",
  "node,bun,deno",
  "--txn-kills",
  "1",
  "--seed",
  String(seed)
]
