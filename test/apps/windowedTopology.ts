/**
 * The chaos harness's windowed app, as a Skein topology (the stream DSL): the driver's records
 * (and the harness's closers) grouped by a second key read from the value (`windowGroup`, through
 * a repartition topic), counted per second key in tumbling windows of event time (the records'
 * timestamps, which the driver sets) with a grace period, final results only (`emit:
 * "onWindowClose"`). Output: key `Windowed<string>` as JSON, value the count. A record late past
 * the grace is a `LateRecord` record error, which the app's rule sends to the dead letter topic:
 * the verifier sees every one of them.
 *
 * Shared by the app (`windowed.ts`) and the harness (`test/chaos/cli.ts`), which compiles it for
 * the names of its consumer groups and internal topics.
 */
import { Config, Schema } from "effect"
import { KGroupedStream, KStream, KTable, TimeWindowedKStream, TimeWindows, Topic, Topology, Windowed } from "../../src/index.ts"
import { InputValue, windowGroup } from "./model.ts"

/** What the windowed app reads and writes, and its windows. */
export interface WindowedSettings {
  readonly input: string
  /** The harness's closers: records late in event time that close every window still open at the end. */
  readonly closers: string
  readonly output: string
  readonly windowMs: number
  readonly graceMs: number
  /** Distinct second keys. */
  readonly groups: number
}

/** The settings from the environment (`CHAOS_*`). */
export const windowedSettings: Config.Config<WindowedSettings> = Config.all({
  input: Config.string("CHAOS_INPUT_TOPIC"),
  closers: Config.string("CHAOS_CLOSERS_TOPIC"),
  output: Config.string("CHAOS_OUTPUT_TOPIC"),
  windowMs: Config.integer("CHAOS_WINDOW_MS"),
  graceMs: Config.integer("CHAOS_GRACE_MS"),
  groups: Config.integer("CHAOS_GROUPS")
})

/** The name of the grouping (its repartition topic is `{applicationId}-by-group-repartition`). */
export const groupingName = "by-group"

/** The name of the windowed count (its state). */
export const countName = "counts"

/** The windowed app's topology. */
export const windowedTopology = (settings: WindowedSettings) => {
  const Input = Topic.make({ name: settings.input, key: Schema.String, value: Topic.json(InputValue) })
  const Closers = Topic.make({ name: settings.closers, key: Schema.String, value: Topic.json(InputValue) })
  const Output = Topic.make({ name: settings.output, key: Windowed.json(Schema.String), value: Topic.json(Schema.Number) })
  const counts = KStream.from(Input, Closers).pipe(
    KStream.groupBy((record) => windowGroup(record.value.v, settings.groups), {
      key: Schema.String,
      value: Topic.json(InputValue),
      name: groupingName
    }),
    KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace(settings.windowMs, settings.graceMs)),
    TimeWindowedKStream.count({ name: countName, emit: "onWindowClose", late: "error" }),
    KTable.toStream,
    KStream.to(Output)
  )
  return Topology.make("chaos-windowed", [counts])
}
