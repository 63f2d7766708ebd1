/**
 * The health of a runner, read from its `Runner.Stats`: a snapshot for
 * code, liveness and readiness checks, a stream of phase changes, and
 * Prometheus metrics (rendered from the run's Effect metrics).
 *
 * Liveness and readiness ignore stopped partitions on purpose. With failure
 * isolation `"partition"` a partition whose record keeps failing is stopped
 * and the others keep running; restarting the process would fail the same
 * record again and interrupt the healthy partitions too. Alert on
 * `skein_stopped_partitions > 0` (or `snapshot.stopped`) instead.
 *
 * @since 0.1.0
 */
import { Effect, Option, Schema } from "effect"
import type { Stream } from "effect"
import { batchLatencyBounds } from "./internal/runtime/RunnerStats.ts"
import type { BatchLatency, Stats } from "./internal/runtime/RunnerStats.ts"

const Partition = Schema.Number

/**
 * What a runner is doing and has done, at one instant. `HealthSnapshot` is
 * also the schema of its JSON form (`lastCommitAt` encodes as an ISO string
 * or `null`), served by the readiness endpoint.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Health } from "skein"
 *
 * // the JSON served by GET /health/ready (`lastCommitAt` as an ISO string or null)
 * const json = Health.snapshot(stats).pipe(Effect.flatMap(Schema.encode(Schema.parseJson(Health.HealthSnapshot))))
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const HealthSnapshot = Schema.Struct({
  phase: Schema.Literal("starting", "running", "stopping", "stopped", "failed"),
  /** Partitions whose tasks are running, ascending. */
  assigned: Schema.Array(Partition),
  /** Partitions assigned but waiting for their task to start, ascending. */
  pending: Schema.Array(Partition),
  /** Partitions stopped by a failure (failure isolation `"partition"`), with the error. */
  stopped: Schema.Array(Schema.Struct({ partition: Partition, error: Schema.String })),
  /** Records behind the high watermark per input topic partition, as of the last fetch. */
  lag: Schema.Struct({
    total: Schema.Number,
    partitions: Schema.Array(Schema.Struct({ topic: Schema.String, partition: Partition, lag: Schema.Number }))
  }),
  /** When the last transaction (or offset commit) succeeded. */
  lastCommitAt: Schema.OptionFromNullOr(Schema.DateFromString),
  counters: Schema.Struct({
    recordsProcessed: Schema.Number,
    batches: Schema.Number,
    commits: Schema.Number,
    aborts: Schema.Number,
    retries: Schema.Number,
    deadLettered: Schema.Number,
    skipped: Schema.Number,
    restoredRecords: Schema.Number,
    rebalances: Schema.Number,
    migrations: Schema.Number,
    tasksStarted: Schema.Number,
    tasksStopped: Schema.Number,
    /** Standby replicas dropped after a failure (logged with the reason). */
    standbyFailures: Schema.Number,
    /** Records a task reading several topics processed while one had nothing buffered (`maxTaskIdle`). */
    enforcedProcessing: Schema.Number
  }),
  /** Tasks restoring their state: changelog records read so far and in total. */
  restoring: Schema.Array(Schema.Struct({ partition: Partition, restored: Schema.Number, total: Schema.Number })),
  /**
   * How each running task restored its store: from its kept checkpoint (`tail`)
   * or in full, why, the changelog records read (and the offsets, from until
   * the changelog's end at the start) and the start's duration; and
   * its checkpoint lag now: changelog records written at or after its store's
   * checkpoint (what a restart of the task would read again).
   */
  restores: Schema.Array(Schema.Struct({
    partition: Partition,
    mode: Schema.Literal("tail", "full"),
    reason: Schema.String,
    records: Schema.Number,
    from: Schema.Number,
    until: Schema.Number,
    millis: Schema.Number,
    checkpointLag: Schema.Number
  })),
  /**
   * The standby replicas this instance keeps warm (`standbyReplicas`): the
   * changelog offset each store reflects, and the records it is behind the
   * changelog's end as of its last fetch.
   */
  standbys: Schema.Array(Schema.Struct({ partition: Partition, position: Schema.Number, lag: Schema.Number })),
  /**
   * A `DatabaseSink`'s running tasks (empty for other transformers): the
   * owner epoch each holds in the offsets table (a newer owner bumps it and
   * fences this one), and its outbox rows pending: dead letters committed to
   * the database and not yet published to Kafka (nonzero between a batch's
   * database commit and its Kafka transaction, or while publishing fails).
   */
  sinkPartitions: Schema.Array(Schema.Struct({ partition: Partition, epoch: Schema.Number, outboxPending: Schema.Number })),
  /** Per input partition this run processed: input records committed past and commits. */
  partitions: Schema.Array(Schema.Struct({ partition: Partition, records: Schema.Number, commits: Schema.Number }))
})

