/**
 * The extractor process is SIGKILLed between a page's fetch and its commit,
 * again and again (test/apps/extractChaos.ts); downstream read_committed must
 * see every item exactly once, in order, and every killed page must be read
 * again by the next instance.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Chaos from "../apps/extractChaos.ts"
import { brokers } from "../utils/broker.ts"

const KILLS = Number(process.env["EXTRACT_KILLS"] ?? "10")

describe("Extractor under SIGKILL", () => {
  it.scopedLive(`every page exactly once after ${KILLS} kills between fetch and commit`, () =>
    Chaos.run({
      brokers: brokers(),
      kills: KILLS,
      instances: 1,
      tokens: 2,
      items: 30,
      pageSize: 2,
      delayBeforeCommitMs: 250,
      log: (line) => {
        if (process.env["EXTRACT_TEST_LOG"] === "1") process.stderr.write(`${new Date().toISOString()} ${line}\n`)
      }
    }).pipe(
      Effect.map((result) => {
        assert.deepStrictEqual(result.notReplayed, [])
        assert.strictEqual(result.duplicates, 0)
        assert.strictEqual(result.lost, 0)
        assert.strictEqual(result.outOfOrder, 0)
        assert.strictEqual(result.kills, KILLS)
        assert.strictEqual(result.records, 60)
      })
    ), { timeout: 170_000 })
})
