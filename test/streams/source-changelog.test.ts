/**
 * A table whose compacted source topic is its changelog
 * (`KTable.from(topic, { sourceChangelog: true })`, Kafka Streams'
 * source-topic changelog) on a broker, one partition, four runs of the
 * enrichment sub-topology (orders left-joined with customers):
 *
 * 1. the table is loaded (a tombstone, an update and a record that is not
 *    JSON: dead-lettered) and orders are joined; no changelog topic is
 *    created;
 * 2. stopped, two customer updates produced, restarted on an empty state
 *    directory: the store is restored from the customers topic up to the
 *    committed offset, not to its end; the updates are then processed, and
 *    the next orders join exactly what the first ones did, the two updates
 *    aside (the undecodable record is not restored either);
 * 3. restarted on its kept store: nothing restored (its checkpoint is the
 *    committed offset);
 * 4. the committed offset moved back below the kept store's checkpoint (a
 *    commit the brokers lost, test/chaos/FINDINGS.md #6): the store is not
 *    kept, restored in full up to the committed offset; the joins are the same.
 *
 * A standby (`standbyReplicas: 1`, a second instance) follows the topic up
 * to the active task's committed offset; when the active instance stops,
 * the survivor's task reads nothing (its standby's checkpoint is the
 * committed offset) and joins as before.
 *
 * And the startup checks, before any record is read: a source topic that is
 * not compacted, a changelog topic left by a run without sourceChangelog,
 * and a table whose changelog topic is missing while its group has committed
 * offsets on its topic each fail with a `ConfigurationError` naming the
 * table and the fix. In process: test/unit/source-changelog.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import type { Runner } from "../../src/index.ts"
import { KStream, KTable, SkeinConfig, Topic, Topology, Transformer } from "../../src/index.ts"
import { applicationIdOf } from "../../src/internal/runtime/runAll.ts"
import {
  brokers,
  caughtUp,
  createTopics,
  eventually,
  groupOffsets,
  listTopics,
  offsets,
  produceRaw,
  readCommitted,
  setGroupOffsets,
  startInstance,
  unique
} from "../helpers/kafka.ts"
import { tempDir } from "../helpers/tempDir.ts"

const enrichOf = (customers: string, orders: string, output: string, sourceChangelog: boolean) => {
  const Customers = Topic.make({ name: customers, key: Schema.String, value: Topic.json(Schema.String) })
  const Orders = Topic.make({ name: orders, key: Schema.String, value: Schema.String })
  const Output = Topic.make({ name: output, key: Schema.String, value: Schema.String })
  return Topology.make("enrich", [
    KStream.from(Orders).pipe(
      KStream.leftJoin(
        KTable.from(Customers, { name: "customers", sourceChangelog }),
        (order, customer) => `${order}+${customer ?? "null"}`,
        { name: "enrich" }
      ),
      KStream.to(Output)
    )
  ])
}

/** The enrichment sub-topology, compiled for `applicationId`, and the group it runs in. */
const subTopologyOf = (topology: Topology.Topology<never, never>, applicationId: string) => {
  const compiled = Topology.compile(topology, applicationId)
  if (Either.isLeft(compiled)) throw new Error(compiled.left.message)
  const sub = compiled.right.subTopologies[0]!
  // The compiled transformer is Transformer.Any: its inputs, state and errors erased by compile.
  const transformer = sub.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>
  return { transformer, groupId: applicationIdOf(applicationId, sub) }
}

/** How task 0 restored, once it started. */
const restoreOf = (stats: Runner.Stats) =>
  Effect.gen(function*() {
    yield* eventually(Effect.sync(() => stats.restores.has(0)), { what: "task 0 to start" })
    return stats.restores.get(0)!
  })

const customerKeys = Array.from({ length: 12 }, (_, i) => `c${i}`)

