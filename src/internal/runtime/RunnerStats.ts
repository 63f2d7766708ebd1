/**
 * The observable state of a runner: its phase (a `SubscriptionRef`, so
 * health can be watched), its counters and latency histogram (the Effect
 * metrics of `RunnerMetrics`, tagged with the run's labels) and its
 * per-partition views. The runtime updates it through the named methods of
 * `RunnerStats`; everyone else reads it through the read-only `Stats`
 * (`Runner.Stats`).
 *
 * @internal
 */
import { Effect, Option, Stream, SubscriptionRef } from "effect"
import type { MetricLabel } from "effect"
import * as Metrics from "./RunnerMetrics.ts"

export { batchLatencyBounds } from "./RunnerMetrics.ts"

/** The lifecycle of a runner, for health checks. */
export type RunnerPhase = "starting" | "running" | "stopping" | "stopped" | "failed"

/** Records behind the high watermark of one input topic partition. */
export interface PartitionLag {
  readonly topic: string
  readonly partition: number
  readonly lag: number
}

/** Restore progress of one task: changelog records read and total. */
export interface RestoreProgress {
  readonly restored: number
  readonly total: number
}

/** How a running task's store was restored at its start. */
export interface TaskRestore {
  /** `tail`: from the kept store's checkpoint; `full`: the whole changelog. */
  readonly mode: "tail" | "full"
  /** Why (for a full restore: no local state, or why the kept one was not trusted). */
  readonly reason: string
  /** Changelog records read. */
  readonly records: number
  /** The changelog offsets read: from (the checkpoint, or the earliest offset), until (its end at the start, exclusive). */
  readonly from: number
  readonly until: number
  /** Milliseconds the task's start took, restore included. */
  readonly millis: number
}

/** A standby replica this instance keeps warm. */
/** A `DatabaseSink`'s running task: its owner epoch, and its outbox rows not yet published. */
export interface SinkPartition {
  readonly epoch: number
  readonly outboxPending: number
}

export interface StandbyState {
  /** The changelog offset its store reflects (the next one it reads). */
  readonly position: number
  /** Changelog records behind the changelog's end (the fetch's high watermark), as of its last fetch. */
  readonly lag: number
}

/** Batch latency counts per `batchLatencyBounds` bucket (not cumulative), plus +Inf last. */
export interface BatchLatency {
  readonly count: number
  readonly sumMs: number
  readonly buckets: ReadonlyArray<number>
}

