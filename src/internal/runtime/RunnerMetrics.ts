/**
 * The metrics of runners, as module-level Effect metrics. Each run updates
 * and reads them tagged with its own labels (`runLabels`), so two runs in one
 * process never mix; `Health.prometheus` renders one run's values.
 *
 * The counters and gauges are named as in the Prometheus exposition; the
 * batch latency histogram is kept in milliseconds (its exposition,
 * `skein_batch_latency_seconds`, converts to seconds).
 *
 * @internal
 */
import { Metric, MetricBoundaries, MetricLabel, MetricState } from "effect"

/** Upper bounds (ms) of the batch latency histogram's buckets (plus +Inf). */
export const batchLatencyBounds: ReadonlyArray<number> = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]

/** The tag that tells runs apart; never exported to Prometheus. */
export const runIdTag = "skein_run_id"

let runs = 0

/** The labels of a new run: a process-unique run id. */
export const runLabels = (): ReadonlyArray<MetricLabel.MetricLabel> => [MetricLabel.make(runIdTag, String(++runs))]

/** Adds the run's `application_id` and `transformer` to its labels. */
export const withRunnerLabels = (
  labels: ReadonlyArray<MetricLabel.MetricLabel>,
  applicationId: string,
  transformer: string
): ReadonlyArray<MetricLabel.MetricLabel> => [
  ...labels.filter((label) => label.key !== "application_id" && label.key !== "transformer"),
  MetricLabel.make("application_id", applicationId),
  MetricLabel.make("transformer", transformer)
]

// Counters

export const batches = Metric.counter("skein_batches_total", { description: "Batches processed." })

export const commits = Metric.counter("skein_commits_total", {
  description: "Committed transactions (or offset commits in at-least-once mode)."
})

export const aborts = Metric.counter("skein_aborts_total", {
  description: "Aborted transactions and failed deliveries; each rewinds its partition."
})

export const recordsProcessed = Metric.counter("skein_records_processed_total", {
  description: "Input records committed past (processed, dead-lettered or skipped)."
})

export const migrations = Metric.counter("skein_migrations_total", {
  description: "Task migrations (a commit fenced by a newer owner); each rejoins the group."
})

export const rebalances = Metric.counter("skein_rebalances_total", { description: "Consumer group rebalances." })

export const tasksStarted = Metric.counter("skein_tasks_started_total", {
  description: "Tasks started (fenced, restored and running)."
})

export const tasksStopped = Metric.counter("skein_tasks_stopped_total", { description: "Tasks torn down." })

export const restoredRecords = Metric.counter("skein_restored_records_total", {
  description: "Changelog records read while restoring state."
})

export const skipped = Metric.counter("skein_skipped_total", { description: "Records skipped by an error rule." })

export const deadLettered = Metric.counter("skein_dead_lettered_total", {
  description: "Records written to the dead letter topic."
})

export const retries = Metric.counter("skein_retries_total", {
  description: "Transform attempts retried by an error rule."
})

export const enforcedProcessing = Metric.counter("skein_enforced_processing_total", {
  description:
    "Records a task with several inputs processed while one of them had nothing buffered (caught up, idle past maxTaskIdle): " +
    "Kafka Streams' enforced-processing-total; a record of that input fetched later may carry an earlier timestamp."
})

/** Per input partition (the task's): tagged `partition` besides the run's labels. */
export const partitionRecordsProcessed = Metric.counter("skein_partition_records_processed_total", {
  description: "Input records committed past, per task (input partition)."
})

export const partitionCommits = Metric.counter("skein_partition_commits_total", {
  description: "Committed transactions (or acknowledged deliveries), per task (input partition)."
})

export const standbyFailures = Metric.counter("skein_standby_failures_total", {
  description: "Standby replicas dropped after a failure (their reader crashed, their store failed); logged with the reason."
})

/**
 * Per windowed aggregation of a topology (`internal/streams`), tagged
 * `application_id` and `transformer` as its sub-topology's run is (`runAll`:
 * `{applicationId}-{sub-topology}` and the sub-topology) and `operator`: the
 * operator is compiled before any run exists, so it carries no run id, and
 * runs of one application's transformer in one process share its count.
 */
export const streamsLateRecords = Metric.counter("skein_streams_late_records_total", {
  description: "Records a windowed aggregation dropped from a window that had closed (Kafka Streams' dropped-records)."
})

