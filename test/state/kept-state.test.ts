/**
 * Local state kept across restarts: a task that finds its store restores only
 * the changelog's tail from the store's checkpoint; a checkpoint it cannot
 * trust means a full restore, with the reason; a store behind its changelog
 * (what a crash between a commit and the store write leaves) catches up.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Topic, Transformer } from "../../src/index.ts"
import type { Runner } from "../../src/index.ts"
import * as StateStore from "../../src/internal/stores/StateStore.ts"
import {
  alterTopicConfig,
  caughtUp,
  createTopics,
  deleteRecordsBefore,
  describeGroup,
  eventually,
  groupsWithPrefix,
  kafka,
  offsets,
  produceRaw,
  readCommitted,
  startInstance,
  unique
} from "../helpers/kafka.ts"

const PARTITIONS = 2

const setup = Effect.gen(function*() {
  const input = unique("kept-in")
  const output = unique("kept-out")
  const applicationId = unique("kept-app")
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
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-kept-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(stateDir, { recursive: true, force: true })))
  const storePath = (partition: number) => path.join(stateDir, applicationId, "count", String(partition))
  return { input, output, applicationId, counter, stateDir, storePath }
})

const key = (i: number) => `k-${String(i).padStart(6, "0")}`

/** One record for each key of `from` until `until`. */
const produceKeys = (topic: string, from: number, until: number) =>
  produceRaw(topic, Array.from({ length: until - from }, (_, i) => ({ key: key(from + i), value: "1" })), 5000)

/** How every task of a run restored, once all have started. */
const restoresOf = (stats: Runner.Stats) =>
  Effect.gen(function*() {
    yield* eventually(Effect.sync(() => stats.restores.size === PARTITIONS), { what: "every task to start" })
    return [...stats.restores.values()]
  })

/** The last count per key, and the number of outputs, read back read_committed. */
const lastCounts = (topic: string) =>
  Effect.map(readCommitted(topic), (records) => {
    const last = new Map<string, number>()
    for (const r of [...records].sort((a, b) => a.offset - b.offset)) last.set(r.key ?? "", Number(r.value))
    return { last, outputs: records.length }
  })