/** Observable state and counters of a running runner (for tests, health and metrics); read-only. */
export interface Stats {
  readonly phase: RunnerPhase
  /** The phase now, then each change of it. */
  readonly phaseChanges: Stream.Stream<RunnerPhase>
  readonly batches: number
  readonly commits: number
  /** Transactions aborted or deliveries failed (each rewinds its partition). */
  readonly aborts: number
  /** Input records committed past (processed, dead-lettered or skipped). */
  readonly recordsProcessed: number
  readonly migrations: number
  readonly rebalances: number
  readonly tasksStarted: number
  readonly tasksStopped: number
  readonly restoredRecords: number
  readonly skipped: number
  readonly deadLettered: number
  readonly retries: number
  /** Records a multi-input task processed while an input had nothing buffered (`maxTaskIdle`: enforced processing). */
  readonly enforcedProcessing: number
  /** Epoch milliseconds of the last successful commit. */
  readonly lastCommitAt: number | undefined
  /** The port of the health endpoint, once it listens (`healthPort` set). */
  readonly healthPort: number | undefined
  /** The port of the query endpoint, once it listens (`queryPort` set). */
  readonly queryPort: number | undefined
  /** Partitions whose tasks are running. */
  readonly assigned: ReadonlySet<number>
  /** Partitions assigned but waiting for their task to start. */
  readonly pending: ReadonlySet<number>
  /** Partitions stopped by a failure (failure isolation "partition"), with the error. */
  readonly stopped: ReadonlyMap<number, string>
  /** Records behind the high watermark, per input `topic/partition`, as of the last fetch. */
  readonly lag: ReadonlyMap<string, PartitionLag>
  /** Restore progress of tasks being restored: changelog records read and total. */
  readonly restoring: ReadonlyMap<number, RestoreProgress>
  /** How each running task of a stateful transformer restored its store. */
  readonly restores: ReadonlyMap<number, TaskRestore>
  /**
   * Checkpoint lag of each running stateful task: changelog records written
   * at or after its store's checkpoint (what a restart of it would read again).
   */
  readonly checkpointLags: ReadonlyMap<number, number>
  /** The standby replicas this instance keeps warm (`standbyReplicas`), by partition. */
  readonly standbys: ReadonlyMap<number, StandbyState>
  /** A `DatabaseSink`'s running tasks: the owner epoch each holds, its dead letters not yet published. */
  readonly sinkPartitions: ReadonlyMap<number, SinkPartition>
  /** Standby replicas dropped after a failure. */
  readonly standbyFailures: number
  /**
   * Records the transformer's windowed aggregations (a topology's) dropped as
   * late, per operator, as this process counted them for its application.
   */
  readonly lateRecords: ReadonlyMap<string, number>
  /**
   * Records the transformer's tables and stream-table joins (a topology's)
   * dropped as Kafka Streams drops them (no key; a stream record without a
   * value), per operator, as this process counted them for its application.
   */
  readonly droppedRecords: ReadonlyMap<string, number>
  /** Per input partition this run processed: input records committed past and commits. */
  readonly partitionCounts: ReadonlyMap<number, { readonly records: number; readonly commits: number }>
  /** Batch latency (fetch to commit) histogram: counts per `batchLatencyBounds` bucket, plus +Inf last. */
  readonly batchLatency: BatchLatency
  /** @internal For tests: the largest batch taken from the poll buffer. */
  readonly maxBatchRecords: number
  /** @internal For tests: transactions open right now (not maintained by the runtime at present). */
  readonly inFlightTransactions: number
  /** @internal For tests: teardowns that began while a transaction was open (should stay 0). */
  readonly teardownsWithTransactionInFlight: number
}

/** What one commit committed past. */
export interface Committed {
  readonly processed: number
  readonly skipped: number
  readonly deadLettered: number
}

/** The runtime's view of a run's stats: the read-only `Stats` plus the updates. */
export class RunnerStats implements Stats {
  #labels: ReadonlyArray<MetricLabel.MetricLabel> = Metrics.runLabels()
  #runner: { readonly applicationId: string; readonly transformer: string } | undefined = undefined
  readonly #phase: SubscriptionRef.SubscriptionRef<RunnerPhase> = Effect.runSync(SubscriptionRef.make<RunnerPhase>("starting"))
  readonly #assigned = new Set<number>()
  readonly #pending = new Set<number>()
  readonly #stopped = new Map<number, string>()
  readonly #lag = new Map<string, PartitionLag>()
  readonly #restoring = new Map<number, RestoreProgress>()
  readonly #restores = new Map<number, TaskRestore>()
  readonly #checkpointLags = new Map<number, number>()
  readonly #standbys = new Map<number, StandbyState>()
  readonly #sinkPartitions = new Map<number, SinkPartition>()
  readonly #partitionCounts = new Map<number, { records: number; commits: number }>()
  #lastCommitAt: number | undefined = undefined
  #healthPort: number | undefined = undefined
  #queryPort: number | undefined = undefined
  #maxBatchRecords = 0
  #inFlightTransactions = 0
  #teardownsWithTransactionInFlight = 0

  /** The metric labels of this run: its run id, then its application id and transformer. */
  get labels(): ReadonlyArray<MetricLabel.MetricLabel> {
    return this.#labels
  }

  // Reads

