/**
 * Standby replicas: with `standbyReplicas: 1`, each of two instances keeps a
 * warm copy of the other's stores by tailing their changelog partitions
 * read_committed. When one instance stops, the survivor takes its
 * partitions and restores only its copies' lag (the changelog's end at the
 * task's start minus the standby's position), not the whole changelog; the
 * counts stay exact. With `standbyReplicas: 0` nothing of it runs.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Health, Topic, Transformer } from "../../src/index.ts"
import type { Runner } from "../../src/index.ts"
import {
  caughtUp,
  createTopics,
  eventually,
  groupsWithPrefix,
  offsets,
  produceRaw,
  readCommitted,
  startInstance,
  unique
} from "../helpers/kafka.ts"

const PARTITIONS = 2
const KEYS = 20_000
const MORE = 500

const setup = Effect.gen(function*() {
  const input = unique("standby-in")
  const output = unique("standby-out")
  const applicationId = unique("standby-app")
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
  const stateDir = () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-standby-"))
    return Effect.as(Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))), dir)
  }
  return { input, output, applicationId, counter, stateDir, changelog: Transformer.changelogTopic(applicationId, counter) }
})

const key = (i: number) => `k-${String(i).padStart(6, "0")}`

const produceKeys = (topic: string, from: number, until: number) =>
  produceRaw(topic, Array.from({ length: until - from }, (_, i) => ({ key: key(from + i), value: "1" })), 5000)

/** Both instances run half the tasks each. */
const split = (a: Runner.Stats, b: Runner.Stats) =>
  eventually(
    Effect.sync(() =>
      a.assigned.size === PARTITIONS / 2 && b.assigned.size === PARTITIONS / 2 && a.pending.size === 0 &&
      b.pending.size === 0
    ),
    { what: "each instance to run half the tasks", timeout: 90_000 }
  )

/**
 * Every standby of `stats` is of a partition `other` runs, and at its changelog partition's end.
 * Its `lag` of 0 alone is not enough: a run read lag 0 at position 10002 with the changelog's end
 * at 10031, and the standby went on to 10031 after the test had taken its position.
 */
const warm = (stats: Runner.Stats, other: Runner.Stats, changelog: string) =>
  Effect.zipWith(Health.snapshot(stats), offsets(changelog), (s, ends) => {
    const end = new Map(ends.map((o) => [o.partition, o.lastStable]))
    return s.standbys.length === other.assigned.size &&
      s.standbys.every((standby) =>
        other.assigned.has(standby.partition) && standby.lag === 0 && standby.position === end.get(standby.partition)
      )
  })

/** The last count per key and the input's count per key, both read back read_committed. */
const recount = (input: string, output: string) =>
  Effect.gen(function*() {
    const expected = new Map<string, number>()
    for (const r of yield* readCommitted(input)) expected.set(r.key ?? "", (expected.get(r.key ?? "") ?? 0) + 1)
    const last = new Map<string, number>()
    const records = yield* readCommitted(output)
    for (const r of [...records].sort((x, y) => x.partition - y.partition || x.offset - y.offset)) {
      last.set(r.key ?? "", Number(r.value))
    }
    return { expected, last, outputs: records.length }
  })

