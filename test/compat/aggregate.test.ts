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
import { assertAllPass, runCli } from "../helpers/chaos.ts"

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
      assertAllPass(run, records, ["aggregate"])
      // The faults hit working instances: some SIGKILL took tasks (and their stores) down,
      // so another instance restored their state from the changelog.
      const hits = /(\d+)\/(\d+) kills hit an instance holding tasks/.exec(run.output)
      assert.isAbove(Number(hits?.[1] ?? 0), 0, run.output)
      // Not asserted: that a SIGKILL landed inside an open transaction (test/chaos.test.ts
      // does, with three apps). With one app and two instances it is chance on either
      // version: no abort marker at all in 3 of 9 runs on Kafka 3.9.2 and 2 of 4 on 4.4.0,
      // same seeds included. restore.test.ts, also in the compatibility run, has fencing
      // abort open transactions deterministically.
    }), 5 * 60_000)
})
