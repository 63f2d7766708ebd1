/**
 * The topology of test/apps/sourceChangelog.ts: orders left-joined with a
 * customers table whose topic is its changelog
 * (`KTable.from(topic, { sourceChangelog: true })`).
 */
import { Either, Schema } from "effect"
import { KStream, KTable, Topic, Topology } from "../../src/index.ts"
import type { Transformer } from "../../src/index.ts"

/** The enrichment topology: each order joined with its customer's value, or `null`. */
export const enrichment = (names: { readonly customers: string; readonly orders: string; readonly output: string }) => {
  const Customers = Topic.make({ name: names.customers, key: Schema.String, value: Schema.String })
  const Orders = Topic.make({ name: names.orders, key: Schema.String, value: Schema.String })
  const Output = Topic.make({ name: names.output, key: Schema.String, value: Schema.String })
  return Topology.make("enrich", [
    KStream.from(Orders).pipe(
      KStream.leftJoin(
        KTable.from(Customers, { name: "customers", sourceChangelog: true }),
        (order, customer) => `${order}+${customer ?? "null"}`,
        { name: "enrich" }
      ),
      KStream.to(Output)
    )
  ])
}

/** The topology's one sub-topology, compiled: its transformer. */
export const enrichmentTransformer = (names: { readonly customers: string; readonly orders: string; readonly output: string }) => {
  const compiled = Topology.compile(enrichment(names), "source-changelog")
  if (Either.isLeft(compiled)) throw new Error(compiled.left.message)
  // The compiled transformer is Transformer.Any: its inputs, state and errors erased by compile.
  return compiled.right.subTopologies[0]!.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>
}