  get phase(): RunnerPhase {
    return Effect.runSync(SubscriptionRef.get(this.#phase))
  }
  get phaseChanges(): Stream.Stream<RunnerPhase> {
    return this.#phase.changes
  }
  get batches(): number {
    return this.#count(Metrics.batches)
  }
  get commits(): number {
    return this.#count(Metrics.commits)
  }
  get aborts(): number {
    return this.#count(Metrics.aborts)
  }
  get recordsProcessed(): number {
    return this.#count(Metrics.recordsProcessed)
  }
  get migrations(): number {
    return this.#count(Metrics.migrations)
  }
  get rebalances(): number {
    return this.#count(Metrics.rebalances)
  }
  get tasksStarted(): number {
    return this.#count(Metrics.tasksStarted)
  }
  get tasksStopped(): number {
    return this.#count(Metrics.tasksStopped)
  }
  get restoredRecords(): number {
    return this.#count(Metrics.restoredRecords)
  }
  get skipped(): number {
    return this.#count(Metrics.skipped)
  }
  get deadLettered(): number {
    return this.#count(Metrics.deadLettered)
  }
  get retries(): number {
    return this.#count(Metrics.retries)
  }
  get enforcedProcessing(): number {
    return this.#count(Metrics.enforcedProcessing)
  }
  get lastCommitAt(): number | undefined {
    return this.#lastCommitAt
  }
  get healthPort(): number | undefined {
    return this.#healthPort
  }
  get queryPort(): number | undefined {
    return this.#queryPort
  }
  get assigned(): ReadonlySet<number> {
    return this.#assigned
  }
  get pending(): ReadonlySet<number> {
    return this.#pending
  }
  get stopped(): ReadonlyMap<number, string> {
    return this.#stopped
  }
  get lag(): ReadonlyMap<string, PartitionLag> {
    return this.#lag
  }
  get restoring(): ReadonlyMap<number, RestoreProgress> {
    return this.#restoring
  }
  get restores(): ReadonlyMap<number, TaskRestore> {
    return this.#restores
  }
  get checkpointLags(): ReadonlyMap<number, number> {
    return this.#checkpointLags
  }
  get standbys(): ReadonlyMap<number, StandbyState> {
    return this.#standbys
  }
  get sinkPartitions(): ReadonlyMap<number, SinkPartition> {
    return this.#sinkPartitions
  }
  get standbyFailures(): number {
    return this.#count(Metrics.standbyFailures)
  }
  get lateRecords(): ReadonlyMap<string, number> {
    return this.#runner === undefined
      ? new Map()
      : Metrics.streamsLateRecordsByOperator(this.#runner.applicationId, this.#runner.transformer)
  }
  get droppedRecords(): ReadonlyMap<string, number> {
    return this.#runner === undefined
      ? new Map()
      : Metrics.streamsDroppedRecordsByOperator(this.#runner.applicationId, this.#runner.transformer)
  }
  get partitionCounts(): ReadonlyMap<number, { readonly records: number; readonly commits: number }> {
    return this.#partitionCounts
  }
  get batchLatency(): BatchLatency {
    const state = Metrics.batchLatency.unsafeValue(this.#labels)
    let previous = 0
    const buckets = state.buckets.map(([, cumulative]) => {
      const count = cumulative - previous
      previous = cumulative
      return count
    })
    return { count: state.count, sumMs: state.sum, buckets }
  }
  get maxBatchRecords(): number {
    return this.#maxBatchRecords
  }
  get inFlightTransactions(): number {
    return this.#inFlightTransactions
  }
  get teardownsWithTransactionInFlight(): number {
    return this.#teardownsWithTransactionInFlight
  }

  #count(counter: Metrics.Counter): number {
    return counter.unsafeValue(this.#labels).count
  }
  #add(counter: Metrics.Counter, n: number = 1): void {
    if (n !== 0) counter.unsafeUpdate(n, this.#labels)
  }
  #partitionsChanged(): void {
    Metrics.assignedPartitions.unsafeUpdate(this.#assigned.size, this.#labels)
    Metrics.pendingPartitions.unsafeUpdate(this.#pending.size, this.#labels)
    Metrics.stoppedPartitions.unsafeUpdate(this.#stopped.size, this.#labels)
  }

  // Phase

  /** A run begins: phase `starting`, metrics tagged with its application id and transformer (before any update). */
  begin(applicationId: string, transformer: string): Effect.Effect<void> {
    return Effect.zipRight(
      Effect.sync(() => {
        this.#labels = Metrics.withRunnerLabels(this.#labels, applicationId, transformer)
        this.#runner = { applicationId, transformer }
        this.#partitionsChanged()
      }),
      this.setPhase("starting")
    )
  }
  setPhase(phase: RunnerPhase): Effect.Effect<void> {
    return SubscriptionRef.set(this.#phase, phase)
  }
  /** The run ended: phase `stopped` unless it failed. */
  get finish(): Effect.Effect<void> {
    return SubscriptionRef.update(this.#phase, (phase) => phase === "failed" ? phase : "stopped")
  }
  setHealthPort(port: number): void {
    this.#healthPort = port
  }
  setQueryPort(port: number): void {
    this.#queryPort = port
  }

  // Counters and the histogram

  /** A batch of `records` was taken from the poll buffer. */
  recordBatch(records: number): void {
    this.#maxBatchRecords = Math.max(this.#maxBatchRecords, records)
    this.#add(Metrics.batches)
  }
  /** A transaction (or an offset commit) of task `partition` succeeded at `now` (epoch ms). */
  recordCommit(committed: Committed, now: number, partition: number): void {
    this.#add(Metrics.commits)
    this.#lastCommitAt = now
    this.#add(Metrics.recordsProcessed, committed.processed)
    const labels = Metrics.withPartition(this.#labels, partition)
    Metrics.partitionCommits.unsafeUpdate(1, labels)
    if (committed.processed > 0) Metrics.partitionRecordsProcessed.unsafeUpdate(committed.processed, labels)
    const counts = this.#partitionCounts.get(partition) ?? { records: 0, commits: 0 }
    counts.records += committed.processed
    counts.commits += 1
    this.#partitionCounts.set(partition, counts)
    this.#add(Metrics.skipped, committed.skipped)
    this.#add(Metrics.deadLettered, committed.deadLettered)
  }
  /** Offsets acknowledged in at-least-once mode were committed at `now` (epoch ms). */
  recordOffsetCommit(now: number): void {
    this.#lastCommitAt = now
  }
  recordRetries(retries: number): void {
    this.#add(Metrics.retries, retries)
  }
  recordEnforcedProcessing(records: number): void {
    this.#add(Metrics.enforcedProcessing, records)
  }
  recordAbort(): void {
    this.#add(Metrics.aborts)
  }
  recordMigration(): void {
    this.#add(Metrics.migrations)
  }
  recordRebalance(): void {
    this.#add(Metrics.rebalances)
  }
  /** Adds one batch's latency (fetch to commit) to the histogram. */
  observeBatchLatency(ms: number): void {
    Metrics.batchLatency.unsafeUpdate(ms, this.#labels)
  }

  // Tasks and partitions

  /** Partitions of a new assignment wait for their tasks. */
  addPending(partition: number): void {
    this.#pending.add(partition)
    this.#partitionsChanged()
  }
  /** Every task was torn down: nothing waits any more. */
  clearPending(): void {
    this.#pending.clear()
    this.#partitionsChanged()
  }
  setRestoreProgress(partition: number, restored: number, total: number): void {
    this.#restoring.set(partition, { restored, total })
  }
  /** A task's start ended (started or failed): it no longer waits nor restores. */
  taskStartEnded(partition: number): void {
    this.#restoring.delete(partition)
    this.#pending.delete(partition)
    this.#partitionsChanged()
  }
  /** A task started, after restoring its store when it has one. */
  recordTaskStarted(partition: number, restore: TaskRestore | undefined): void {
    this.#add(Metrics.tasksStarted)
    if (restore !== undefined) {
      this.#add(Metrics.restoredRecords, restore.records)
      this.#restores.set(partition, restore)
    }
    this.#assigned.add(partition)
    this.#partitionsChanged()
  }
  /** A running task's checkpoint lag (changelog records at or after its store's checkpoint). */
  setCheckpointLag(partition: number, records: number): void {
    this.#checkpointLags.set(partition, records)
    Metrics.taskCheckpointLag.unsafeUpdate(records, Metrics.withPartition(this.#labels, partition))
  }
  /** A `DatabaseSink`'s task: the owner epoch it holds, the dead letters it committed and has not published. */
  setSinkPartition(partition: number, state: SinkPartition): void {
    this.#sinkPartitions.set(partition, state)
    const labels = Metrics.withPartition(this.#labels, partition)
    Metrics.sinkOwnerEpoch.unsafeUpdate(state.epoch, labels)
    Metrics.sinkOutboxPending.unsafeUpdate(state.outboxPending, labels)
  }
  /** A standby replica's store reflects its changelog up to `position`, `lag` records behind its end. */
  setStandby(partition: number, position: number, lag: number): void {
    this.#standbys.set(partition, { position, lag })
    Metrics.standbyLag.unsafeUpdate(lag, Metrics.withPartition(this.#labels, partition))
  }
  /** A standby replica stopped (its store closed, kept). */
  removeStandby(partition: number): void {
    this.#standbys.delete(partition)
  }
  /** A standby replica was dropped after a failure. */
  recordStandbyFailure(): void {
    this.#add(Metrics.standbyFailures)
  }
  /** A task is being torn down: it no longer runs nor restores. */
  removeTask(partition: number): void {
    this.#assigned.delete(partition)
    this.#restoring.delete(partition)
    this.#restores.delete(partition)
    this.#checkpointLags.delete(partition)
    this.#sinkPartitions.delete(partition)
    this.#partitionsChanged()
  }
  /** A task's scope closed. */
  recordTaskStopped(): void {
    this.#add(Metrics.tasksStopped)
  }
  /** Counts `commit` as a transaction in flight while it runs (teardowns must never overlap one). */
  inTransaction<A, E, R>(commit: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> {
    return Effect.acquireUseRelease(
      Effect.sync(() => {
        this.#inFlightTransactions++
      }),
      () => commit,
      () =>
        Effect.sync(() => {
          this.#inFlightTransactions--
        })
    )
  }
  /** Every task is being torn down (a rebalance, a migration or the end of the run). */
  recordTeardown(): void {
    if (this.#inFlightTransactions > 0) this.#teardownsWithTransactionInFlight++
  }
  /** A partition stopped by a failure (failure isolation "partition"). */
  markStopped(partition: number, error: string): void {
    this.#stopped.set(partition, error)
    this.#pending.delete(partition)
    this.#partitionsChanged()
  }
  /**
   * A new assignment: stopped partitions stay stopped only while they stay
   * assigned, and the lag and per-partition counts of the partitions that
   * moved away are dropped (health and metrics show only this instance's).
   */
  keepStopped(assigned: ReadonlyArray<number>): void {
    for (const partition of [...this.#stopped.keys()]) {
      if (!assigned.includes(partition)) this.#stopped.delete(partition)
    }
    for (const [key, { partition }] of [...this.#lag]) {
      if (!assigned.includes(partition)) this.#lag.delete(key)
    }
    for (const partition of [...this.#partitionCounts.keys()]) {
      if (!assigned.includes(partition)) this.#partitionCounts.delete(partition)
    }
    this.#partitionsChanged()
  }
  /** Records behind the high watermark of an input topic partition, as of a fetch or a commit. */
  setLag(topic: string, partition: number, lag: number): void {
    this.#lag.set(`${topic}/${partition}`, { topic, partition, lag })
  }
}

/** Fresh stats for one run. */
export const makeStats = (): RunnerStats => new RunnerStats()

/** The runtime's view of `stats`, if `makeStats` made it. */
export const fromStats = (stats: Stats): Option.Option<RunnerStats> =>
  stats instanceof RunnerStats ? Option.some(stats) : Option.none()
