import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Option, Schema } from "effect"
import { KGroupedStream, KStream, KTable, Topic, Topology, Transformer } from "../../src/index.ts"

const Order = Schema.Struct({ customer: Schema.String, amount: Schema.Number })
const Orders = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Order) })
const Counts = Topic.make({ name: "counts", key: Schema.String, value: Topic.json(Schema.Number) })
const Big = Topic.make({ name: "big-orders", key: Schema.String, value: Topic.json(Order) })

/** A record of `topic` as a transformer receives it. */
const input = <K, V>(topic: Topic.Topic<K, V>, key: K | null, value: V, timestamp = 1_000): Transformer.InputRecord<K, V> => ({
  topic: topic.name,
  partition: 0,
  offset: 0,
  key,
  value,
  headers: {},
  rawHeaders: [],
  timestamp
})

const countsPerCustomer = () => {
  const orders = KStream.from(Orders)
  const big = orders.pipe(KStream.filter((order) => order.value.amount >= 100, { name: "big" }), KStream.to(Big))
  const counts = orders.pipe(
    KStream.groupBy((order) => order.value.customer, { key: Schema.String, value: Topic.json(Order), name: "by-customer" }),
    KGroupedStream.count({ name: "order-counts" }),
    KTable.toStream,
    KStream.to(Counts)
  )
  return Topology.make("orders", [big, counts])
}

describe("Topology", () => {
  it("cuts a topology at its repartition into two sub-topologies, one transformer each", () => {
    const compiled = Either.getOrThrow(Topology.compile(countsPerCustomer(), "shop"))
    assert.deepStrictEqual(compiled.subTopologies.map((s) => [s.name, s.inputs]), [
      ["orders", ["orders"]],
      ["by-customer", ["shop-by-customer-repartition"]]
    ])
    assert.deepStrictEqual(compiled.internalTopics.map((t) => [t.name, t.partitions, t.upstreamInputs]), [
      ["shop-by-customer-repartition", undefined, ["orders"]]
    ])
  })

  it.effect("the upstream transformer writes big orders and the re-keyed record; the downstream one counts per key", () =>
    Effect.gen(function*() {
      const compiled = Either.getOrThrow(Topology.compile(countsPerCustomer(), "shop"))
      const [upstream, downstream] = compiled.subTopologies.map((s) => s.transformer as unknown as Transformer.Transformer<ReadonlyArray<Topic.Any>, { readonly value: number; readonly timestamp: number }, unknown, never>)
      const order = { customer: "alice", amount: 150 }
      const up = yield* upstream!.transform(input(Orders, "o-1", order) as never, Option.none())
      const encoded = (up.emit ?? []).map((r) => Either.getOrThrow(r.encode()))
      assert.deepStrictEqual(encoded.map((r) => [r.topic, r.key, r.value, r.timestamp]), [
        ["big-orders", "o-1", JSON.stringify(order), 1_000],
        ["shop-by-customer-repartition", "alice", JSON.stringify(order), 1_000]
      ])
      const repartitioned = { ...input(Orders, "alice", order), topic: "shop-by-customer-repartition" }
      const first = yield* downstream!.transform(repartitioned as never, Option.none())
      assert.deepStrictEqual(first.state, Transformer.set({ value: 1, timestamp: 1_000 }))
      // An older record: the count's update keeps the largest timestamp seen (as Kafka Streams' does).
      const second = yield* downstream!.transform({ ...repartitioned, timestamp: 500 } as never, Option.some({ value: 1, timestamp: 1_000 }))
      assert.deepStrictEqual(second.state, Transformer.set({ value: 2, timestamp: 1_000 }))
      assert.deepStrictEqual((second.emit ?? []).map((r) => Either.getOrThrow(r.encode())).map((r) => [r.topic, r.key, r.value, r.timestamp]), [
        ["counts", "alice", "2", 1_000]
      ])
    }))

  it("describe names every operator, the sub-topologies and the internal topic", () => {
    const text = Topology.describe(countsPerCustomer(), "shop")
    console.log(text)
    assert.include(text, "Sub-topology 0: orders (consumer group shop-orders)")
    assert.include(text, "Sub-topology 1: by-customer (consumer group shop-by-customer)")
    assert.include(text, "--> by-customer (writes shop-by-customer-repartition)")
    assert.include(text, "Source by-customer (topics: shop-by-customer-repartition)")
    assert.include(text, "Processor order-counts (count; state: order-counts)")
  })

  it("a groupByKey after a key change without codecs fails with the fix", () => {
    const topology = Topology.make("bad", [
      KStream.from(Orders).pipe(
        KStream.selectKey((order) => order.value.customer),
        KStream.groupByKey(),
        KGroupedStream.count(),
        KTable.toStream,
        KStream.to(Counts)
      )
    ])
    const error = Either.getLeft(Topology.compile(topology, "shop"))
    assert.isTrue(Option.isSome(error))
    assert.include(Option.getOrThrow(error).message, "groupByKey({ key: ..., value: ... })")
  })
})
