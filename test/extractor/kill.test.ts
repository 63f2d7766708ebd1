/**
 * The extractor process is SIGKILLed between a page's fetch and its commit,
 * again and again; downstream read_committed must see every page exactly
 * once, in order, and each killed page must be read again by the next run.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Queue, Random } from "effect"
import type * as Items from "../apps/extractItems.ts"
import * as Source from "../apps/extractSource.ts"
import { createTopic, readCommitted, spawnApp, unique } from "../apps/extractSupport.ts"
import type { AppConfig } from "../apps/extractSupport.ts"
import { brokers } from "../utils/broker.ts"

const KILLS = Number(process.env["EXTRACT_KILLS"] ?? "10")
const DELAY_BEFORE_COMMIT_MS = 250

const trace = (message: string) => {
  if (process.env["EXTRACT_TEST_LOG"] === "1") process.stderr.write(`${new Date().toISOString()} ${message}\n`)
}

describe("Extractor under SIGKILL", () => {
  it.scopedLive(`every page exactly once after ${KILLS} kills between fetch and commit`, () =>
    Effect.gen(function*() {
      const tokens = ["k0", "k1"]
      const items = 30
      const output = unique("extract-kill-out")
      yield* createTopic(brokers(), output, 2)
      const source = yield* Source.make({ items: { k0: items, k1: items }, pageSize: 2 })
      const config: AppConfig = {
        brokers: brokers(),
        applicationId: unique("extract-kill"),
        name: "items",
        tokens,
        source: source.url,
        output,
        pageSize: 2,
        delayBeforeCommitMs: DELAY_BEFORE_COMMIT_MS,
        sessionTimeoutMs: 6000,
        waitForStart: true
      }

      // The next instances are loaded before the current one is killed (module loading is slow
      // on a busy machine): the next one joins the group right after the kill.
      const killed: Array<Source.ServedPage> = []
      const loaded = [yield* spawnApp(config), yield* spawnApp(config)]
      const nextApp = Effect.gen(function*() {
        loaded.push(yield* spawnApp(config))
        const app = loaded.shift()
        return app === undefined ? yield* Effect.dieMessage("no app loaded") : app
      })
      for (let kill = 0; kill < KILLS; kill++) {
        const app = yield* nextApp
        yield* Queue.takeAll(source.served)
        yield* app.start
        trace(`run ${kill + 1} started`)
        // Let a few pages of this run commit, then kill while one is between fetch and commit.
        const skip = yield* Random.nextIntBetween(0, 3)
        for (let i = 0; i < skip; i++) yield* Queue.take(source.served)
        const page = yield* Queue.take(source.served)
        yield* Effect.sleep(Duration.millis(yield* Random.nextIntBetween(0, DELAY_BEFORE_COMMIT_MS - 100)))
        yield* app.kill("SIGKILL")
        yield* app.exited
        killed.push(page)
        trace(`kill ${kill + 1}: page ${page.token}@${page.after}`)
      }

      // A last run to the end.
      const next = yield* nextApp
      yield* Queue.takeAll(source.served)
      yield* next.start
      trace("last run started")
      const last = new Map<string, number>()
      while (tokens.some((token) => last.get(token) !== items)) {
        const page = yield* Queue.take(source.served)
        const end = page.ids[page.ids.length - 1]
        if (end !== undefined) last.set(page.token, end)
      }
      // The last page is committed DELAY_BEFORE_COMMIT_MS after it was served.
      yield* Effect.sleep(Duration.millis(DELAY_BEFORE_COMMIT_MS + 1500))
      yield* next.kill("SIGKILL")

      const records = yield* readCommitted(brokers(), output)
      const seen = new Map<string, Array<number>>()
      for (const record of records) {
        const item = JSON.parse(record.value ?? "null") as Items.Item
        seen.set(item.token, [...(seen.get(item.token) ?? []), item.id])
      }
      for (const token of tokens) {
        assert.deepStrictEqual(seen.get(token), Array.from({ length: items }, (_, i) => i + 1), `items of ${token}`)
      }
      // Every killed page was fetched again: it had not been committed.
      const requests = source.requests.filter((r) => r.status === 200)
      for (const page of killed) {
        const times = requests.filter((r) => r.token === page.token && r.after === page.after).length
        assert.isAtLeast(times, 2, `page ${page.token}@${page.after} was read again after the kill`)
      }
      assert.strictEqual(killed.length, KILLS)
    }), { timeout: 170_000 })
})
