/**
 * Kept stores of partitions revoked from a long-running instance: once the
 * instance has not been assigned a partition again for `stateCleanupDelay`,
 * its folders (`<p>`, `<p>.runs`, a leftover `<p>.<uuid>.tmp`) are deleted
 * while the instance keeps running; every folder of a partition it is
 * assigned stays, its open store included.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Logger, LogLevel, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Topic, Transformer } from "../../src/index.ts"
import * as StateStore from "../../src/internal/stores/StateStore.ts"
import { caughtUp, createTopics, eventually, produce, startInstance, unique } from "../helpers/kafka.ts"

const PARTITIONS = 2
const DELAY = Duration.seconds(3)

/** A logger that keeps the messages (debug ones too) of the runner it is provided to. */
const captureLogs = () => {
  const lines: Array<string> = []
  const layer = Layer.merge(
    Logger.replace(
      Logger.defaultLogger,
      Logger.make(({ message }) => {
        lines.push(Array.isArray(message) ? message.map(String).join(" ") : String(message))
      })
    ),
    Logger.minimumLogLevel(LogLevel.Debug)
  )
  return { lines, layer }
}

const exists = (folder: string) => fs.existsSync(folder)

/** A closed LevelDB store at `folder`, last used two hours ago. */
const oldStore = (folder: string) =>
  Effect.gen(function*() {
    yield* Effect.scoped(Effect.flatMap(StateStore.open(folder), (store) => store.replay([{ key: "k", value: "1" }])))
    backdate(folder)
  })

const backdate = (folder: string) => {
  const twoHoursAgo = new Date(Date.now() - 2 * 60 * 60 * 1000)
  fs.utimesSync(folder, twoHoursAgo, twoHoursAgo)
}

