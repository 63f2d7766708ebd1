/**
 * A topology: the streams an application writes to topics (`KStream.to`),
 * run as Skein transformers. It is cut at its repartitions into
 * sub-topologies (Kafka Streams' term); each runs as one transformer with
 * its own consumer group `{applicationId}-{sub-topology}`, transactional ids
 * and state, so every guarantee of a transformer holds for each: one
 * transaction commits a record's outputs (to topics and to repartition
 * topics), its state changes and its input offsets together.
 *
 * `describe` prints the sub-topologies, their operators and internal topics
 * (Kafka Streams' `Topology.describe()`). Name what owns state or an internal
 * topic (`{ name }` on `groupBy`, `groupByKey`, `repartition`, `count`,
 * `reduce`, `aggregate`): a generated name follows the topology's shape, and
 * changes when the topology does.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Runner, SkeinConfig, Topology } from "skein"
 *
 * const topology = Topology.make("orders", [counts]) // streams ending in KStream.to(...)
 * console.log(Topology.describe(topology, "shop"))
 * Topology.run(topology).pipe(Effect.provide(SkeinConfig.layerConfig()), Runner.runMain)
 * ```
 *
 * @since 0.4.0
 */
import { Duration, Effect, Either, Option } from "effect"
import type { Scope } from "effect"
import * as CoPartitioning from "./internal/streams/coPartitioning.ts"
import * as Compile from "./internal/streams/compile.ts"
import * as Graph from "./internal/streams/graph.ts"
import * as Admin from "./internal/kafka/admin.ts"
import * as GlobalTableLoader from "./internal/runtime/GlobalTableLoader.ts"
import { applicationIdOf } from "./internal/runtime/runAll.ts"
import * as RepartitionPurge from "./internal/streams/repartitionPurge.ts"
import * as TableChangelogs from "./internal/streams/tableChangelogs.ts"
import { makeKafka } from "./internal/kafka/client.ts"
import type { Sink } from "./KStream.ts"
import * as Runner from "./Runner.ts"
import { SkeinConfig } from "./SkeinConfig.ts"
import * as SessionWindows from "./SessionWindows.ts"
import * as SlidingWindows from "./SlidingWindows.ts"
import type { InvalidTimestamp, LateRecord, OperatorFailed, RunnerError, TimestampOutOfRange } from "./SkeinError.ts"
import { ConfigurationError } from "./SkeinError.ts"
import type * as Transformer from "./Transformer.ts"

/**
 * @since 0.4.0
 * @category symbols
 */
export const TypeId: unique symbol = Symbol.for("skein/Topology")

/**
 * @since 0.4.0
 * @category symbols
 */
export type TypeId = typeof TypeId

/**
 * Streams written to topics, run together. Its operators may fail with `E`
 * and need `R`.
 *
 * @since 0.4.0
 * @category models
 */
export interface Topology<out E = never, out R = never> {
  readonly [TypeId]: { readonly _E: (_: never) => E; readonly _R: (_: never) => R }
  readonly name: string
  /** @internal */
  readonly sinks: ReadonlyArray<Graph.Sink>
}

/**
 * A topology named `name` (it names nothing at run time; sub-topologies
 * are named by their sources) of the streams written to topics.
 *
 * @since 0.4.0
 * @category constructors
 */
export const make = <const Sinks extends ReadonlyArray<Sink<unknown, unknown>>>(
  name: string,
  sinks: Sinks
): Topology<ErrorOf<Sinks[number]>, ContextOf<Sinks[number]>> => ({
  [TypeId]: { _E: (_: never) => _, _R: (_: never) => _ },
  name,
  sinks: sinks.map((sink) => sink.node)
})

/**
 * The error type of a sink.
 *
 * @since 0.4.0
 * @category type-level
 */
export type ErrorOf<S> = S extends Sink<infer E, infer _R> ? E : never

/**
 * The context a sink needs.
 *
 * @since 0.4.0
 * @category type-level
 */
export type ContextOf<S> = S extends Sink<infer _E, infer R> ? R : never

/**
 * The transformers of `topology` under `applicationId`, one per
 * sub-topology, and the repartition topics they need; a topology that cannot
 * run (a grouping without the codecs its repartition needs, two operators of
 * one name) is a `ConfigurationError` with the fix.
 *
 * @since 0.4.0
 * @category compiling
 */
