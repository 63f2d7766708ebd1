/**
 * A standby never blocks anything else (issue 29, defect 2): a standby whose
 * reader cannot join its group is stopped at once by a new assignment,
 * instead of holding the assignment (and with it the batch lock, polls and
 * revocations) until the join that never comes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Either } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SkeinConfig } from "../../src/index.ts"
import { KafkaError } from "../../src/SkeinError.ts"
import * as Admin from "../../src/internal/kafka/admin.ts"
import type { ChangelogTail } from "../../src/internal/kafka/changelogTail.ts"
import * as Client from "../../src/internal/kafka/client.ts"
import * as LocalStores from "../../src/internal/runtime/LocalStores.ts"
import { makeStats } from "../../src/internal/runtime/RunnerStats.ts"
import * as Standbys from "../../src/internal/runtime/Standbys.ts"
import { brokers, createTopics, unique } from "../helpers/kafka.ts"

describe("a standby whose reader cannot join", () => {
  it.scopedLive("is stopped by the next assignment without waiting for the join", () =>
    Effect.gen(function*() {
      const changelog = unique("standby-stuck-changelog")
      yield* createTopics([{ name: changelog, partitions: 1 }])
      const storeDir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-standby-stuck-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(storeDir, { recursive: true, force: true })))
      const kafka = yield* Client.makeKafka(SkeinConfig.make({ brokers: brokers(), applicationId: unique("standby-stuck") }))
      const admin = yield* Admin.make(kafka)
      /** The reader's join: never completes, as with a group coordinator that never answers. */
      const joined = yield* Deferred.make<void>()
      const joining = yield* Deferred.make<void>()
      const crashed = yield* Deferred.make<never, KafkaError>()
      const tail: ChangelogTail = {
        // The real reader's follow waits for its group's first join in the same place.
        follow: () =>
          Effect.zipRight(
            Deferred.succeed(joining, undefined),
            Effect.zipRight(Deferred.await(joined), Effect.fail(new KafkaError({ reason: "Crashed", operation: "join", cause: "test" })))
          ),
        unfollow: () => Effect.void,
        crashed
      }
      const stats = makeStats()
      const standbys = yield* Standbys.make({
        changelog,
        // No input topic of its own: its partition count is the changelog's, so the check passes.
        inputTopics: [changelog],
        storeDir,
        admin,
        tail: Effect.succeed(tail),
        localStores: LocalStores.make(),
        stats
      })
      // However the test ends, the join completes before the standbys' scope closes.
      yield* Effect.addFinalizer(() => Deferred.succeed(joined, undefined))
      yield* standbys.update([0])
      yield* Deferred.await(joining)
      // The next assignment drops the standby: it must not wait for the join (a guard, not a measurement).
      const stopped = yield* Effect.either(Effect.timeout(Effect.disconnect(standbys.update([])), "20 seconds"))
      assert.isTrue(Either.isRight(stopped), "the assignment waited for the standby's reader to join")
      assert.isFalse(standbys.has(0))
    }), { timeout: 60_000 })
})
