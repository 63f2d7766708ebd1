/**
 * The stateful aggregate under SIGKILLs, bounces and a zombie, on the run's
 * broker: the chaos harness's aggregate app alone, bounded to a minute of
 * driving. The compatibility run (`npm run test:compat`) runs it on Kafka
 * 3.9.2; the default run covers the same app, longer and on three runtimes,
 * in test/chaos.test.ts, so the default config leaves test/compat/ out.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { inject } from "vitest"
import { abortedTransactions, assertAllPass, runCli } from "../helpers/chaos.ts"

declare module "vitest" {
  export interface ProvidedContext {
    kafkaBrokers: string
  }
}

describe("aggregate under kills", () => {
  it.live("state and outputs exactly once under SIGKILLs, bounces and a zombie", () =>
    Effect.gen(function*() {
      const records = 3000
      const run = yield* runCli(
        [
          "--app",
          "aggregate",
          "--instances",
          "2",
          "--kills",
          "5",
          "--bounces",
          "2",
          "--pauses",
          "1",
          "--records",
          String(records),
          "--rate",
          "50"
        ],
        { KAFKA_BROKERS: process.env["KAFKA_BROKERS"] ?? inject("kafkaBrokers") }
      )
      const [line] = assertAllPass(run, records, ["aggregate"])
      assert.strictEqual(line?.kills, 5)
      assert.strictEqual(line?.bounces, 2)
      // Some SIGKILL landed inside an open transaction: the new owner's fencing aborted it.
      assert.isAbove(abortedTransactions(run.output), 0, run.output)
    }), 5 * 60_000)
})