export const compile = <E = unknown>(
  topology: Topology<E, unknown>,
  applicationId: string,
  options?: RunOptions<E>
): Either.Either<Compile.Compiled, ConfigurationError> =>
  // The sub-topologies' transforms fail with the operators' errors `E` and the streams' own: the rules' domain.
  Compile.compile(topology.name, topology.sinks, applicationId, (options?.rules ?? []) as ReadonlyArray<Transformer.Rule<unknown>>)

/**
 * Options of `run` (and `compile`).
 *
 * @since 0.4.0
 * @category models
 */
export interface RunOptions<E> {
  /**
   * Error rules for every sub-topology's records (`ErrorRule`): an operator's
   * failure (its typed error, or `OperatorFailed` when its function threw),
   * a negative event time (`InvalidTimestamp`), a late record of a
   * windowed aggregation with `late: "error"` (`LateRecord`), an output
   * whose event time its topic refuses (`TimestampOutOfRange`: more than
   * its `message.timestamp.after.max.ms` ahead of the clock, repartition
   * topics included). Unmatched errors end the run.
   */
  readonly rules?: ReadonlyArray<Transformer.Rule<StreamError<E>>> | undefined
  /**
   * How often the records its sub-topologies have read (and committed) from
   * repartition topics are deleted (Kafka Streams' `repartition.purge.interval.ms`).
   * Repartition topics keep records without a time limit until then.
   * Default 30 seconds.
   */
  readonly repartitionPurgeInterval?: Duration.DurationInput | undefined
}

/**
 * The errors of a topology's records, for its rules: its operators' own
 * (`E`), a function given to an operator that threw (`OperatorFailed`), a
 * negative event time (`InvalidTimestamp`), a late record (`LateRecord`),
 * an output whose event time its topic refuses (`TimestampOutOfRange`).
 *
 * @since 0.4.0
 * @category models
 */
export type StreamError<E> = E | OperatorFailed | InvalidTimestamp | LateRecord | TimestampOutOfRange

/**
 * The topology as text: its sub-topologies, each operator with what it reads
 * from (`<--`) and passes to (`-->`), and the topics, internal ones included.
 *
 * @example
 * ```ts
 * import { Topology } from "skein"
 *
 * console.log(Topology.describe(topology, "shop"))
 * // Topology orders
 * //   Sub-topology 0: orders (consumer group shop-orders)
 * //     Source KSTREAM-SOURCE-0000000000 (topics: orders)
 * //       --> KSTREAM-FILTER-0000000001
 * // ...
 * ```
 *
 * @since 0.4.0
 * @category describing
 */
export const describe = (topology: Topology<unknown, unknown>, applicationId = "{applicationId}"): string =>
  Either.match(compile(topology, applicationId), {
    onLeft: (error) => `Topology ${topology.name} cannot run: ${error.message}`,
    onRight: (compiled) => describeCompiled(topology.name, compiled, applicationId)
  })