describe("kept stores of revoked partitions, while running", () => {
  it.scopedLive("deleted stateCleanupDelay after the revocation, the instance still running; an assigned partition's never", () =>
    Effect.gen(function*() {
      const input = unique("cleanup-in")
      const output = unique("cleanup-out")
      const applicationId = unique("cleanup-app")
      yield* createTopics([{ name: input, partitions: PARTITIONS }, { name: output, partitions: PARTITIONS }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Schema.Number) })
      const counter = Transformer.make({
        name: "count",
        inputs: [In],
        state: Schema.Number,
        transform: (record, count) => {
          const next = Option.getOrElse(count, () => 0) + 1
          return Effect.succeed({ emit: [Topic.record(Out, record.key, next)], state: Transformer.set(next) })
        }
      })
      const root = fs.mkdtempSync(path.join(os.tmpdir(), "skein-cleanup-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(root, { recursive: true, force: true })))
      const stateA = path.join(root, "a")
      const stateB = path.join(root, "b")
      const storesA = path.join(stateA, applicationId, "count")
      const folders = (partition: number) => {
        const tmp = fs.readdirSync(storesA).filter((name) => name.startsWith(`${partition}.`) && name.endsWith(".tmp"))
        return [String(partition), `${partition}.runs`, ...tmp].map((name) => path.join(storesA, name))
      }
      const options = { applicationId, stateCleanupDelay: DELAY, sessionTimeout: Duration.seconds(6) }

      yield* produce(input, Array.from({ length: 200 }, (_, i) => ({ key: `k-${i}`, value: "1" })))
      const logs = captureLogs()
      const a = yield* startInstance(counter, { ...options, stateDir: stateA }, logs.layer)
      yield* caughtUp(applicationId, input)
      yield* eventually(Effect.sync(() => a.stats.assigned.size === PARTITIONS), { what: "A to run both tasks" })
      // Besides each partition's open store: a run store and a temporary store a killed process
      // left, all (the open stores too) last changed two hours ago.
      for (let p = 0; p < PARTITIONS; p++) {
        yield* oldStore(path.join(storesA, `${p}.runs`))
        yield* oldStore(path.join(storesA, `${p}.${randomUUID()}.tmp`))
        backdate(path.join(storesA, String(p)))
      }
      const backdatedAt = Date.now()
      const sweeps = () => logs.lines.filter((line) => line.startsWith(`swept the stores under ${storesA}:`)).length
      const sweptTwice = (after: number) => eventually(Effect.sync(() => sweeps() >= after + 2), { what: "two sweeps" })

      // Assigned to A: two sweeps spare every folder of both partitions.
      yield* sweptTwice(sweeps())
      for (let p = 0; p < PARTITIONS; p++) {
        for (const folder of folders(p)) assert.isTrue(exists(folder), `${folder} of assigned partition ${p}`)
      }
      assert.deepStrictEqual(logs.lines.filter((line) => line.startsWith("deleted")), [])

      // B joins: A loses a partition, and its store is closed (its folder's modification time: now).
      const b = yield* startInstance(counter, { ...options, stateDir: stateB })
      yield* eventually(
        Effect.sync(() => a.stats.assigned.size === 1 && b.stats.assigned.size === 1),
        { what: "A and B to run one task each" }
      )
      const [revoked] = [...b.stats.assigned]
      const [kept] = [...a.stats.assigned]
      if (revoked === undefined || kept === undefined) return assert.fail("no assignment")
      const revokedFolders = folders(revoked)
      // Closing the store marked it used at the close, after the backdating (two hours back).
      const closedAt = fs.statSync(path.join(storesA, String(revoked))).mtimeMs
      assert.isAbove(closedAt, backdatedAt, "the close set the folder's modification time (it was backdated before)")

      // The delay running out is an event: a timer set to the moment the closed store's age
      // reaches stateCleanupDelay. No poll may see the kept store gone before it fired.
      let delayRanOut = false
      yield* Effect.forkScoped(Effect.sleep(Duration.millis(Math.max(0, closedAt + Duration.toMillis(DELAY) - Date.now()))).pipe(
        Effect.zipRight(Effect.sync(() => {
          delayRanOut = true
        }))
      ))
      const keptStore = path.join(storesA, String(revoked))
      const goneBeforeTheDelay: Array<string> = []
      yield* eventually(
        Effect.sync(() => {
          if (!exists(keptStore) && !delayRanOut) goneBeforeTheDelay.push(keptStore)
          return revokedFolders.every((folder) => !exists(folder))
        }),
        { what: `the folders of partition ${revoked} to be deleted`, timeout: 60_000 }
      )
      process.stderr.write(`store-cleanup: the revoked store was deleted ${Math.round(Date.now() - closedAt)} ms (or less) after its close\n`)
      // Not before stateCleanupDelay since the revocation, and the instance is still running.
      assert.deepStrictEqual(goneBeforeTheDelay, [], "the kept store was deleted before stateCleanupDelay ran out")
      assert.isTrue(Option.isNone(yield* a.exit))
      assert.strictEqual(a.stats.phase, "running")
      const deleted = logs.lines.filter((line) => line.startsWith("deleted"))
      assert.deepStrictEqual(
        deleted.map((line) => line.replace(/ \(.*?\):/, ":")).sort(),
        [
          `deleted the kept store of partition ${revoked}`,
          `deleted the run store of partition ${revoked}`,
          `deleted the temporary kept store of partition ${revoked}`
        ].map((what) =>
          `${what}: the partition is not assigned to this instance and the store was unused for more than 3s (stateCleanupDelay)`
        ).sort()
      )

      // The partition A still runs: its folders stay, the open store even when it looks unused.
      backdate(path.join(storesA, String(kept)))
      yield* sweptTwice(sweeps())
      for (const folder of folders(kept)) assert.isTrue(exists(folder), `${folder} of assigned partition ${kept}`)
      assert.isTrue(exists(path.join(stateB, applicationId, "count", String(revoked))))
      assert.strictEqual(logs.lines.filter((line) => line.startsWith("deleted")).length, 3)

      // A's task still works on its store.
      yield* produce(input, Array.from({ length: 200 }, (_, i) => ({ key: `k-${i}`, value: "1" })))
      yield* caughtUp(applicationId, input)
      yield* b.stop
      yield* a.stop
    }), { timeout: 180_000 })
})
