/**
 * The bounded chaos run of `test/chaos.test.ts` under random seeds: a new
 * fault schedule (which instance is killed, bounced or paused, and when) each
 * run, where the default suite replays a fixed one. `SKEIN_SOAK_BOUND` runs
 * (default 1, what CI runs); each test's name carries its seed, so a failure
 * is replayed with `npm run chaos -- <the same options> --seed <seed>`.
 *
 * Whatever the seed, one SIGKILL lands inside an open transaction by event
 * (`--txn-kills 1`) and its abort is required; the random SIGKILLs land
 * inside one only by chance, and the verifier's count of aborted
 * transactions is printed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { inject } from "vitest"
import { abortedTransactions, assertAllPass, runCli, singleBrokerChaosApps, singleBrokerChaosArgs } from "../helpers/chaos.ts"

declare module "vitest" {
  export interface ProvidedContext {
    kafkaBrokers: string
  }
}

const boundText = process.env["SKEIN_SOAK_BOUND"] ?? "1"
const bound = Number(boundText)
if (!Number.isInteger(bound) || bound < 1) {
  throw new Error(`SKEIN_SOAK_BOUND must be an integer of at least 1 (how many random seeds to run), got ${JSON.stringify(boundText)}`)
}
const seeds = Array.from({ length: bound }, () => Math.floor(Math.random() * 1_000_000))

describe("chaos under random seeds", () => {
  for (const seed of seeds) {
    it.live(`exactly once under SIGKILLs, bounces and zombies, seed ${seed}`, () =>
      Effect.gen(function*() {
        const records = 5000
        const run = yield* runCli(
          singleBrokerChaosArgs(records, seed),
          { KAFKA_BROKERS: process.env["KAFKA_BROKERS"] ?? inject("kafkaBrokers") }
        )
        const lines = assertAllPass(run, records, singleBrokerChaosApps)
        assert.strictEqual(lines.reduce((n, l) => n + l.kills, 0), 8)
        assert.strictEqual(lines.reduce((n, l) => n + l.bounces, 0), 4)
        assert.include(run.output, "1/1 kills inside an open transaction ended in its abort", run.output.slice(-4000))
        yield* Effect.sync(() => console.log(`seed ${seed}: ${abortedTransactions(run.output)} aborted transactions`))
      }), 6 * 60_000)
  }
})
