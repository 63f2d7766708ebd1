/**
 * The chaos harness's enrichment app, as a Skein topology (the stream DSL, issue 32): orders
 * (keyed by order id) re-keyed by their customer, repartitioned by it and left-joined with the
 * customers table (a stream-table join; the table read from the customers topic, which the
 * harness updates during the run), then left-joined with a global table of regions on the
 * customer version's region (the region's name: written before the apps start, so every joined
 * order must carry its last revision), written to the enriched topic; the joined orders grouped by
 * the region of the customer version they saw (a second repartition) and summed per region
 * (count, sum, last order id), the totals written on every update.
 *
 * So exactly-once covers a table's state and changelog, a join, two repartition topics and an
 * aggregation's state and changelog at once. Shared by the app (`enrichment.ts`) and the harness
 * (`test/chaos/cli.ts`), which compiles it for the names of its consumer groups and topics; the
 * verifier is `test/chaos/enrichmentVerifier.ts`.
 */
import { Config, Schema } from "effect"
import { GlobalKTable, KGroupedStream, KStream, KTable, Topic, Topology } from "../../src/index.ts"

/** A customer version: the table's value. `version` counts from 1 per customer; `region` is that version's. */
export const Customer = Schema.Struct({ customer: Schema.String, version: Schema.Number, region: Schema.String })
export type Customer = typeof Customer.Type

/**
 * An order (key `o<id>`): `minVersion` is the customer version the driver had seen committed in
 * the table's changelog before it wrote the order, the least version its join may see.
 */
export const Order = Schema.Struct({ id: Schema.Number, customer: Schema.String, amount: Schema.Number, minVersion: Schema.Number })
export type Order = typeof Order.Type

/** A region of the global table (key: the region): its name at `revision` (the driver writes many). */
export const Region = Schema.Struct({ region: Schema.String, revision: Schema.Number, name: Schema.String })
export type Region = typeof Region.Type

/**
 * An order joined with its customer (key: the customer): `version` 0 and `region` null without
 * one; `regionName` the region's name in the global table (null without one).
 */
export const Enriched = Schema.Struct({
  ...Order.fields,
  version: Schema.Number,
  region: Schema.NullOr(Schema.String),
  regionName: Schema.NullOr(Schema.String)
})
export type Enriched = typeof Enriched.Type

/** A region's running totals over the joined orders (key: the region, `none` for orders without a customer). */
export const Totals = Schema.Struct({ count: Schema.Number, sum: Schema.Number, id: Schema.Number })
export type Totals = typeof Totals.Type

/** What the enrichment app reads and writes. */
export interface EnrichmentSettings {
  readonly orders: string
  readonly customers: string
  /** The global table's topic: regions and their names. */
  readonly regions: string
  readonly enriched: string
  readonly totals: string
}

/** The settings from the environment (`CHAOS_*`). */
export const enrichmentSettings: Config.Config<EnrichmentSettings> = Config.all({
  orders: Config.string("CHAOS_ORDERS_TOPIC"),
  customers: Config.string("CHAOS_CUSTOMERS_TOPIC"),
  regions: Config.string("CHAOS_REGIONS_TOPIC"),
  enriched: Config.string("CHAOS_ENRICHED_TOPIC"),
  totals: Config.string("CHAOS_TOTALS_TOPIC")
})

/** The region key of an order joined without a customer. */
export const noRegion = "none"

/** The enrichment app's topology. */
export const enrichmentTopology = (settings: EnrichmentSettings) => {
  const Orders = Topic.make({ name: settings.orders, key: Schema.String, value: Topic.json(Order) })
  const Customers = Topic.make({ name: settings.customers, key: Schema.String, value: Topic.json(Customer) })
  const Regions = Topic.make({ name: settings.regions, key: Schema.String, value: Topic.json(Region) })
  const EnrichedOrders = Topic.make({ name: settings.enriched, key: Schema.String, value: Topic.json(Enriched) })
  const RegionTotals = Topic.make({ name: settings.totals, key: Schema.String, value: Topic.json(Totals) })
  const enriched = KStream.from(Orders).pipe(
    KStream.selectKey((order) => order.value.customer),
    // Re-keyed: the join repartitions the orders by customer first (`{applicationId}-by-customer-left-repartition`).
    KStream.leftJoin(
      KTable.from(Customers, { name: "customers" }),
      (order, customer) => ({ ...order, version: customer?.version ?? 0, region: customer?.region ?? null }),
      { key: Schema.String, value: Topic.json(Order), name: "by-customer" }
    ),
    // Every partition on every instance, loaded to its end before any order is joined.
    KStream.globalLeftJoin(
      GlobalKTable.from(Regions, { name: "regions" }),
      (order) => order.value.region,
      (order, region): Enriched => ({ ...order, regionName: region?.name ?? null })
    )
  )
  const toEnriched = enriched.pipe(KStream.to(EnrichedOrders))
  const totals = enriched.pipe(
    KStream.groupBy((order) => order.value.region ?? noRegion, { key: Schema.String, value: Topic.json(Enriched), name: "by-region" }),
    KGroupedStream.aggregate(
      (): Totals => ({ count: 0, sum: 0, id: -1 }),
      (totals, order): Totals => ({ count: totals.count + 1, sum: totals.sum + order.value.amount, id: order.value.id }),
      { state: Totals, name: "region-totals" }
    ),
    KTable.toStream,
    KStream.to(RegionTotals)
  )
  return Topology.make("chaos-enrichment", [toEnriched, totals])
}
