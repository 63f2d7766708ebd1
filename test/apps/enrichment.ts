/**
 * App under test: the enrichment topology of `enrichmentTopology.ts` (orders re-keyed by customer,
 * left-joined with the customers table, then summed per region), run with `Topology.run`.
 *
 *   tsx test/apps/enrichment.ts | bun test/apps/enrichment.ts | deno run -A test/apps/enrichment.ts
 *
 * with SKEIN_APPLICATION_ID, KAFKA_BROKERS, SKEIN_DEAD_LETTER_TOPIC, CHAOS_ORDERS_TOPIC,
 * CHAOS_CUSTOMERS_TOPIC, CHAOS_ENRICHED_TOPIC, CHAOS_TOTALS_TOPIC (and any other SKEIN_* setting)
 * in the environment. Its status line every second carries `assigned`, as the windowed app's.
 */
import { Duration, Effect, Either, Metric, MetricState, Schedule } from "effect"
import { SkeinConfig, Topology } from "../../src/index.ts"
import { currentRuntime, runUntilSignalled, statusLine } from "./main.ts"
import { enrichmentSettings, enrichmentTopology } from "./enrichmentTopology.ts"

/** Running tasks per sub-topology (by its index in `names`) of this process, from the metric registry. */
const assigned = (names: ReadonlyArray<string>) =>
  Effect.map(Metric.snapshot, (pairs) => {
    const tasks = new Map<string, number>()
    for (const pair of pairs) {
      if (pair.metricKey.name !== "skein_assigned_partitions" || !MetricState.isGaugeState(pair.metricState)) continue
      const transformer = pair.metricKey.tags.find((tag) => tag.key === "transformer")?.value ?? "?"
      const index = names.indexOf(transformer)
      const label = index < 0 ? transformer : String(index)
      tasks.set(label, (tasks.get(label) ?? 0) + Number(pair.metricState.value))
    }
    return [...tasks].filter(([, n]) => n > 0).map(([label, n]) => `${label}:${n}`).sort()
  })

const program = Effect.gen(function*() {
  const topology = enrichmentTopology(yield* enrichmentSettings)
  // Sub-topologies are named by their sources, not by the application id.
  const names = Either.match(Topology.compile(topology, "chaos"), {
    onLeft: (): ReadonlyArray<string> => [],
    onRight: (compiled) => compiled.subTopologies.map((sub) => sub.name)
  })
  yield* statusLine({ event: "started", runtime: currentRuntime(), pid: process.pid, transformer: topology.name })
  yield* Effect.flatMap(assigned(names), (tasks) => statusLine({ event: "stats", runtime: currentRuntime(), pid: process.pid, assigned: tasks })).pipe(
    Effect.repeat(Schedule.spaced(Duration.seconds(1))),
    Effect.forkScoped
  )
  return yield* Topology.run(topology)
}).pipe(Effect.scoped, Effect.provide(SkeinConfig.layerConfig()))

runUntilSignalled(program)
