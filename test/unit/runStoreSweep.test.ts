/**
 * The run store's sweep reads and deletes expired completions in bounded chunks: no read returns
 * more than a chunk of entries and no transaction deletes more than a chunk, whatever the number
 * of completions (a real LevelDB store; the run-store topic's commit in memory).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as CommitReceipt from "../../src/internal/runtime/CommitReceipt.ts"
import * as StateStore from "../../src/internal/stores/StateStore.ts"
import * as RunStore from "../../src/internal/workflow/RunStore.ts"

/** A store that records how many entries each read returned. */
const observed = <P extends number>(store: StateStore.StateStore<P>, reads: Array<number>): StateStore.StateStore<P> => ({
  ...store,
  getMany: (keys) => Effect.tap(store.getMany(keys), (values) => reads.push(values.length)),
  keys: (prefix) => Effect.tap(store.keys(prefix), (keys) => reads.push(keys.length)),
  entries: (prefix, options) => Effect.tap(store.entries(prefix, options), (entries) => reads.push(entries.length))
})

describe("run store sweep", () => {
  it.scopedLive("deletes 2,500 expired completions in chunks of at most 1,000 reads and deletes each; keeps the fresh ones", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-sweep-"))
      const store = yield* StateStore.open(dir, 0)
      const now = Date.now()
      const old = Array.from({ length: 2_500 }, (_, i) => ({
        key: `done/run-${String(i).padStart(5, "0")}`,
        value: JSON.stringify({ completedAt: now - 60_000, result: i })
      }))
      const fresh = [{ key: "done/zz-fresh", value: JSON.stringify({ completedAt: now + 60_000, result: "kept" }) }]
      yield* store.replay([...old, ...fresh, { key: "step/zz-open/1/fetch", value: "\"f\"" }])
      const reads: Array<number> = []
      const commits: Array<number> = []
      const runs = RunStore.make({
        topic: "runs",
        partition: 0,
        store: observed(store, reads),
        commit: (records) =>
          Effect.sync(() => {
            commits.push(records.length)
            return CommitReceipt.issue(0, [])
          }),
        retention: Duration.seconds(1)
      })
      const expired = yield* runs.sweep
      assert.strictEqual(expired, 2_500)
      assert.deepStrictEqual(yield* store.keys(""), ["done/zz-fresh", "step/zz-open/1/fetch"])
      assert.ok(
        reads.every((n) => n <= 1_000) && commits.every((n) => n <= 1_000),
        `reads ${reads.join(", ")}; deletes per transaction ${commits.join(", ")}`
      )
    }))
})
