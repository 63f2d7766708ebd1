/**
 * App under test: the windowed topology of `windowedTopology.ts` (groupBy to a second key through
 * a repartition topic, tumbling count, final results only), run with `Topology.run`. A late
 * record goes to the dead letter topic (`SKEIN_DEAD_LETTER_TOPIC`) by the app's rule.
 *
 *   tsx test/apps/windowed.ts | bun test/apps/windowed.ts | deno run -A test/apps/windowed.ts
 *
 * with SKEIN_APPLICATION_ID, KAFKA_BROKERS, SKEIN_DEAD_LETTER_TOPIC, CHAOS_INPUT_TOPIC,
 * CHAOS_CLOSERS_TOPIC, CHAOS_OUTPUT_TOPIC, CHAOS_WINDOW_MS, CHAOS_GRACE_MS, CHAOS_GROUPS (and any
 * other SKEIN_* setting) in the environment. Its status line every second carries `assigned`: per
 * sub-topology with running tasks, `<its index>:<tasks>`, from the runtime's
 * `skein_assigned_partitions` gauge.
 */
import { Duration, Effect, Either, Metric, MetricState, Schedule } from "effect"
import { ErrorRule, SkeinConfig, Topology } from "../../src/index.ts"
import { currentRuntime, runUntilSignalled, statusLine } from "./main.ts"
import { windowedSettings, windowedTopology } from "./windowedTopology.ts"

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
  const settings = yield* windowedSettings
  const topology = windowedTopology(settings)
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
  return yield* Topology.run(topology, { rules: [ErrorRule.tagged("LateRecord", { then: "dlq" })] })
}).pipe(Effect.scoped, Effect.provide(SkeinConfig.layerConfig()))

runUntilSignalled(program)
