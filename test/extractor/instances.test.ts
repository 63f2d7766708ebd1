/**
 * Several extractor processes: the group spreads the tokens, a SIGKILLed
 * instance's tokens move to the survivor, and a frozen (SIGSTOP) instance
 * that wakes up after its tokens moved is fenced: its pending commit fails
 * and nothing it read becomes visible twice.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Queue } from "effect"
import type * as Items from "../apps/extractItems.ts"
import * as Source from "../apps/extractSource.ts"
import { createTopic, eventually, readCommitted, spawnApp, unique } from "../apps/extractSupport.ts"
import type { App, AppConfig } from "../apps/extractSupport.ts"
import { brokers } from "../utils/broker.ts"

const trace = (message: string) => {
  if (process.env["EXTRACT_TEST_LOG"] === "1") process.stderr.write(`${new Date().toISOString()} ${message}\n`)
}

const owned = (app: App): ReadonlyArray<string> => app.status()?.owned ?? []

describe("Extractor instances", () => {
  it.scopedLive("tokens spread over instances, move when one is killed, and a zombie is fenced", () =>
    Effect.gen(function*() {
      const tokens = ["t0", "t1", "t2", "t3"]
      const output = unique("extract-inst-out")
      yield* createTopic(brokers(), output, 2)
      const source = yield* Source.make({ items: Object.fromEntries(tokens.map((t) => [t, 100_000])), pageSize: 2 })
      const config: AppConfig = {
        brokers: brokers(),
        applicationId: unique("extract-inst"),
        name: "items",
        tokens,
        source: source.url,
        output,
        pageSize: 2,
        // The window to freeze c in, after its "Fetched" line (every page waits it).
        delayBeforeCommitMs: 3000,
        sessionTimeoutMs: 6000,
        waitForStart: true
      }
      const [a, b, c] = [yield* spawnApp(config), yield* spawnApp(config), yield* spawnApp(config)]
      yield* Effect.all([a.start, b.start], { concurrency: "unbounded" })

      // Two instances: two tokens each.
      yield* eventually(
        Effect.sync(() =>
          owned(a).length === 2 && owned(b).length === 2 &&
          [...owned(a), ...owned(b)].sort().join() === tokens.join()
        ),
        { what: "tokens spread over a and b", timeout: Duration.seconds(90) }
      )
      trace(`spread: a=${owned(a).join()} b=${owned(b).join()}`)

      // Kill a: its tokens move to b.
      yield* a.kill("SIGKILL")
      yield* eventually(Effect.sync(() => owned(b).length === 4), { what: "b owns every token", timeout: Duration.seconds(90) })
      trace("b owns every token")

      // c joins; then freeze it inside the sleep between a page's arrival and its commit (c's own
      // "Fetched" line: a page the source served may not have reached c yet, and a c frozen before
      // the sleep began sleeps it after waking, long enough to see the rebalance first and drop the
      // page instead of trying its commit). Woken past the sleep, c commits at once and is fenced.
      yield* c.start
      yield* eventually(
        Effect.sync(() => owned(b).length === 2 && owned(c).length === 2),
        { what: "tokens spread over b and c", timeout: Duration.seconds(90) }
      )
      const ofC = new Set(owned(c))
      trace(`spread: b=${owned(b).join()} c=${owned(c).join()}`)
      yield* Queue.takeAll(c.events)
      const frozenPage = yield* Queue.take(c.events).pipe(
        Effect.repeat({ until: (event) => event._tag === "Fetched" && ofC.has(event.token) })
      )
      yield* c.kill("SIGSTOP")
      const migrationsBefore = c.status()?.migrations ?? 0
      trace(`c frozen after fetching ${frozenPage._tag === "Fetched" ? `${frozenPage.token}@${frozenPage.after}` : "?"}`)

      // c's session expires: b takes every token over and fences c's transactional ids.
      yield* eventually(Effect.sync(() => owned(b).length === 4), {
        what: "b owns every token again",
        timeout: Duration.seconds(90)
      })
      const pagesOfB = b.status()?.pagesCommitted ?? 0
      yield* eventually(Effect.sync(() => (b.status()?.pagesCommitted ?? 0) >= pagesOfB + 4), { what: "b commits" })

      // c wakes up: its pending commit is fenced (a migration), then it rejoins.
      yield* c.kill("SIGCONT")
      yield* eventually(Effect.sync(() => (c.status()?.migrations ?? 0) > migrationsBefore), {
        what: "c's pending commit is fenced",
        timeout: Duration.seconds(60)
      })
      trace("c was fenced")
      yield* eventually(
        Effect.sync(() => owned(b).length === 2 && owned(c).length === 2),
        { what: "tokens spread over b and c again", timeout: Duration.seconds(90) }
      )

      // Finish: the source ends a few items after what was read; wait until every token drained.
      const ends = new Map<string, number>()
      for (const token of tokens) {
        const read = source.requests.filter((r) => r.token === token).reduce((max, r) => Math.max(max, r.after), 0)
        ends.set(token, read + 6)
        source.setItems(token, read + 6)
      }
      yield* eventually(
        Effect.sync(() => tokens.every((token) => source.requests.some((r) => r.token === token && r.after === ends.get(token)))),
        { what: "every token drained", timeout: Duration.seconds(90) }
      )
      yield* Effect.all([b.kill("SIGKILL"), c.kill("SIGKILL")])

      const records = yield* readCommitted(brokers(), output)
      const seen = new Map<string, Array<number>>()
      for (const record of records) {
        const item = JSON.parse(record.value ?? "null") as Items.Item
        seen.set(item.token, [...(seen.get(item.token) ?? []), item.id])
      }
      for (const token of tokens) {
        const end = ends.get(token) ?? 0
        assert.deepStrictEqual(seen.get(token), Array.from({ length: end }, (_, i) => i + 1), `items of ${token}`)
      }
    }), { timeout: 300_000 })
})