/**
 * A runner's health at one instant: the type `HealthSnapshot` decodes to.
 *
 * @example
 * ```ts
 * import { Health } from "skein"
 *
 * const summary = (s: Health.HealthSnapshot): string =>
 *   `${s.phase}: ${s.assigned.length} partitions, lag ${s.lag.total}, ${s.stopped.length} stopped`
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface HealthSnapshot extends Schema.Schema.Type<typeof HealthSnapshot> {}

/**
 * The lifecycle phase of a runner.
 *
 * @example
 * ```ts
 * import { Health } from "skein"
 *
 * const isOver = (phase: Health.Phase): boolean => phase === "stopped" || phase === "failed"
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Phase = HealthSnapshot["phase"]

/**
 * Labels added to every Prometheus sample, to tell runners apart.
 *
 * @example
 * ```ts
 * import { Health } from "skein"
 *
 * const labels: Health.Labels = { applicationId: "wc", transformer: "word-count" }
 * const body = Health.prometheus(stats, labels) // skein_up{application_id="wc",transformer="word-count"} 1 ...
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Labels {
  /** Exported as `application_id`. */
  readonly applicationId?: string | undefined
  readonly transformer?: string | undefined
}

const ascending = (a: number, b: number) => a - b

const read = (stats: Stats): HealthSnapshot => {
  const lag = [...stats.lag.values()]
    .map(({ lag, partition, topic }) => ({ topic, partition, lag }))
    .sort((a, b) => a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition)
  return {
    phase: stats.phase,
    assigned: [...stats.assigned].sort(ascending),
    pending: [...stats.pending].sort(ascending),
    stopped: [...stats.stopped].sort(([a], [b]) => a - b).map(([partition, error]) => ({ partition, error })),
    lag: { total: lag.reduce((sum, entry) => sum + entry.lag, 0), partitions: lag },
    lastCommitAt: Option.map(Option.fromNullable(stats.lastCommitAt), (ms) => new Date(ms)),
    counters: {
      recordsProcessed: stats.recordsProcessed,
      batches: stats.batches,
      commits: stats.commits,
      aborts: stats.aborts,
      retries: stats.retries,
      deadLettered: stats.deadLettered,
      skipped: stats.skipped,
      restoredRecords: stats.restoredRecords,
      rebalances: stats.rebalances,
      migrations: stats.migrations,
      tasksStarted: stats.tasksStarted,
      tasksStopped: stats.tasksStopped,
      standbyFailures: stats.standbyFailures,
      enforcedProcessing: stats.enforcedProcessing
    },
    restoring: [...stats.restoring].sort(([a], [b]) => a - b).map(([partition, { restored, total }]) => ({
      partition,
      restored,
      total
    })),
    restores: [...stats.restores].sort(([a], [b]) => a - b).map(([partition, restore]) => ({
      partition,
      ...restore,
      checkpointLag: stats.checkpointLags.get(partition) ?? 0
    })),
    standbys: [...stats.standbys].sort(([a], [b]) => a - b).map(([partition, { lag, position }]) => ({
      partition,
      position,
      lag
    })),
    sinkPartitions: [...stats.sinkPartitions].sort(([a], [b]) => a - b).map(([partition, { epoch, outboxPending }]) => ({
      partition,
      epoch,
      outboxPending
    })),
    partitions: [...stats.partitionCounts].sort(([a], [b]) => a - b).map(([partition, { commits, records }]) => ({
      partition,
      records,
      commits
    }))
  }
}