describe("standby replicas", () => {
  it.scopedLive("a task moved to the instance with a warm standby restores only the standby's lag", () =>
    Effect.gen(function*() {
      const { applicationId, changelog, counter, input, output, stateDir } = yield* setup
      const options = { applicationId, standbyReplicas: 1 }
      const a = yield* startInstance(counter, { ...options, stateDir: yield* stateDir() })
      const b = yield* startInstance(counter, { ...options, stateDir: yield* stateDir() })
      yield* split(a.stats, b.stats)

      yield* produceKeys(input, 0, KEYS)
      yield* caughtUp(applicationId, input, 120_000)
      yield* eventually(Effect.zipWith(warm(a.stats, b.stats, changelog), warm(b.stats, a.stats, changelog), (x, y) => x && y), {
        what: "each instance's standbys of the other's partitions to catch up",
        timeout: 90_000
      })
      const moved = [...b.stats.assigned].sort()
      const positions = new Map((yield* Health.snapshot(a.stats)).standbys.map((s) => [s.partition, s.position]))
      const changelogSize = (yield* offsets(changelog)).reduce((n, o) => n + o.lastStable, 0)

      yield* b.stop
      yield* eventually(Effect.sync(() => a.stats.restores.size === PARTITIONS && a.stats.pending.size === 0), {
        what: "the surviving instance to run every task",
        timeout: 90_000
      })
      const snapshot = yield* Health.snapshot(a.stats)
      assert.deepStrictEqual(snapshot.standbys, [], "a lone instance keeps no standby")
      for (const partition of moved) {
        const restore = snapshot.restores.find((r) => r.partition === partition)
        if (restore === undefined) return assert.fail(`partition ${partition} moved to the survivor`)
        const lag = restore.until - (positions.get(partition) ?? -1)
        yield* Effect.log(
          `partition ${partition}: standby at ${positions.get(partition)}, restored ${restore.records} records ` +
            `(${restore.mode}: ${restore.reason}) from ${restore.from} to ${restore.until}; ` +
            `the changelog holds ${changelogSize} offsets`
        )
        assert.strictEqual(restore.mode, "tail", JSON.stringify(restore))
        assert.strictEqual(restore.from, positions.get(partition), "restored from the standby's position")
        assert.isAtMost(restore.records, lag, "at most the standby's lag (end at the start minus its position)")
        assert.isBelow(restore.records, changelogSize * 0.05, JSON.stringify(restore))
      }

      yield* produceKeys(input, 0, MORE)
      yield* caughtUp(applicationId, input)
      const after = yield* Health.snapshot(a.stats)
      for (const r of after.restores) assert.isAbove(r.checkpointLag, 0, `checkpoint lag of task ${r.partition} after a commit`)
      yield* a.stop
      const { expected, last, outputs } = yield* recount(input, output)
      assert.strictEqual(outputs, KEYS + MORE)
      assert.strictEqual(last.size, expected.size)
      for (const [k, n] of expected) assert.strictEqual(last.get(k), n, k)
      assert.strictEqual(a.stats.standbyFailures + b.stats.standbyFailures, 0)
    }), { timeout: 300_000 })

  it.scopedLive("a standby copy behind its changelog restores exactly its lag when its partition moves there", () =>
    Effect.gen(function*() {
      const { applicationId, changelog, counter, input, output, stateDir } = yield* setup
      const options = { applicationId, standbyReplicas: 1 }
      const dirA = yield* stateDir()
      const a = yield* startInstance(counter, { ...options, stateDir: dirA })
      const b = yield* startInstance(counter, { ...options, stateDir: yield* stateDir() })
      yield* split(a.stats, b.stats)
      yield* produceKeys(input, 0, KEYS / 4)
      yield* caughtUp(applicationId, input, 120_000)
      yield* eventually(warm(a.stats, b.stats, changelog), { what: "a's standbys of b's partitions to catch up", timeout: 90_000 })
      const moved = [...b.stats.assigned].sort()
      const positions = new Map((yield* Health.snapshot(a.stats)).standbys.map((s) => [s.partition, s.position]))

      // a stops with its standby copies at `positions`; b goes on alone and writes past them.
      yield* a.stop
      yield* produceKeys(input, 0, MORE)
      yield* caughtUp(applicationId, input, 120_000)
      yield* b.stop
      const ends = new Map((yield* offsets(changelog)).map((o) => [o.partition, o.lastStable]))
      const changelogSize = [...ends.values()].reduce((n, end) => n + end, 0)

      // a starts again on its own stateDir and takes every task: b's from a's standby copies.
      const again = yield* startInstance(counter, { ...options, stateDir: dirA })
      yield* eventually(Effect.sync(() => again.stats.restores.size === PARTITIONS && again.stats.pending.size === 0), {
        what: "the restarted instance to run every task",
        timeout: 90_000
      })
      const snapshot = yield* Health.snapshot(again.stats)
      for (const partition of moved) {
        const restore = snapshot.restores.find((r) => r.partition === partition)
        const position = positions.get(partition)
        if (restore === undefined || position === undefined) return assert.fail(`partition ${partition} has a standby and a restore`)
        yield* Effect.log(
          `partition ${partition}: standby copy at ${position}, changelog end ${ends.get(partition)}; restored ` +
            `${restore.records} records (${restore.mode}: ${restore.reason}) from ${restore.from} to ${restore.until}`
        )
        assert.strictEqual(restore.mode, "tail", JSON.stringify(restore))
        assert.strictEqual(restore.from, position, "restored from the standby copy's position")
        assert.strictEqual(restore.until, ends.get(partition), "to the changelog's end")
        assert.isAbove(restore.records, 0, "the copy was behind: its lag is restored")
        assert.isAtMost(restore.records, restore.until - position, "no more than the lag")
        assert.isBelow(restore.records, changelogSize * 0.1, JSON.stringify(restore))
      }
      yield* again.stop
      const { expected, last, outputs } = yield* recount(input, output)
      assert.strictEqual(outputs, KEYS / 4 + MORE)
      for (const [k, n] of expected) assert.strictEqual(last.get(k), n, k)
    }), { timeout: 300_000 })

  it.scopedLive("with standbyReplicas 0 nothing of it runs: no standby, no standby reader", () =>
    Effect.gen(function*() {
      const { applicationId, counter, input, stateDir } = yield* setup
      const a = yield* startInstance(counter, { applicationId, stateDir: yield* stateDir() })
      const b = yield* startInstance(counter, { applicationId, stateDir: yield* stateDir() })
      yield* split(a.stats, b.stats)
      yield* produceKeys(input, 0, 2_000)
      yield* caughtUp(applicationId, input)
      for (const stats of [a.stats, b.stats]) {
        const snapshot = yield* Health.snapshot(stats)
        assert.deepStrictEqual(snapshot.standbys, [])
        assert.strictEqual(snapshot.counters.standbyFailures, 0)
        assert.notInclude(Health.prometheus(stats), "skein_standby_lag_records{")
      }
      assert.deepStrictEqual(yield* groupsWithPrefix(`${applicationId}-standby-`), [])
    }), { timeout: 180_000 })
})
