/**
 * A standby of a store whose changelog is its task's input topic (a table
 * read with `sourceChangelog`, `SourceChangelog.ts`): it applies the topic's
 * records only up to the task's committed offset there. A fetched batch
 * with records past it is held, unapplied and unacknowledged, while the
 * committed offset is asked again, and applied once the commits pass it;
 * the checkpoint is then the committed offset. A store the active task left
 * with a checkpoint beyond the committed offset (a commit the brokers lost)
 * is emptied first. The topic's reader is a fake, the committed offset a
 * variable the test moves; the broker answers the topic's offsets.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Queue } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SkeinConfig } from "../../src/index.ts"
import type { KafkaError } from "../../src/SkeinError.ts"
import * as Admin from "../../src/internal/kafka/admin.ts"
import type { ChangelogTail, TailEvent } from "../../src/internal/kafka/changelogTail.ts"
import * as Client from "../../src/internal/kafka/client.ts"
import * as LocalStores from "../../src/internal/runtime/LocalStores.ts"
import { makeStats } from "../../src/internal/runtime/RunnerStats.ts"
import * as Standbys from "../../src/internal/runtime/Standbys.ts"
import * as StateStore from "../../src/internal/stores/StateStore.ts"
import { brokers, createTopics, eventually, unique } from "../helpers/kafka.ts"

describe("a standby of a source-topic changelog", () => {
  it.scopedLive("applies the topic only up to the task's committed offset; a store beyond it is emptied first", () =>
    Effect.gen(function*() {
      const source = unique("standby-source")
      yield* createTopics([{ name: source, partitions: 1, config: { "cleanup.policy": "compact" } }])
      const storeDir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-standby-source-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(storeDir, { recursive: true, force: true })))
      // The store as its active task left it: a key, and a checkpoint at offset 9, which no commit backs.
      yield* Effect.scoped(Effect.flatMap(
        StateStore.open(path.join(storeDir, "0")),
        (store) => store.replay([{ key: "phantom", value: "9" }], { topic: source, partition: 0, offset: 9 })
      ))

      const kafka = yield* Client.makeKafka(SkeinConfig.make({ brokers: brokers(), applicationId: unique("standby-source") }))
      const events = yield* Queue.unbounded<TailEvent>()
      const followed = yield* Deferred.make<number>()
      const crashed = yield* Deferred.make<never, KafkaError>()
      const tail: ChangelogTail = {
        follow: (_partition, from) => Effect.as(Deferred.succeed(followed, from), events),
        unfollow: () => Effect.void,
        crashed
      }
      let committed = 2
      let asked = 0
      const localStores = LocalStores.make()
      const standbys = yield* Standbys.make({
        changelog: source,
        source: {
          toWrite: (record) => ({ key: record.key?.toString("utf8") ?? "", value: record.value?.toString("utf8") ?? null }),
          committed: () =>
            Effect.sync(() => {
              asked++
              return committed
            }),
          pollInterval: "10 millis"
        },
        inputTopics: [source],
        storeDir,
        admin: yield* Admin.make(kafka),
        tail: Effect.succeed(tail),
        localStores,
        stats: makeStats()
      })
      yield* standbys.update([0])
      assert.strictEqual(yield* Deferred.await(followed), 0, "emptied, followed from the topic's start")
      const store = standbys.readable(0)
      if (store === undefined) return assert.fail("the standby's store is readable")
      assert.deepStrictEqual(yield* store.keys(""), [], "the store beyond the committed offset was emptied")

      const acked = yield* Deferred.make<void>()
      const record = (offset: number, key: string) => ({ offset, key: Buffer.from(key), value: Buffer.from(String(offset)), timestamp: 1 })
      yield* Queue.offer(events, {
        _tag: "Records",
        records: [record(0, "a"), record(1, "b"), record(2, "c"), record(3, "d")],
        next: 4,
        highWatermark: 4,
        ack: () => Deferred.unsafeDone(acked, Effect.void)
      })
      // Offsets 2 and 3 are past the committed offset 2: held while the committed offset is asked again.
      const before = asked
      yield* eventually(Effect.sync(() => asked >= before + 3), { what: "the committed offset asked again" })
      assert.isFalse(yield* Deferred.isDone(acked), "the batch is held")
      assert.deepStrictEqual(yield* store.keys(""), [], "nothing of it applied")

      committed = 4
      yield* Deferred.await(acked)
      assert.deepStrictEqual(yield* store.keys(""), ["a", "b", "c", "d"])
      assert.deepStrictEqual(yield* store.checkpoint, { topic: source, partition: 0, offset: 4 })
      assert.strictEqual(localStores.announced().get(0), 4)
      yield* standbys.update([])
      yield* standbys.released(0)
    }), { timeout: 60_000 })
})
