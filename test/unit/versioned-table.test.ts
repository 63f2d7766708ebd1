/**
 * Versioned tables (KIP-889) in process: the versions a key keeps and the
 * value a lookup as of a timestamp gets (`versionedTable.ts`), and a stream
 * joined with a versioned table through TestDriver: a stream record older
 * than a table update joins the value the table had then, one older than
 * the history retention joins nothing (the latest value never expires), a
 * table record older than the history is dropped; a versioned table read by
 * anything but a stream-table join fails to compile. The differential test
 * against Kafka Streams is test/streams/table-join-driver.test.ts
 * (stream-versioned-table-*).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import * as VersionedTable from "../../src/internal/streams/versionedTable.ts"
import { KStream, KTable, Topic, Topology, Transformer } from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"

const Orders = Topic.make({ name: "orders", key: Schema.String, value: Schema.String })
const Prices = Topic.make({ name: "prices", key: Schema.String, value: Schema.String })
const Output = Topic.make({ name: "output", key: Schema.String, value: Schema.String })

describe("versioned tables", () => {
  it("versions: out-of-order puts, tombstones, the history bound, the latest never expiring", () => {
    const history = 100
    let versions: ReadonlyArray<VersionedTable.Version<string>> = []
    let time = -1
    const put = (value: string | null, t: number) => {
      const next = VersionedTable.put(versions, value, t, time, history)
      if (next === undefined) return false
      versions = next
      time = Math.max(time, t)
      return true
    }
    put("a", 1000)
    put("c", 1200)
    assert.ok(put("b", 1150), "out of order, within the history")
    assert.deepStrictEqual(versions.map((v) => `${v.v}@${v.t}`), ["a@1000", "b@1150", "c@1200"])
    assert.strictEqual(VersionedTable.get(versions, 1160, time, history), "b")
    assert.strictEqual(VersionedTable.get(versions, 1099, time, history), null, "older than the history")
    assert.strictEqual(VersionedTable.get(versions, 5000, time, history), "c")
    assert.notOk(put("x", 1099), "older than stream time minus the history: dropped")
    put(null, 1250)
    // a is valid only before 1150, not after stream time minus the history (1250 - 100): gone.
    assert.deepStrictEqual(versions.map((v) => `${v.v}@${v.t}`), ["b@1150", "c@1200", "null@1250"])
    assert.strictEqual(VersionedTable.get(versions, 1260, time, history), null, "deleted")
    assert.strictEqual(VersionedTable.get(versions, 1210, time, history), "c")
    put("d", 2000)
    // Only the latest is left: older versions can answer nothing within the history any more.
    assert.deepStrictEqual(versions.map((v) => `${v.v}@${v.t}`), ["d@2000"])
    assert.strictEqual(VersionedTable.get(versions, 1950, time, history), null)
  })

  it.scoped("a stream record joins the table as of its own timestamp", () =>
    Effect.gen(function*() {
      const topology = Topology.make("priced", [
        KStream.from(Orders).pipe(
          KStream.leftJoin(KTable.from(Prices, { name: "prices", versioned: { historyRetention: "10 seconds" } }), (o, p) => `${o}@${p ?? "none"}`),
          KStream.to(Output)
        )
      ])
      const compiled = Topology.compile(topology, "shop")
      if (Either.isLeft(compiled)) return yield* Effect.die(compiled.left)
      // The compiled transformer is Transformer.Any: its inputs, state and errors erased by compile.
      const driver = yield* TestDriver.make(
        compiled.right.subTopologies[0]!.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>
      )
      yield* driver.pipe(Prices, "book", "10", { timestamp: 10_000 })
      yield* driver.pipe(Prices, "book", "12", { timestamp: 20_000 })
      yield* driver.pipe(Orders, "book", "o1", { timestamp: 15_000 })
      yield* driver.pipe(Orders, "book", "o2", { timestamp: 25_000 })
      yield* driver.pipe(Orders, "book", "o3", { timestamp: 9_000 })
      // The table's stream time moves with any key's record: 18 s is now older than its history (30 s - 10 s).
      yield* driver.pipe(Prices, "pen", "1", { timestamp: 30_000 })
      yield* driver.pipe(Orders, "book", "o4", { timestamp: 18_000 })
      // A price older than the history is dropped.
      yield* driver.pipe(Prices, "book", "99", { timestamp: 19_500 })
      yield* driver.pipe(Orders, "book", "o5", { timestamp: 40_000 })
      const out = yield* driver.outputs(Output)
      assert.deepStrictEqual(out.map((r) => r.value), ["o1@10", "o2@12", "o3@none", "o4@none", "o5@12"])
    }))

  it("a versioned table read by a table join or toStream fails to compile with the fix", () => {
    const prices = KTable.from(Prices, { name: "prices", versioned: { historyRetention: "1 second" } })
    const compiled = Topology.compile(Topology.make("t", [KStream.to(KTable.toStream(prices), Output)]), "shop")
    assert.ok(Either.isLeft(compiled))
    if (Either.isLeft(compiled)) assert.include(compiled.left.message, "can only be joined by a stream")
  })
})