/** `streamsLateRecords` of one windowed aggregation. */
export const streamsLateRecordsOf = (applicationId: string, transformer: string, operator: string): Counter =>
  streamsLateRecords.pipe(
    Metric.tagged("application_id", applicationId),
    Metric.tagged("transformer", transformer),
    Metric.tagged("operator", operator)
  )

/**
 * Per table or stream-table join of a topology (`internal/streams`), tagged
 * as `streamsLateRecords` is: the records it dropped, as Kafka Streams drops
 * them (a table record without a key; a stream record without a value, or
 * without a key in an inner join).
 */
export const streamsDroppedRecords = Metric.counter("skein_streams_dropped_records_total", {
  description: "Records a table or a stream-table join dropped (no key, or a stream record without a value), as Kafka Streams drops them."
})

/** `streamsDroppedRecords` of one table or join. */
export const streamsDroppedRecordsOf = (applicationId: string, transformer: string, operator: string): Counter =>
  streamsDroppedRecords.pipe(
    Metric.tagged("application_id", applicationId),
    Metric.tagged("transformer", transformer),
    Metric.tagged("operator", operator)
  )

/** The counts of a streams counter per operator of an application's transformer, as this process counted them (from the metric registry). */
const byOperator = (metric: string, applicationId: string, transformer: string): ReadonlyMap<string, number> => {
  const counts = new Map<string, number>()
  for (const pair of Metric.unsafeSnapshot()) {
    if (pair.metricKey.name !== metric || !MetricState.isCounterState(pair.metricState)) continue
    const tags = new Map(pair.metricKey.tags.map((label) => [label.key, label.value]))
    const operator = tags.get("operator")
    if (tags.get("application_id") !== applicationId || tags.get("transformer") !== transformer || operator === undefined) continue
    counts.set(operator, (counts.get(operator) ?? 0) + Number(pair.metricState.count))
  }
  return counts
}

/** The late records per operator of an application's transformer, as this process counted them (from the metric registry). */
export const streamsLateRecordsByOperator = (applicationId: string, transformer: string): ReadonlyMap<string, number> =>
  byOperator("skein_streams_late_records_total", applicationId, transformer)

/** The records each table or join of an application's transformer dropped, as this process counted them. */
export const streamsDroppedRecordsByOperator = (applicationId: string, transformer: string): ReadonlyMap<string, number> =>
  byOperator("skein_streams_dropped_records_total", applicationId, transformer)

/** The run's labels with the task's partition. */
export const withPartition = (
  labels: ReadonlyArray<MetricLabel.MetricLabel>,
  partition: number
): ReadonlyArray<MetricLabel.MetricLabel> => [...labels, MetricLabel.make("partition", String(partition))]

// Gauges

export const assignedPartitions = Metric.gauge("skein_assigned_partitions", {
  description: "Partitions whose tasks are running."
})

export const pendingPartitions = Metric.gauge("skein_pending_partitions", {
  description: "Partitions assigned but waiting for their task to start."
})

export const stoppedPartitions = Metric.gauge("skein_stopped_partitions", {
  description: "Partitions stopped by a failure; their errors are in the health snapshot."
})

/** Per partition (tagged `partition`). */
export const standbyLag = Metric.gauge("skein_standby_lag_records", {
  description: "Changelog records a standby replica is behind the changelog's end, as of its last fetch."
})

export const taskCheckpointLag = Metric.gauge("skein_task_checkpoint_lag_records", {
  description: "Changelog records written at or after a running task's store checkpoint (what its restart would read again)."
})

/** Per partition of a `DatabaseSink` (tagged `partition`). */
export const sinkOwnerEpoch = Metric.gauge("skein_sink_owner_epoch", {
  description: "The owner epoch a DatabaseSink's running task holds in its offsets table (bumped by each new owner)."
})

export const sinkOutboxPending = Metric.gauge("skein_sink_outbox_pending_records", {
  description: "Dead letters a DatabaseSink's task committed to its database outbox and has not yet published to Kafka."
})

// Histogram

export const batchLatency = Metric.histogram(
  "skein_batch_latency_milliseconds",
  MetricBoundaries.fromIterable(batchLatencyBounds),
  "Batch latency from fetch to commit, in milliseconds."
)

/** A counter of `RunnerMetrics`. */
export type Counter = Metric.Metric.Counter<number>