describe("streams: a table whose source topic is its changelog, on a broker", () => {
  it.scopedLive("no changelog topic; restored from the topic up to the committed offset, not its end; the same joins", () =>
    Effect.gen(function*() {
      const applicationId = unique("source-cl-app")
      const customers = unique("customers")
      const orders = unique("orders")
      const output = unique("enriched")
      const deadLetters = unique("dead-letters")
      yield* createTopics([
        { name: customers, partitions: 1, config: { "cleanup.policy": "compact" } },
        { name: orders, partitions: 1 },
        { name: output, partitions: 1 },
        { name: deadLetters, partitions: 1 }
      ])
      const { groupId, transformer } = subTopologyOf(enrichOf(customers, orders, output, true), applicationId)
      const changelog = Transformer.changelogTopic(groupId, transformer)
      const run = (stateDir: string) => startInstance(transformer, { applicationId: groupId, stateDir, deadLetterTopic: deadLetters })
      const results = Effect.map(readCommitted(output), (records) => records.map((r) => `${r.key}=${r.value}`))
      /** Produces one order per customer key, tagged `round`, and waits for their joins: returned sorted. */
      const joinRound = (round: string) =>
        Effect.gen(function*() {
          const before = (yield* results).length
          yield* produceRaw(orders, customerKeys.map((key) => ({ key, value: round })))
          yield* eventually(Effect.map(results, (all) => all.length >= before + customerKeys.length), {
            timeout: 60_000,
            what: `the ${round} orders joined`
          })
          const all = yield* results
          assert.strictEqual(all.length, before + customerKeys.length, "each order joined once")
          return all.slice(before).map((r) => r.replace(`=${round}+`, "=")).sort()
        })

      yield* produceRaw(customers, [
        ...Array.from({ length: 10 }, (_, i) => ({ key: `c${i}`, value: JSON.stringify(`r${i}`) })),
        { key: "c3", value: null },
        { key: "c4", value: JSON.stringify("r4b") },
        { key: "c5", value: "not json" }
      ])
      const first = yield* run(yield* tempDir("skein-source-cl-"))
      assert.deepStrictEqual((yield* restoreOf(first.stats)).records, 0)
      yield* caughtUp(groupId, customers)
      const expected = customerKeys.map((key) => {
        const i = Number(key.slice(1))
        return `${key}=${i === 3 || i >= 10 ? "null" : i === 4 ? "r4b" : `r${i}`}`
      }).sort()
      assert.deepStrictEqual(yield* joinRound("first"), expected)
      assert.deepStrictEqual((yield* readCommitted(deadLetters)).map((r) => `${r.key}=${r.value}`), ["c5=not json"])
      assert.notInclude(yield* listTopics, changelog, "no changelog topic is created")
      yield* first.stop

      // Produced while no instance runs: after the committed offset, so processed, not restored.
      const committed = (yield* groupOffsets(groupId, customers)).get(0) ?? -1
      yield* produceRaw(customers, [{ key: "c1", value: JSON.stringify("r1b") }, { key: "c11", value: JSON.stringify("r11") }])
      const end = (yield* offsets(customers))[0]!.lastStable
      assert.isAbove(end, committed)
      const emptyDir = yield* tempDir("skein-source-cl-")
      const second = yield* run(emptyDir)
      const fresh = yield* restoreOf(second.stats)
      assert.deepStrictEqual(
        [fresh.mode, fresh.from, fresh.until, fresh.records],
        ["full", 0, committed, committed],
        `restored up to the committed offset ${committed}, not the end ${end}: ${JSON.stringify(fresh)}`
      )
      yield* caughtUp(groupId, customers)
      const updated = expected.map((r) => r === "c1=r1" ? "c1=r1b" : r === "c11=null" ? "c11=r11" : r).sort()
      assert.deepStrictEqual(yield* joinRound("second"), updated)
      assert.strictEqual((yield* readCommitted(deadLetters)).length, 1, "the undecodable record is not dead-lettered again")
      yield* second.stop

      // Its kept store: its checkpoint is the committed offset, nothing to read.
      const third = yield* run(emptyDir)
      const kept = yield* restoreOf(third.stats)
      assert.deepStrictEqual([kept.mode, kept.records, kept.until], ["tail", 0, end], JSON.stringify(kept))
      yield* third.stop

      // A commit the brokers lost: the committed offset below the kept store's checkpoint.
      yield* setGroupOffsets(groupId, customers, [{ partition: 0, offset: committed }])
      const fourth = yield* run(emptyDir)
      const lost = yield* restoreOf(fourth.stats)
      assert.deepStrictEqual([lost.mode, lost.from, lost.until, lost.records], ["full", 0, committed, committed], JSON.stringify(lost))
      assert.include(lost.reason, `beyond the committed offset ${committed}`)
      yield* caughtUp(groupId, customers)
      assert.deepStrictEqual(yield* joinRound("fourth"), updated)
      assert.notInclude(yield* listTopics, changelog, "still no changelog topic")
    }), 180_000)

  it.scopedLive("a standby follows the topic up to the committed offset; the task moved to it restores nothing", () =>
    Effect.gen(function*() {
      const applicationId = unique("source-cl-standby")
      const customers = unique("customers")
      const orders = unique("orders")
      const output = unique("enriched")
      yield* createTopics([
        { name: customers, partitions: 1, config: { "cleanup.policy": "compact" } },
        { name: orders, partitions: 1 },
        { name: output, partitions: 1 }
      ])
      const { groupId, transformer } = subTopologyOf(enrichOf(customers, orders, output, true), applicationId)
      const run = (stateDir: string) => startInstance(transformer, { applicationId: groupId, stateDir, standbyReplicas: 1 })
      const first = yield* run(yield* tempDir("skein-source-cl-"))
      yield* restoreOf(first.stats)
      const second = yield* run(yield* tempDir("skein-source-cl-"))
      const instances = [first, second]
      const roles = () => {
        const active = instances.find((i) => i.stats.assigned.has(0) && i.stats.restores.has(0))
        const standby = instances.find((i) => i !== active && i.stats.standbys.has(0))
        return active === undefined || standby === undefined ? undefined : { active, standby }
      }
      yield* eventually(Effect.sync(() => roles() !== undefined), { what: "task 0 on one instance, its standby on the other" })
      const { active, standby } = roles()!

      yield* produceRaw(customers, Array.from({ length: 10 }, (_, i) => ({ key: `c${i}`, value: JSON.stringify(`r${i}`) })))
      yield* caughtUp(groupId, customers)
      const committed = (yield* groupOffsets(groupId, customers)).get(0) ?? -1
      yield* eventually(Effect.sync(() => standby.stats.standbys.get(0)?.position === committed), {
        what: `the standby at the committed offset ${committed}`
      })

      const before = standby.stats.restores.get(0)
      yield* active.stop
      const movedRestore = () => standby.stats.assigned.has(0) ? standby.stats.restores.get(0) : undefined
      yield* eventually(Effect.sync(() => movedRestore() !== undefined && movedRestore() !== before), {
        what: "the task moved to the standby's instance",
        timeout: 60_000
      })
      const moved = movedRestore()!
      assert.deepStrictEqual([moved.mode, moved.from, moved.until, moved.records], ["tail", committed, committed, 0], JSON.stringify(moved))
      yield* produceRaw(orders, customerKeys.slice(0, 10).map((key) => ({ key, value: "o" })))
      yield* eventually(Effect.map(readCommitted(output), (records) => records.length >= 10), { what: "10 joined orders" })
      assert.deepStrictEqual(
        (yield* readCommitted(output)).map((r) => `${r.key}=${r.value}`).sort(),
        Array.from({ length: 10 }, (_, i) => `c${i}=o+r${i}`).sort()
      )
      assert.strictEqual(first.stats.standbyFailures + second.stats.standbyFailures, 0)
    }), 120_000)

  it.scopedLive("startup fails naming the table: a source topic not compacted, a changelog left behind, a changelog missing", () =>
    Effect.gen(function*() {
      const applicationId = unique("source-cl-checks")
      const customers = unique("customers")
      const compacted = unique("customers-compacted")
      const orders = unique("orders")
      const output = unique("enriched")
      yield* createTopics([
        { name: customers, partitions: 1, config: { "cleanup.policy": "delete" } },
        { name: compacted, partitions: 1, config: { "cleanup.policy": "compact" } },
        { name: orders, partitions: 1 },
        { name: output, partitions: 1 }
      ])
      const failure = (topology: Topology.Topology<never, never>) =>
        Topology.run(topology).pipe(
          Effect.provide(SkeinConfig.layer({ applicationId, brokers: brokers() })),
          Effect.timeout("60 seconds"),
          Effect.flip,
          Effect.map((error) => error.message)
        )

      const deleting = yield* failure(enrichOf(customers, orders, output, true))
      assert.include(deleting, `its topic ${customers} is not compacted (cleanup.policy=delete)`)
      assert.include(deleting, "--add-config cleanup.policy=compact")

      // A changelog topic from a run without sourceChangelog.
      const { groupId, transformer } = subTopologyOf(enrichOf(compacted, orders, output, true), applicationId)
      const changelog = Transformer.changelogTopic(groupId, transformer)
      yield* createTopics([{ name: changelog, partitions: 1, config: { "cleanup.policy": "compact" } }])
      const leftBehind = yield* failure(enrichOf(compacted, orders, output, true))
      assert.include(leftBehind, `The table "customers" is read with sourceChangelog`)
      assert.include(leftBehind, `changelog topic ${changelog} exists`)
      assert.include(leftBehind, `delete ${changelog}`)

      // Back without sourceChangelog after the changelog topic was deleted, the group past the table's records.
      const other = unique("source-cl-off")
      const off = subTopologyOf(enrichOf(compacted, orders, output, false), other)
      yield* produceRaw(compacted, [{ key: "c1", value: JSON.stringify("r1") }])
      yield* setGroupOffsets(off.groupId, compacted, [{ partition: 0, offset: 1 }])
      const missing = yield* Topology.run(enrichOf(compacted, orders, output, false)).pipe(
        Effect.provide(SkeinConfig.layer({ applicationId: other, brokers: brokers() })),
        Effect.timeout("60 seconds"),
        Effect.flip,
        Effect.map((error) => error.message)
      )
      const offChangelog = Transformer.changelogTopic(off.groupId, off.transformer)
      assert.include(missing, `The table "customers" is kept in the changelog topic ${offChangelog}, which does not exist`)
      assert.include(missing, "sourceChangelog: true")
      assert.notInclude(yield* listTopics, offChangelog, "nothing was created")
    }), 120_000)
})