describe("state kept across restarts", () => {
  it.scopedLive("a restart reads only the changelog's tail: about 1,000 records after 1,000 more, not 41,000", () =>
    Effect.gen(function*() {
      const { applicationId, counter, input, output, stateDir } = yield* setup
      // A task's batch takes at most maxPollRecords records, so its last commit wrote at most that
      // many changelog records: the most a tail restore reads again, whatever the machine's load.
      const maxPollRecords = 5_000
      const lastCommits = PARTITIONS * maxPollRecords
      const run = (dir: string = stateDir) => startInstance(counter, { applicationId, stateDir: dir, maxPollRecords })
      // Well above the most a tail restore reads (1,000 + lastCommits: 11,000), so a full restore
      // (41,000) cannot pass for one; more keys only make the run longer.
      const keys = 40_000

      yield* produceKeys(input, 0, keys)
      const first = yield* run()
      const cold = yield* restoresOf(first.stats)
      assert.deepStrictEqual(cold.map((r) => [r.mode, r.reason, r.records]), [
        ["full", "no local state (no checkpoint)", 0],
        ["full", "no local state (no checkpoint)", 0]
      ])
      yield* caughtUp(applicationId, input, 180_000)
      yield* first.stop

      const second = yield* run()
      const warm = yield* restoresOf(second.stats)
      assert.deepStrictEqual(warm.map((r) => r.mode), ["tail", "tail"])
      // At most the last batch of each task's last commit is read again.
      const rereadAtStart = warm.reduce((n, r) => n + r.records, 0)
      assert.isAtMost(rereadAtStart, lastCommits, JSON.stringify(warm))
      yield* produceKeys(input, 0, 1_000)
      yield* caughtUp(applicationId, input)
      yield* second.stop

      const third = yield* run()
      const tail = yield* restoresOf(third.stats)
      assert.deepStrictEqual(tail.map((r) => r.mode), ["tail", "tail"])
      const restored = tail.reduce((n, r) => n + r.records, 0)
      assert.isAtLeast(restored, 1_000, JSON.stringify(tail))
      assert.isAtMost(restored, 1_000 + lastCommits, JSON.stringify(tail))
      // The kept state is exact: one more record for keys 0..1999 counts 3 and 2.
      yield* produceKeys(input, 0, 2_000)
      yield* caughtUp(applicationId, input)
      yield* third.stop
      const { last, outputs } = yield* lastCounts(output)
      assert.strictEqual(outputs, keys + 1_000 + 2_000)
      for (let i = 0; i < 2_000; i++) assert.strictEqual(last.get(key(i)), i < 1_000 ? 3 : 2, key(i))
      assert.strictEqual(last.get(key(keys - 1)), 1)

      // Another instance without local state restores in full.
      const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), "skein-kept-other-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(elsewhere, { recursive: true, force: true })))
      const fourth = yield* run(elsewhere)
      const full = yield* restoresOf(fourth.stats)
      assert.deepStrictEqual(full.map((r) => r.mode), ["full", "full"])
      assert.isAtLeast(full.reduce((n, r) => n + r.records, 0), keys)
      yield* fourth.stop
    }), { timeout: 300_000 })

  // A new group's first join waits out the broker's group.initial.rebalance.delay.ms (3 s by default;
  // 0 on the test broker): the reader joins its group while the runner joins its own, not after.
  it.scopedLive("the changelog reader is made at startup and joins its group before any restore needs it", () =>
    Effect.gen(function*() {
      const { applicationId, counter, stateDir } = yield* setup
      // An empty input and changelog: no task has anything to restore.
      const instance = yield* startInstance(counter, { applicationId, stateDir })
      const restores = yield* restoresOf(instance.stats)
      assert.deepStrictEqual(restores.map((r) => r.records), [0, 0])
      yield* eventually(
        Effect.gen(function*() {
          const groups = yield* groupsWithPrefix(`${applicationId}-restore-`)
          if (groups.length !== 1) return false
          const group = yield* describeGroup(groups[0]!)
          return group.state === "Stable" && group.members.length === 1
        }),
        { what: `the restore reader's group (${applicationId}-restore-<uuid>) to be joined`, timeout: 30_000 }
      )
    }), { timeout: 60_000 })

  it.scopedLive("a store behind its changelog (a crash between a commit and the store write) catches up exactly", () =>
    Effect.gen(function*() {
      const { applicationId, counter, input, output, stateDir, storePath } = yield* setup
      const run = () => startInstance(counter, { applicationId, stateDir, maxPollRecords: 50 })
      yield* produceKeys(input, 0, 1_000)
      const first = yield* run()
      yield* caughtUp(applicationId, input)
      yield* first.stop
      // The stores as they are now, checkpoints included.
      const snapshot = path.join(stateDir, "snapshot")
      for (let p = 0; p < PARTITIONS; p++) fs.cpSync(storePath(p), path.join(snapshot, String(p)), { recursive: true })

      // Many more commits (batches of 50), whose writes reach the changelog and the stores.
      yield* produceKeys(input, 0, 1_000)
      const second = yield* run()
      yield* caughtUp(applicationId, input)
      yield* second.stop
      // Put back the older stores: every one of those commits is in the changelog, none in the
      // store, and the checkpoint is the older one. That is all a crash after a commit and
      // before its store write can leave (a store is written only after its commit).
      for (let p = 0; p < PARTITIONS; p++) {
        fs.rmSync(storePath(p), { recursive: true, force: true })
        fs.cpSync(path.join(snapshot, String(p)), storePath(p), { recursive: true })
      }

      const third = yield* run()
      const restores = yield* restoresOf(third.stats)
      assert.deepStrictEqual(restores.map((r) => r.mode), ["tail", "tail"])
      assert.isAtLeast(restores.reduce((n, r) => n + r.records, 0), 1_000)
      yield* produceKeys(input, 0, 1_000)
      yield* caughtUp(applicationId, input)
      yield* third.stop
      const { last, outputs } = yield* lastCounts(output)
      assert.strictEqual(outputs, 3_000)
      for (let i = 0; i < 1_000; i++) assert.strictEqual(last.get(key(i)), 3, key(i))
    }), { timeout: 180_000 })

  it.scopedLive("a checkpoint below the changelog's earliest offset, or beyond a recreated changelog's end: full restore, with why", () =>
    Effect.gen(function*() {
      const { applicationId, counter, input, stateDir } = yield* setup
      const changelog = Transformer.changelogTopic(applicationId, counter)
      const run = () => startInstance(counter, { applicationId, stateDir })
      yield* produceKeys(input, 0, 500)
      const first = yield* run()
      yield* caughtUp(applicationId, input)
      yield* first.stop

      // Retention (here deleteRecords, which a compact-only topic refuses) moves the changelog's
      // start past the checkpoints.
      yield* alterTopicConfig(changelog, { "cleanup.policy": "compact,delete" })
      const ends = yield* offsets(changelog)
      yield* deleteRecordsBefore(changelog, ends.map((e) => ({ partition: e.partition, offset: e.lastStable })))
      const second = yield* run()
      const truncated = yield* restoresOf(second.stats)
      for (const r of truncated) {
        assert.strictEqual(r.mode, "full")
        assert.match(r.reason, /^the checkpoint \d+ is below the changelog's earliest offset \d+ \(records were deleted\)$/)
      }
      yield* second.stop

      // The changelog deleted and recreated empty: the checkpoints are beyond its end.
      yield* Effect.promise(async () => {
        const admin = kafka().admin()
        await admin.connect()
        try {
          await admin.deleteTopics({ topics: [changelog] })
        } finally {
          await admin.disconnect()
        }
      })
      yield* eventually(
        Effect.promise(async () => {
          const admin = kafka().admin()
          await admin.connect()
          try {
            return !(await admin.listTopics()).includes(changelog)
          } finally {
            await admin.disconnect()
          }
        }),
        { what: "the changelog to be deleted" }
      )
      yield* createTopics([{ name: changelog, partitions: PARTITIONS, config: { "cleanup.policy": "compact" } }])
      const third = yield* run()
      const recreated = yield* restoresOf(third.stats)
      for (const r of recreated) {
        assert.strictEqual(r.mode, "full")
        assert.match(r.reason, /^the checkpoint \d+ is beyond the changelog's end 0 \(was the changelog recreated\?\)$/)
      }
      yield* third.stop
    }), { timeout: 180_000 })

  it.scopedLive("two instances on one stateDir never open one store twice: a task finding its store open uses its own", () =>
    Effect.gen(function*() {
      const { applicationId, counter, input, output, stateDir, storePath } = yield* setup
      // Another process's task holding partition 0's store open (here: this test).
      const held = yield* StateStore.open(storePath(0))
      yield* held.replay([{ key: "a", value: "1" }])
      const second = yield* Effect.flip(Effect.scoped(StateStore.open(storePath(0))))
      assert.isTrue(StateStore.isLocked(second), second.message)

      yield* produceKeys(input, 0, 200)
      const instance = yield* startInstance(counter, { applicationId, stateDir })
      const restores = yield* restoresOf(instance.stats)
      assert.deepStrictEqual(restores.map((r) => r.mode), ["full", "full"])
      yield* caughtUp(applicationId, input)
      yield* instance.stop
      const { last, outputs } = yield* lastCounts(output)
      assert.strictEqual(outputs, 200)
      for (let i = 0; i < 200; i++) assert.strictEqual(last.get(key(i)), 1, key(i))
      // The held store was never written by the instance, and its temporary folder is gone.
      assert.strictEqual(yield* held.count, 1)
      const left = fs.readdirSync(path.dirname(storePath(0))).sort()
      assert.deepStrictEqual(left, ["0", "1"])
    }))

  it.scopedLive("a kept store unused for stateCleanupDelay is deleted at the next start; a recent one is kept", () =>
    Effect.gen(function*() {
      const { applicationId, counter, input, stateDir, storePath } = yield* setup
      yield* produceKeys(input, 0, 100)
      const first = yield* startInstance(counter, { applicationId, stateDir })
      yield* caughtUp(applicationId, input)
      yield* first.stop
      // Partition 1's store was last used two hours ago; partition 0's just now.
      const twoHoursAgo = new Date(Date.now() - 2 * 60 * 60 * 1000)
      fs.utimesSync(storePath(1), twoHoursAgo, twoHoursAgo)
      const second = yield* startInstance(counter, { applicationId, stateDir, stateCleanupDelay: Duration.hours(1) })
      const restores = yield* restoresOf(second.stats)
      assert.deepStrictEqual(
        [...second.stats.restores].sort(([a], [b]) => a - b).map(([, r]) => r.mode),
        ["tail", "full"],
        JSON.stringify(restores)
      )
      yield* second.stop
    }))
})