const describeCompiled = (name: string, compiled: Compile.Compiled, applicationId: string): string => {
  const lines = [`Topology ${name}`]
  const nameOf = (node: Graph.Node) => compiled.names.get(node)!
  compiled.subTopologies.forEach((sub, i) => {
    lines.push(`  Sub-topology ${i}: ${sub.name} (consumer group ${applicationId}-${sub.name})`)
    const members = compiled.members[i]!
    const member = new Set(members)
    for (const node of members) {
      const internal = compiled.internalTopicOf.get(node)
      const isReader = internal !== undefined && parentsOf(node).every((p) => !member.has(p))
      let label: string
      switch (node._tag) {
        case "Source":
          label = `Source ${nameOf(node)} (topics: ${node.topics.map((t) => t.name).join(", ")})`
          break
        case "Sink":
          label = `Sink ${nameOf(node)} (topic: ${node.topic})`
          break
        case "Aggregate": {
          const w = node.windowing
          const windows = w === undefined
            ? ""
            : SessionWindows.isSessionWindows(w.windows)
            ? `; session windows: inactivity gap ${w.windows.inactivityGapMs} ms, grace ${w.windows.graceMs} ms, emit ${w.emit}`
            : SlidingWindows.isSlidingWindows(w.windows)
            ? `; sliding windows: time difference ${w.windows.timeDifferenceMs} ms, grace ${w.windows.graceMs} ms, emit ${w.emit}`
            : `; windows: size ${w.windows.sizeMs} ms, advance ${w.windows.advanceMs} ms, grace ${w.windows.graceMs} ms, emit ${w.emit}`
          label = `Processor ${nameOf(node)} (${node.kind}${windows}; state: ${nameOf(node)})`
          break
        }
        case "Step":
          label = `Processor ${nameOf(node)} (${node.kind})`
          break
        case "TableSource":
          label = `Source ${nameOf(node)} (${node.versioned === undefined ? "" : `versioned, history ${node.versioned.historyMs} ms, `}` +
            `table of topics: ${node.topics.map((t) => t.name).join(", ")}; state: ${nameOf(node)})`
          break
        case "TableStep":
          label = `Processor ${nameOf(node)} (table ${node.kind})`
          break
        case "Join":
          label = `Processor ${nameOf(node)} (${node.kind === "inner" ? "join" : "leftJoin"} of ${nameOf(node.stream)} with the table ${
            nameOf(node.table)
          })`
          break
        case "TableJoin":
          label = `Processor ${nameOf(node)} (table ${node.kind} join of ${nameOf(node.left)} with ${nameOf(node.right)})`
          break
        case "StreamJoin": {
          const w = node.windows
          label = `Processor ${nameOf(node)} (windowed ${node.kind} join of ${nameOf(node.left)} with ${nameOf(node.right)}; ` +
            `window: before ${w.beforeMs} ms, after ${w.afterMs} ms, grace ${w.graceMs} ms; state: ${nameOf(node)})`
          break
        }
        case "Process": {
          const stores = node.stores.map((store) => `${store.name} (${store.kind})`).join(", ")
          label = `Processor ${nameOf(node)} (process${stores === "" ? "" : `; stores: ${stores}`}${
            node.onTimer === undefined ? "" : "; timers"
          })`
          break
        }
        case "GlobalJoin":
          label = `Processor ${nameOf(node)} (${node.kind === "inner" ? "join" : "leftJoin"} of ${nameOf(node.stream)} with the global table ${
            nameOf(node.table)
          })`
          break
        case "FkRespond":
          label = `Processor ${nameOf(node)} (foreign-key join's subscriptions to ${nameOf(node.table)}; state: ${nameOf(node)})`
          break
        case "FkJoin":
          label = `Processor ${nameOf(node)} (foreign-key ${node.join.kind === "inner" ? "join" : "leftJoin"} of ${
            nameOf(node.table)
          } with ${nameOf(node.join.right)})`
          break
        default:
          label = isReader ? `Source ${nameOf(node)} (topics: ${internal})` : `Processor ${nameOf(node)} (${node._tag.toLowerCase()})`
      }
      lines.push(`    ${label}`)
      for (const child of compiled.children.get(node) ?? []) {
        // A repartition below, in another sub-topology: this one writes its topic.
        const written = member.has(child) ? undefined : compiled.internalTopicOf.get(child)
        lines.push(written === undefined ? `      --> ${nameOf(child)}` : `      --> ${nameOf(child)} (writes ${written})`)
      }
      if (node._tag !== "Source" && !isReader) for (const parent of parentsOf(node)) lines.push(`      <-- ${nameOf(parent)}`)
    }
  })
  if (compiled.globalTables.length > 0) {
    lines.push("  Global tables (every partition on every instance):")
    for (const table of compiled.globalTables) lines.push(`    ${table.name} (topic: ${table.topic})`)
  }
  const internal = compiled.internalTopics
  if (internal.length > 0) {
    lines.push("  Internal topics:")
    for (const topic of internal) {
      lines.push(`    ${topic.name} (partitions: ${topic.partitions ?? `as ${topic.upstreamInputs.join(", ")}`})`)
    }
  }
  return lines.join("\n")
}

const parentsOf = Graph.parentsOf

/**
 * Runs the topology: creates its repartition topics (with the partition
 * count given, else the largest of the topics its writer reads; an existing
 * one with another count fails with the fix), then runs one transformer per
 * sub-topology (`Runner.runAll` under the config's `applicationId`).
 *
 * @since 0.4.0
 * @category running
 */
