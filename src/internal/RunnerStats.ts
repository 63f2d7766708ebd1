/**
 * The observable state of a runner: its phase, counters and per-partition
 * views, mutated by the runner and read by health checks, metrics and tests.
 *
 * @internal
 */

/** Upper bounds (ms) of the batch latency histogram's buckets. */
export const batchLatencyBounds: ReadonlyArray<number> = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]

/** The lifecycle of a runner, for health checks. */
export type RunnerPhase = "starting" | "running" | "stopping" | "stopped" | "failed"

/** Observable state and counters of a running runner (for tests, health and metrics). */
export interface RunnerStats {
  phase: RunnerPhase
  batches: number
  commits: number
  /** Transactions aborted or deliveries failed (each rewinds its partition). */
  aborts: number
  /** Input records committed past (processed, dead-lettered or skipped). */
  recordsProcessed: number
  migrations: number
  rebalances: number
  tasksStarted: number
  tasksStopped: number
  restoredRecords: number
  maxBatchRecords: number
  skipped: number
  deadLettered: number
  retries: number
  inFlightTransactions: number
  teardownsWithTransactionInFlight: number
  /** Epoch milliseconds of the last successful commit. */
  lastCommitAt: number | undefined
  /** The port of the health endpoint, once it listens (`healthPort` set). */
  healthPort: number | undefined
  /** Partitions whose tasks are running. */
  readonly assigned: Set<number>
  /** Partitions assigned but waiting for their task to start. */
  readonly pending: Set<number>
  /** Partitions stopped by a failure (failure isolation "partition"), with the error. */
  readonly stopped: Map<number, string>
  /** Records behind the high watermark, per input `topic/partition`, as of the last fetch. */
  readonly lag: Map<string, { readonly topic: string; readonly partition: number; readonly lag: number }>
  /** Restore progress of tasks being restored: changelog records read and total. */
  readonly restoring: Map<number, { restored: number; readonly total: number }>
  /** Batch latency (fetch to commit) histogram: counts per `batchLatencyBounds` bucket, plus +Inf last. */
  readonly batchLatency: { count: number; sumMs: number; readonly buckets: Array<number> }
}

export const makeStats = (): RunnerStats => ({
  phase: "starting",
  batches: 0,
  commits: 0,
  aborts: 0,
  recordsProcessed: 0,
  migrations: 0,
  rebalances: 0,
  tasksStarted: 0,
  tasksStopped: 0,
  restoredRecords: 0,
  maxBatchRecords: 0,
  skipped: 0,
  deadLettered: 0,
  retries: 0,
  inFlightTransactions: 0,
  teardownsWithTransactionInFlight: 0,
  lastCommitAt: undefined,
  healthPort: undefined,
  assigned: new Set(),
  pending: new Set(),
  stopped: new Map(),
  lag: new Map(),
  restoring: new Map(),
  batchLatency: { count: 0, sumMs: 0, buckets: batchLatencyBounds.map(() => 0).concat([0]) }
})

/** Adds one batch's latency to the histogram. */
export const observeBatchLatency = (stats: RunnerStats, ms: number): void => {
  stats.batchLatency.count++
  stats.batchLatency.sumMs += ms
  const index = batchLatencyBounds.findIndex((bound) => ms <= bound)
  stats.batchLatency.buckets[index === -1 ? batchLatencyBounds.length : index]!++
}
