/**
 * A standby of a partition its changelog does not have (issue 29, defect 7,
 * for standbys): an input topic that gained partitions while running gets
 * standbys of the new partitions, whose changelog partitions do not exist.
 * The admin's offset range reads a missing partition as empty ({0, 0}); the
 * standby took that as a changelog to follow and reported itself warm (lag 0)
 * at offset 0, announcing a store it cannot have. It now fails with the
 * startup's typed mismatch error, whose message has the fix; the failure is
 * logged and counted and the standby dropped, as every standby failure is,
 * and the other standbys keep running.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, HashMap, List, Logger } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Health, SkeinConfig } from "../../src/index.ts"
import * as Admin from "../../src/internal/kafka/admin.ts"
import * as ChangelogTail from "../../src/internal/kafka/changelogTail.ts"
import * as Client from "../../src/internal/kafka/client.ts"
import * as LocalStores from "../../src/internal/runtime/LocalStores.ts"
import { makeStats } from "../../src/internal/runtime/RunnerStats.ts"
import * as Standbys from "../../src/internal/runtime/Standbys.ts"
import { brokers, createTopics, eventually, produce, unique } from "../helpers/kafka.ts"

describe("a standby of a partition its changelog does not have", () => {
  it.scopedLive("fails with ChangelogPartitionMismatch (logged, counted, dropped), never reported warm", () => {
    const warnings: Array<string> = []
    const collect = Logger.make(({ annotations, logLevel, message }) => {
      if (logLevel._tag !== "Warning") return
      const text = List.isList(message) || Array.isArray(message) ? [...message].join(" ") : String(message)
      warnings.push(`${text} ${JSON.stringify(Object.fromEntries(HashMap.toEntries(annotations)))}`)
    })
    return Effect.gen(function*() {
      // The input gained a partition (2 now), its changelog has the one it was created with.
      const input = unique("standby-grown-in")
      const changelog = unique("standby-grown-changelog")
      yield* createTopics([{ name: input, partitions: 2 }, { name: changelog, partitions: 1 }])
      yield* produce(changelog, [0, 1, 2].map((i) => ({ key: `k${i}`, value: "1", partition: 0 })))
      const storeDir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-standby-grown-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(storeDir, { recursive: true, force: true })))
      const kafka = yield* Client.makeKafka(SkeinConfig.make({ brokers: brokers(), applicationId: unique("standby-grown") }))
      const admin = yield* Admin.make(kafka)
      const stats = makeStats()
      const localStores = LocalStores.make()
      const standbys = yield* Standbys.make({
        changelog,
        inputTopics: [input],
        storeDir,
        admin,
        tail: Effect.succeed(yield* ChangelogTail.make(kafka, { topic: changelog, groupId: unique("standby-grown-tail") })),
        localStores,
        stats
      })
      yield* standbys.update([0, 1])

      // Either outcome is an event: partition 1's standby reported (at any position) or dropped.
      const reported = (partition: number) =>
        Effect.map(Health.snapshot(stats), (s) => s.standbys.find((standby) => standby.partition === partition))
      yield* eventually(
        Effect.map(reported(1), (standby) => standby !== undefined || stats.standbyFailures > 0),
        { what: "partition 1's standby to be reported or dropped", timeout: 60_000 }
      )
      const standby1 = yield* reported(1)
      console.log(
        `partition 1: reported ${JSON.stringify(standby1)}, announced ${JSON.stringify([...localStores.announced()])}, ` +
          `standby failures ${stats.standbyFailures}, warnings ${JSON.stringify(warnings)}`
      )
      assert.isUndefined(standby1, `a standby of a changelog partition that does not exist was reported: ${JSON.stringify(standby1)}`)
      assert.isFalse(localStores.announced().has(1), "no store of partition 1 is announced to the group")
      assert.strictEqual(stats.standbyFailures, 1, `the standby's failure is counted once: ${JSON.stringify(warnings)}`)
      assert.isFalse(standbys.has(1), "the standby is dropped")
      // The other standby is unaffected: it follows its changelog partition to its end (before, the
      // missing partition's follow held the shared reader, and partition 0's stayed at 0, lag 3).
      yield* eventually(Effect.map(reported(0), (standby) => standby?.position === 3 && standby.lag === 0), {
        what: "partition 0's standby at its changelog's end",
        timeout: 60_000
      })
      assert.isTrue(standbys.has(0), "the other standby keeps running")
      const warning = warnings.find((w) => w.startsWith("standby 1 dropped"))
      assert.isDefined(warning, JSON.stringify(warnings))
      assert.include(warning, `Changelog topic ${changelog} has 1 partitions but the input topics have 2`)
      assert.include(warning, "use a new applicationId or migrate the state")
    }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, collect)))
  }, { timeout: 120_000 })
})