/**
 * Reads a snapshot of a runner's stats (pass the stats given to
 * `Runner.runWithStats`).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Health, Runner } from "skein"
 *
 * const program = Effect.gen(function*() {
 *   const stats = Runner.makeStats()
 *   yield* Effect.fork(Runner.runWithStats(WordCount, stats))
 *   return yield* Health.snapshot(stats) // phase, partitions, lag, counters, restore progress
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const snapshot = (stats: Stats): Effect.Effect<HealthSnapshot> => Effect.sync(() => read(stats))

/**
 * The phase of a runner now, then each change of it (`starting`, `running`,
 * `stopping`, then `stopped` or `failed`), for code that reacts to health
 * rather than polling `snapshot`.
 *
 * @example
 * ```ts
 * import { Effect, Stream } from "effect"
 * import { Health } from "skein"
 *
 * const logPhases = Health.changes(stats).pipe(
 *   Stream.runForEach((phase) => Effect.log(`runner is ${phase}`)) // starting, running, stopping, stopped
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const changes = (stats: Stats): Stream.Stream<Phase> => stats.phaseChanges

/**
 * Liveness: `true` unless the run has failed. Stopped partitions do not fail
 * it (see the module's documentation).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Health } from "skein"
 *
 * const live = Health.snapshot(stats).pipe(Effect.map(Health.isLive)) // false once the run has failed
 * ```
 *
 * @since 0.1.0
 * @category checks
 */
export const isLive = (snapshot: HealthSnapshot): boolean => snapshot.phase !== "failed"

/**
 * Readiness: the runner is running and every assigned partition's task is
 * started and restored. Stopped partitions do not fail it.
 *
 * @example
 * ```ts
 * import { Effect, Schedule } from "effect"
 * import { Health } from "skein"
 *
 * // wait until every assigned partition's task is started and restored
 * const ready = Health.snapshot(stats).pipe(
 *   Effect.repeat({ until: Health.isReady, schedule: Schedule.spaced("1 second") })
 * )
 * ```
 *
 * @since 0.1.0
 * @category checks
 */
export const isReady = (snapshot: HealthSnapshot): boolean =>
  snapshot.phase === "running" && snapshot.pending.length === 0 && snapshot.restoring.length === 0

// Prometheus text exposition format 0.0.4

interface Sample {
  /** Appended to the family's name (`_bucket`, `_sum`, `_count`). */
  readonly suffix?: string
  readonly labels?: Readonly<Record<string, string>>
  readonly value: number
}

const escapeLabelValue = (value: string) =>
  value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, "\\\"")

const formatValue = (value: number) =>
  Number.isNaN(value) ? "NaN" : value === Infinity ? "+Inf" : value === -Infinity ? "-Inf" : String(value)