export const run = <E, R>(
  topology: Topology<E, R>,
  options?: RunOptions<E>
): Effect.Effect<never, RunnerError | StreamError<E>, R | SkeinConfig> =>
  Effect.gen(function*() {
    const config = yield* SkeinConfig
    const compiled = yield* compile(topology, config.applicationId, options)
    const transformers = compiled.subTopologies.map((sub) => sub.transformer)
    return yield* Effect.scoped(Effect.gen(function*() {
      if (compiled.internalTopics.length > 0) {
        const admin = yield* Admin.make(yield* makeKafka(config))
        yield* createInternalTopics(admin, compiled, config)
        // What the sub-topologies read from their repartition topics is deleted as they commit it.
        const purged = compiled.internalTopics.flatMap((spec) =>
          compiled.subTopologies
            .filter((sub) => sub.transformer.inputs.some((input) => input.name === spec.name))
            .map((sub) => ({ topic: spec.name, groupId: applicationIdOf(config.applicationId, sub.transformer) }))
        )
        const interval = options?.repartitionPurgeInterval === undefined
          ? RepartitionPurge.defaultInterval
          : Duration.decode(options.repartitionPurgeInterval)
        yield* Effect.forkScoped(RepartitionPurge.purgeEvery(admin, purged, interval))
      }
      yield* Effect.scoped(checkJoins(compiled, config))
      yield* Effect.scoped(TableChangelogs.check(compiled, config))
      // The transformers' errors are the topology's operators' (`E`); their context is `R`.
      const running = Runner.runAll(transformers) as Effect.Effect<never, RunnerError | StreamError<E>, R | SkeinConfig>
      if (compiled.globalTables.length === 0) return yield* running
      // Every global table is loaded before any record is processed, then kept up to date beside the run.
      const kafka = yield* makeKafka(config)
      const loaded = yield* GlobalTableLoader.start(kafka, yield* Admin.make(kafka), compiled.globalTables, config.applicationId)
      return yield* Effect.raceFirst(running, loaded.failed)
    }))
  })

/** Fails when a join's inputs have different partition counts (`coPartitioning.ts`), with the fix. */
const checkJoins = (compiled: Compile.Compiled, config: SkeinConfig): Effect.Effect<void, RunnerError, Scope.Scope> =>
  Effect.gen(function*() {
    if (compiled.joins.length === 0) return
    const admin = yield* Admin.make(yield* makeKafka(config))
    const topics = [...new Set(compiled.joins.flatMap((join) => [...join.streamTopics, ...join.tableTopics]))]
    const counts = yield* admin.partitionCounts(topics)
    yield* CoPartitioning.check(compiled.joins, counts)
  })

/**
 * Creates the topology's repartition topics, in dependency order (without a
 * time limit: `RepartitionPurge`), or checks the existing ones' partition
 * counts and retention.
 */
const createInternalTopics = (
  admin: Admin.KafkaAdmin,
  compiled: Compile.Compiled,
  config: SkeinConfig
): Effect.Effect<void, RunnerError> =>
  Effect.gen(function*() {
    const counts = new Map<string, number>()
    const countOf = (topic: string) =>
      Option.match(Option.fromNullable(counts.get(topic)), {
        onSome: Effect.succeed,
        onNone: () => Effect.map(admin.partitionCounts([topic]), (found) => found.get(topic)!)
      })
    for (const spec of compiled.internalTopics) {
      const upstream = yield* Effect.forEach(spec.upstreamInputs, countOf)
      const wanted = spec.partitions ?? Math.max(...upstream)
      const existing = yield* admin.partitionCount(spec.name)
      if (existing === undefined) {
        yield* admin.createRepartitionTopic(spec.name, wanted, config.changelogReplicationFactor)
        yield* Effect.logInfo(`created repartition topic ${spec.name} with ${wanted} partitions`)
      } else if (existing !== wanted) {
        return yield* new ConfigurationError({
          problem: `The repartition topic ${spec.name} has ${existing} partitions; the topology needs ${wanted}` +
            (spec.partitions === undefined ? ` (as many as the largest of ${spec.upstreamInputs.join(", ")})` : ""),
          fix: `Set the repartition's partitions to ${existing} (KStream.groupBy / repartition / groupByKey option ` +
            `"partitions"), or, once the application is stopped and the topic fully consumed, delete ${spec.name} so it is created again`
        })
      }
      if (existing !== undefined) {
        const retention = yield* admin.retentionMs(spec.name)
        if (retention !== undefined && retention >= 0) {
          yield* Effect.logWarning(
            `the repartition topic ${spec.name} deletes records older than retention.ms=${retention} by their ` +
              `timestamps, which are event times: records of older events are deleted before they are read. ` +
              `Set it to keep them (Skein deletes what its readers committed): kafka-configs.sh --bootstrap-server <broker> ` +
              `--alter --entity-type topics --entity-name ${spec.name} --add-config retention.ms=-1`
          )
        }
      }
      counts.set(spec.name, existing ?? wanted)
    }
  })
