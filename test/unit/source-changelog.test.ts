/**
 * A table read with `sourceChangelog` (its topic is its changelog, Kafka
 * Streams' source-topic changelog), in process:
 *
 * - what a restore from the topic writes (`SourceChangelog.toWrite`) is what
 *   processing the same records stored (the changelog the TestDriver writes
 *   beside it): latest value per key, tombstones deleting, and a record that
 *   fails to decode (dead-lettered) or has no key (dropped) restored as
 *   nothing, unlike Kafka Streams (KAFKA-8037);
 * - where a restore starts: the kept store's checkpoint when it is of the
 *   topic and at or below the committed offset, else in full with why (a
 *   checkpoint beyond the committed offset: a commit the brokers lost);
 * - a commit's checkpoint is the topic's committed offset;
 * - the compile checks: only a plain table, its sub-topology's only state,
 *   read by stream-table joins only; each other shape fails with the fix.
 *
 * On a broker: test/streams/source-changelog.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Option, Schema } from "effect"
import { KGroupedStream, KStream, KTable, Topic, Topology, Transformer } from "../../src/index.ts"
import * as SourceChangelog from "../../src/internal/stores/SourceChangelog.ts"
import { TestDriver } from "../../src/testing/index.ts"

const Orders = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Schema.Number) })
const Customers = Topic.make({
  name: "customers",
  key: Schema.String,
  value: Topic.json(Schema.Struct({ region: Schema.String }))
})
const Addresses = Topic.make({ name: "addresses", key: Schema.String, value: Schema.String })
const Enriched = Topic.make({ name: "enriched", key: Schema.String, value: Schema.String })

const customers = (options: KTable.FromOptions = {}) => KTable.from(Customers, { name: "customers", sourceChangelog: true, ...options })

const enrich = (table = customers()) =>
  Topology.make("enrich", [
    KStream.from(Orders).pipe(
      KStream.leftJoin(table, (amount, c) => `${amount}@${c?.region ?? "none"}`, { name: "enrich" }),
      KStream.to(Enriched)
    )
  ])

type AnyTransformer = Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>

const compiled = (topology: Topology.Topology<never, never>) => {
  const result = Topology.compile(topology, "app")
  if (Either.isLeft(result)) throw new Error(result.left.message)
  // The compiled transformer is Transformer.Any: its inputs, state and errors erased by compile.
  return result.right.subTopologies.map((sub) => sub.transformer as AnyTransformer)
}

const failure = (topology: Topology.Topology<never, never>): string => {
  const result = Topology.compile(topology, "app")
  return Either.isLeft(result) ? result.left.message : "compiled"
}

const text = (b: Buffer | null) => b === null ? null : b.toString("utf8")
const raw = (key: string | null, value: string | null, timestamp: number, offset: number) => ({
  offset,
  key: key === null ? null : Buffer.from(key),
  value: value === null ? null : Buffer.from(value),
  timestamp
})

describe("a table whose source topic is its changelog", () => {
  it.scoped("a restore from the topic stores what processing its records stored; undecodable and keyless records store nothing", () =>
    Effect.gen(function*() {
      const [transformer] = compiled(enrich())
      assert.ok(transformer !== undefined && transformer.sourceChangelog !== undefined && Option.isSome(transformer.state))
      if (transformer === undefined || transformer.sourceChangelog === undefined || Option.isNone(transformer.state)) return
      assert.strictEqual(transformer.sourceChangelog.topic, "customers")
      const driver = yield* TestDriver.make(transformer, { deadLetterTopic: "dead-letters" })
      const records = [
        raw("c1", JSON.stringify({ region: "eu" }), 1, 0),
        raw("c2", JSON.stringify({ region: "us" }), 2, 1),
        raw("c1", "not json", 3, 2),
        raw("c2", null, 4, 3),
        raw(null, JSON.stringify({ region: "ap" }), 5, 4),
        raw("c3", JSON.stringify({ region: "ap" }), 6, 5),
        raw("c4", JSON.stringify({ region: "sa" }), 7, 6),
        raw("c4", JSON.stringify({ region: "sa2" }), 8, 7),
        raw("c5", JSON.stringify({ wrong: 1 }), 9, 8)
      ]
      for (const r of records) yield* driver.pipeRaw("customers", { key: r.key, value: r.value, timestamp: r.timestamp })
      // Processing: the undecodable records dead-lettered, the keyless one dropped.
      assert.deepStrictEqual((yield* driver.deadLetters).map((r) => text(r.key)), ["c1", "c5"])
      const processed = new Map((yield* driver.records(driver.changelogTopic)).map((r) => [text(r.key) ?? "", text(r.value)]))
      const restored = SourceChangelog.writes(records, SourceChangelog.toWrite(transformer.state.value, transformer.sourceChangelog))
      assert.deepStrictEqual(new Map(restored.map((w) => [w.key, w.value])), processed)
      assert.deepStrictEqual(restored.map((w) => w.key), ["c1", "c2", "c3", "c4"])
      assert.strictEqual(restored.find((w) => w.key === "c2")?.value, null, "a tombstone deletes")
      // The join sees the same table either way.
      yield* driver.pipeRaw("orders", { key: Buffer.from("c1"), value: Buffer.from("5"), timestamp: 10 })
      assert.deepStrictEqual((yield* driver.records("enriched")).map((r) => text(r.value)), ["5@eu"])
    }))

  it("a restore starts at the kept store's checkpoint when it is of the topic and at or below the committed offset", () => {
    const at = (offset: number, topic = "customers", partition = 0) => ({ topic, partition, offset })
    const of = { topic: "customers", partition: 0 }
    assert.deepStrictEqual(SourceChangelog.start(at(5), of, 0, 9), { mode: "tail", from: 5 })
    assert.deepStrictEqual(SourceChangelog.start(at(9), of, 0, 9), { mode: "tail", from: 9 })
    const full = (start: ReturnType<typeof SourceChangelog.start>) => start.mode === "full" ? start.reason : `tail ${start.from}`
    assert.include(full(SourceChangelog.start(at(10), of, 0, 9)), "beyond the committed offset 9")
    assert.include(full(SourceChangelog.start(at(10), of, 0, 9)), "lost or aborted by the brokers")
    assert.include(full(SourceChangelog.start(at(3), of, 4, 9)), "below the source topic's earliest offset 4")
    // A store from a run with a changelog topic: restored in full from the source topic.
    assert.include(full(SourceChangelog.start(at(3, "app-enrich-changelog"), of, 0, 9)), "the checkpoint is of app-enrich-changelog/0")
    assert.include(full(SourceChangelog.start(at(3, "customers", 1), of, 0, 9)), "the checkpoint is of customers/1")
    assert.include(full(SourceChangelog.start("missing", of, 0, 9)), "no local state")
    assert.include(full(SourceChangelog.start("unreadable", of, 0, 9)), "unreadable")
  })

  it("a commit's checkpoint is the source topic's committed offset, when the commit moved it", () => {
    const offsets = [{ topic: "orders", partition: 1, offset: 40 }, { topic: "customers", partition: 1, offset: 12 }]
    assert.deepStrictEqual(SourceChangelog.checkpointAfter("customers", 1, offsets), { topic: "customers", partition: 1, offset: 12 })
    assert.strictEqual(SourceChangelog.checkpointAfter("customers", 1, offsets.slice(0, 1)), undefined)
  })

  it("only a plain table, its sub-topology's only state, joined by streams only: each other shape fails with the fix", () => {
    // Off by default: the sub-topology writes a changelog topic.
    assert.strictEqual(compiled(enrich(KTable.from(Customers, { name: "customers" })))[0]!.sourceChangelog, undefined)
    // Through table operators (they run at lookup): still only stream joins.
    assert.ok(compiled(enrich(customers().pipe(KTable.filter((c) => c.value.region !== "ap"))))[0]!.sourceChangelog)

    const versioned = failure(enrich(customers({ versioned: { historyRetention: "1 hour" } })))
    assert.include(versioned, "is versioned and read with sourceChangelog")
    assert.include(versioned, "or read it without sourceChangelog")

    const toStream = failure(Topology.make("t", [
      customers().pipe(KTable.mapValues((c) => c.region), KTable.toStream, KStream.to(Enriched))
    ]))
    assert.include(toStream, "by something other than a stream-table join")
    assert.include(toStream, "Join it with streams only")

    const tableJoin = failure(Topology.make("t", [
      customers().pipe(
        KTable.join(KTable.from(Addresses, { name: "addresses" }), (c, a) => `${c.region}/${a}`, { name: "profile" }),
        KTable.toStream,
        KStream.to(Enriched)
      )
    ]))
    assert.include(tableJoin, "keeps other state (another table")

    const withAggregate = failure(Topology.make("t", [
      KStream.from(Orders).pipe(
        KStream.leftJoin(customers(), (amount, c) => `${amount}@${c?.region ?? "none"}`, { name: "enrich" }),
        KStream.groupByKey(),
        KGroupedStream.count({ name: "counts" }),
        KTable.toStream,
        KStream.mapValues((n) => String(n)),
        KStream.to(Enriched)
      )
    ]))
    assert.include(withAggregate, "keeps other state")
  })
})
