/**
 * A standby taking over a store an active task left (test/chaos/FINDINGS.md
 * #6): the store's checkpoint names the commit that wrote it last, and the
 * standby keeps the store only if the changelog holds that commit where the
 * checkpoint says. Partition 0's store names the records the changelog has
 * there: it is followed from its checkpoint and ends warm. Partition 1's
 * names a commit the brokers lost (other records hold its offsets) and holds
 * a key no committed record backs: the standby empties it and is dropped
 * (logged, counted), so a task of that partition restores in full.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, List, Logger } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Health, SkeinConfig } from "../../src/index.ts"
import * as ChangelogReplay from "../../src/internal/stores/ChangelogReplay.ts"
import * as Admin from "../../src/internal/kafka/admin.ts"
import * as ChangelogTail from "../../src/internal/kafka/changelogTail.ts"
import * as Client from "../../src/internal/kafka/client.ts"
import * as LocalStores from "../../src/internal/runtime/LocalStores.ts"
import { makeStats } from "../../src/internal/runtime/RunnerStats.ts"
import * as Standbys from "../../src/internal/runtime/Standbys.ts"
import * as StateStore from "../../src/internal/stores/StateStore.ts"
import { brokers, createTopics, eventually, produce, unique } from "../helpers/kafka.ts"

const contents = (folder: string) =>
  Effect.scoped(Effect.gen(function*() {
    const store = yield* StateStore.open(folder)
    const keys = yield* store.keys("")
    const values = yield* store.getMany(keys)
    return { entries: keys.map((key, i) => [key, values[i]] as const), checkpoint: yield* store.checkpoint }
  }))

describe("a standby of a store an active task left", () => {
  it.scopedLive("keeps it only when the changelog holds its last commit; else empties it and is dropped", () => {
    const warnings: Array<string> = []
    const collect = Logger.make(({ logLevel, message }) => {
      if (logLevel._tag !== "Warning") return
      warnings.push(List.isList(message) || Array.isArray(message) ? [...message].join(" ") : String(message))
    })
    return Effect.gen(function*() {
      const input = unique("standby-last-in")
      const changelog = unique("standby-last-changelog")
      yield* createTopics([{ name: input, partitions: 2 }, { name: changelog, partitions: 2 }])
      // Both partitions: a (offset 0), then the "last commit" b, c (offsets 1, 2), then d (offset 3).
      const committed = [{ key: "a", value: "1" }, { key: "b", value: "2" }, { key: "c", value: "3" }, { key: "d", value: "4" }]
      for (const partition of [0, 1]) yield* produce(changelog, committed.map((r) => ({ ...r, partition })))

      const storeDir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-standby-last-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(storeDir, { recursive: true, force: true })))
      // The stores as their active tasks left them: a, b, c written, the checkpoint at the commit of b, c.
      const lastCommits = [
        { records: 2, digest: ChangelogReplay.digest(committed.slice(1, 3)) },
        // Partition 1's last commit was lost: its b, c were other values, and a phantom key came with them.
        { records: 3, digest: ChangelogReplay.digest([{ key: "b", value: "20" }, { key: "c", value: "30" }, { key: "phantom", value: "9" }]) }
      ]
      for (const partition of [0, 1]) {
        yield* Effect.scoped(Effect.gen(function*() {
          const store = yield* StateStore.open(path.join(storeDir, String(partition)))
          const written = partition === 0
            ? committed.slice(0, 3)
            : [committed[0]!, { key: "b", value: "20" }, { key: "c", value: "30" }, { key: "phantom", value: "9" }]
          yield* store.replay(written, { topic: changelog, partition, offset: 1, lastCommit: lastCommits[partition]! })
        }))
      }

      const kafka = yield* Client.makeKafka(SkeinConfig.make({ brokers: brokers(), applicationId: unique("standby-last") }))
      const stats = makeStats()
      const localStores = LocalStores.make()
      const standbys = yield* Standbys.make({
        changelog,
        inputTopics: [input],
        storeDir,
        admin: yield* Admin.make(kafka),
        tail: Effect.succeed(yield* ChangelogTail.make(kafka, { topic: changelog, groupId: unique("standby-last-tail") })),
        localStores,
        stats
      })
      yield* standbys.update([0, 1])

      const reported = (partition: number) =>
        Effect.map(Health.snapshot(stats), (s) => s.standbys.find((standby) => standby.partition === partition))
      yield* eventually(Effect.map(reported(0), (standby) => standby?.position === 4 && standby.lag === 0), {
        what: "partition 0's standby at its changelog's end",
        timeout: 60_000
      })
      yield* eventually(Effect.sync(() => stats.standbyFailures > 0), { what: "partition 1's standby dropped", timeout: 60_000 })
      yield* standbys.update([])
      yield* standbys.released(0)
      yield* standbys.released(1)

      // Partition 0: kept, followed from its checkpoint to the end.
      const kept = yield* contents(path.join(storeDir, "0"))
      assert.deepStrictEqual(kept.entries, committed.map((r) => [r.key, r.value]))
      assert.deepStrictEqual(kept.checkpoint, { topic: changelog, partition: 0, offset: 4 })
      // Partition 1: emptied (no checkpoint: its task restores in full), dropped, said and counted once.
      const emptied = yield* contents(path.join(storeDir, "1"))
      assert.deepStrictEqual(emptied, { entries: [], checkpoint: "missing" })
      assert.strictEqual(stats.standbyFailures, 1, JSON.stringify(warnings))
      assert.isFalse(localStores.announced().has(1), "no store of partition 1 is announced to the group")
      const warning = warnings.find((w) => w.startsWith("standby 1 dropped"))
      assert.isDefined(warning, JSON.stringify(warnings))
      assert.include(warning, "the changelog does not hold the store's last commit (3 records at offset 1)")
    }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, collect)))
  }, { timeout: 120_000 })
})