const family = (
  constLabels: Readonly<Record<string, string>>,
  name: string,
  type: "counter" | "gauge" | "histogram",
  help: string,
  samples: ReadonlyArray<Sample>
): string => {
  const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`]
  for (const sample of samples) {
    const labels = Object.entries({ ...constLabels, ...sample.labels })
      .map(([label, value]) => `${label}="${escapeLabelValue(value)}"`)
    const selector = labels.length === 0 ? "" : `{${labels.join(",")}}`
    lines.push(`${name}${sample.suffix ?? ""}${selector} ${formatValue(sample.value)}`)
  }
  return lines.join("\n")
}

const latencyBuckets = (latency: BatchLatency): ReadonlyArray<Sample> => {
  const bounds = [...batchLatencyBounds.map((ms) => String(ms / 1000)), "+Inf"]
  let cumulative = 0
  return bounds.map((le, index) => {
    cumulative += latency.buckets[index] ?? 0
    return { suffix: "_bucket", labels: { le }, value: cumulative }
  })
}

/**
 * The runner's metrics in the Prometheus text exposition format 0.0.4, for
 * a `/metrics` endpoint (content type `text/plain; version=0.0.4`).
 *
 * @example
 * ```ts
 * import { Health } from "skein"
 *
 * // the body of a /metrics response, served as `text/plain; version=0.0.4`
 * const body = Health.prometheus(stats, { applicationId: "wc", transformer: "word-count" })
 * ```
 *
 * @since 0.1.0
 * @category metrics
 */
export const prometheus = (stats: Stats, labels: Labels = {}): string => {
  const constLabels: Record<string, string> = {}
  if (labels.applicationId !== undefined) constLabels.application_id = labels.applicationId
  if (labels.transformer !== undefined) constLabels.transformer = labels.transformer
  const s = read(stats)
  const latency = stats.batchLatency
  const metric = (
    name: string,
    type: "counter" | "gauge" | "histogram",
    help: string,
    samples: ReadonlyArray<Sample>
  ) => family(constLabels, name, type, help, samples)
  const counter = (name: string, help: string, value: number) => metric(name, "counter", help, [{ value }])
  const gauge = (name: string, help: string, value: number) => metric(name, "gauge", help, [{ value }])
  return [
    gauge("skein_up", "1 while the runner is live (its run has not failed), else 0.", isLive(s) ? 1 : 0),
    gauge(
      "skein_ready",
      "1 while the runner is running with every assigned task started and restored.",
      isReady(s) ? 1 : 0
    ),
    counter(
      "skein_records_processed_total",
      "Input records committed past (processed, dead-lettered or skipped).",
      s.counters.recordsProcessed
    ),
    counter(
      "skein_commits_total",
      "Committed transactions (or offset commits in at-least-once mode).",
      s.counters.commits
    ),
    counter(
      "skein_aborts_total",
      "Aborted transactions and failed deliveries; each rewinds its partition.",
      s.counters.aborts
    ),
    counter("skein_retries_total", "Transform attempts retried by an error rule.", s.counters.retries),
    counter(
      "skein_enforced_processing_total",
      "Records a task with several inputs processed while one of them had nothing buffered (idle past maxTaskIdle).",
      s.counters.enforcedProcessing
    ),
    counter("skein_dead_lettered_total", "Records written to the dead letter topic.", s.counters.deadLettered),
    counter("skein_skipped_total", "Records skipped by an error rule.", s.counters.skipped),
    counter("skein_rebalances_total", "Consumer group rebalances.", s.counters.rebalances),
    counter("skein_tasks_started_total", "Tasks started (fenced, restored and running).", s.counters.tasksStarted),
    counter(
      "skein_restored_records_total",
      "Changelog records read while restoring state.",
      s.counters.restoredRecords
    ),
    gauge("skein_assigned_partitions", "Partitions whose tasks are running.", s.assigned.length),
    gauge("skein_pending_partitions", "Partitions assigned but waiting for their task to start.", s.pending.length),
    gauge(
      "skein_stopped_partitions",
      "Partitions stopped by a failure; their errors are in the health snapshot.",
      s.stopped.length
    ),
    metric(
      "skein_partition_stopped",
      "gauge",
      "1 for each partition stopped by a failure.",
      s.stopped.map(({ partition }) => ({ labels: { partition: String(partition) }, value: 1 }))
    ),
    metric(
      "skein_consumer_lag",
      "gauge",
      "Records behind the high watermark per input topic partition, as of the last fetch.",
      s.lag.partitions.map(({ lag, partition, topic }) => ({
        labels: { topic, partition: String(partition) },
        value: lag
      }))
    ),
    metric(
      "skein_restore_progress_ratio",
      "gauge",
      "Changelog records restored over the total, per task being restored.",
      s.restoring.map(({ partition, restored, total }) => ({
        labels: { partition: String(partition) },
        value: total === 0 ? 1 : Math.min(1, restored / total)
      }))
    ),
    metric(
      "skein_task_restored_records",
      "gauge",
      "Changelog records a running task read at its start, by restore mode (tail: from its kept checkpoint).",
      s.restores.map(({ mode, partition, records }) => ({ labels: { partition: String(partition), mode }, value: records }))
    ),
    metric(
      "skein_partition_records_processed_total",
      "counter",
      "Input records committed past, per task (input partition).",
      s.partitions.map(({ partition, records }) => ({ labels: { partition: String(partition) }, value: records }))
    ),
    metric(
      "skein_partition_commits_total",
      "counter",
      "Committed transactions (or acknowledged deliveries), per task (input partition).",
      s.partitions.map(({ commits, partition }) => ({ labels: { partition: String(partition) }, value: commits }))
    ),
    metric(
      "skein_task_checkpoint_lag_records",
      "gauge",
      "Changelog records written at or after a running task's store checkpoint (what its restart would read again).",
      s.restores.map(({ checkpointLag, partition }) => ({ labels: { partition: String(partition) }, value: checkpointLag }))
    ),
    metric(
      "skein_standby_lag_records",
      "gauge",
      "Changelog records a standby replica is behind the changelog's end, as of its last fetch.",
      s.standbys.map(({ lag, partition }) => ({ labels: { partition: String(partition) }, value: lag }))
    ),
    metric(
      "skein_sink_owner_epoch",
      "gauge",
      "The owner epoch a DatabaseSink's running task holds in its offsets table (bumped by each new owner).",
      s.sinkPartitions.map(({ epoch, partition }) => ({ labels: { partition: String(partition) }, value: epoch }))
    ),
    metric(
      "skein_sink_outbox_pending_records",
      "gauge",
      "Dead letters a DatabaseSink's task committed to its database outbox and has not yet published to Kafka.",
      s.sinkPartitions.map(({ outboxPending, partition }) => ({ labels: { partition: String(partition) }, value: outboxPending }))
    ),
    counter(
      "skein_standby_failures_total",
      "Standby replicas dropped after a failure (their reader crashed, their store failed).",
      s.counters.standbyFailures
    ),
    metric(
      "skein_streams_late_records_total",
      "counter",
      "Records a windowed aggregation dropped from a window that had closed (Kafka Streams' dropped-records), per operator.",
      [...stats.lateRecords].map(([operator, count]) => ({ labels: { operator }, value: count }))
    ),
    metric(
      "skein_streams_dropped_records_total",
      "counter",
      "Records a table or a stream-table join dropped as Kafka Streams drops them (no key; a stream record without a value), per operator.",
      [...stats.droppedRecords].map(([operator, count]) => ({ labels: { operator }, value: count }))
    ),
    metric(
      "skein_task_start_seconds",
      "gauge",
      "How long a running task's start took, its restore included.",
      s.restores.map(({ millis, partition }) => ({ labels: { partition: String(partition) }, value: millis / 1000 }))
    ),
    metric(
      "skein_last_commit_timestamp_seconds",
      "gauge",
      "Unix time of the last successful commit; absent before the first one.",
      Option.match(s.lastCommitAt, { onNone: () => [], onSome: (at) => [{ value: at.getTime() / 1000 }] })
    ),
    metric("skein_batch_latency_seconds", "histogram", "Batch latency from fetch to commit.", [
      ...latencyBuckets(latency),
      { suffix: "_sum", value: latency.sumMs / 1000 },
      { suffix: "_count", value: latency.count }
    ])
  ].join("\n") + "\n"
}
