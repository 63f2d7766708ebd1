import { assert, describe, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Fiber, Metric, MetricState, Option, Schema, Stream } from "effect"
import { Health, Runner } from "../../src/index.ts"
import { makeStats } from "../../src/internal/runtime/RunnerStats.ts"
import type { RunnerStats } from "../../src/internal/runtime/RunnerStats.ts"

/** A runner's stats mid-run: two running tasks, one pending, one restoring, one stopped. */
const midRun = (): RunnerStats => {
  const stats = makeStats()
  Effect.runSync(stats.setPhase("running"))
  // Three tasks started (25 changelog records restored); the one of partition 1 was stopped by a failure.
  stats.recordTaskStarted(2, { mode: "full", reason: "no local state (no checkpoint)", records: 25, from: 0, until: 25, millis: 1 })
  stats.recordTaskStarted(0, { mode: "full", reason: "no local state (no checkpoint)", records: 0, from: 0, until: 0, millis: 1 })
  stats.recordTaskStarted(1, { mode: "full", reason: "no local state (no checkpoint)", records: 0, from: 0, until: 0, millis: 1 })
  stats.removeTask(1)
  stats.recordTaskStopped()
  stats.markStopped(1, "Invalid: bad-1")
  stats.addPending(3)
  stats.setRestoreProgress(3, 25, 100)
  stats.setLag("orders", 1, 7)
  stats.setLag("orders", 0, 3)
  stats.setLag("audit", 0, 0)
  for (let i = 0; i < 6; i++) stats.recordBatch(20)
  stats.recordRetries(2)
  stats.recordAbort()
  stats.recordRebalance()
  // Five commits, the last one at 1_700_000_000_500: 120 records past, 4 skipped and 3 dead-lettered.
  for (let i = 0; i < 4; i++) stats.recordCommit({ processed: 0, skipped: 0, deadLettered: 0 }, 1_700_000_000_000, i % 2 === 0 ? 0 : 2)
  stats.recordCommit({ processed: 120, skipped: 4, deadLettered: 3 }, 1_700_000_000_500, 2)
  return stats
}

/** The samples of an exposition, by `name{labels}`. */
const samples = (text: string): Map<string, string> =>
  new Map(
    text.split("\n").filter((line) => line !== "" && !line.startsWith("#")).map((line) => {
      const space = line.lastIndexOf(" ")
      return [line.slice(0, space), line.slice(space + 1)] as const
    })
  )

/** One sample line of the text format 0.0.4: `name{label="escaped value",...} value`. */
const labelPair = String.raw`[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"`
const sampleLine = new RegExp(
  String.raw`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{${labelPair}(,${labelPair})*\})? ([-+]?[0-9.eE+-]+|NaN|[+-]Inf)$`
)

describe("Health.snapshot", () => {
  it.effect("reads sorted partitions, stopped errors, lag with its total, counters and restore progress", () =>
    Effect.gen(function*() {
      const snapshot = yield* Health.snapshot(midRun())
      assert.strictEqual(snapshot.phase, "running")
      assert.deepStrictEqual(snapshot.assigned, [0, 2])
      assert.deepStrictEqual(snapshot.pending, [3])
      assert.deepStrictEqual(snapshot.stopped, [{ partition: 1, error: "Invalid: bad-1" }])
      assert.deepStrictEqual(snapshot.lag, {
        total: 10,
        partitions: [
          { topic: "audit", partition: 0, lag: 0 },
          { topic: "orders", partition: 0, lag: 3 },
          { topic: "orders", partition: 1, lag: 7 }
        ]
      })
      assert.deepStrictEqual(snapshot.lastCommitAt, Option.some(new Date(1_700_000_000_500)))
      assert.deepStrictEqual(snapshot.restoring, [{ partition: 3, restored: 25, total: 100 }])
      assert.strictEqual(snapshot.counters.recordsProcessed, 120)
      assert.strictEqual(snapshot.counters.deadLettered, 3)
      assert.strictEqual(snapshot.counters.tasksStarted, 3)
    }))

  it.effect("is a copy: later changes to the stats do not show in it", () =>
    Effect.gen(function*() {
      const stats = midRun()
      const snapshot = yield* Health.snapshot(stats)
      stats.recordTaskStarted(9, { mode: "full", reason: "no local state (no checkpoint)", records: 0, from: 0, until: 0, millis: 1 })
      stats.recordCommit({ processed: 1, skipped: 0, deadLettered: 0 }, 1_700_000_001_000, 0)
      assert.deepStrictEqual(snapshot.assigned, [0, 2])
      assert.strictEqual(snapshot.counters.commits, 5)
    }))

  it.effect("encodes to JSON with lastCommitAt as an ISO string or null, and decodes back", () =>
    Effect.gen(function*() {
      const snapshot = yield* Health.snapshot(midRun())
      const json = yield* Schema.encode(Health.HealthSnapshot)(snapshot)
      assert.strictEqual(json.lastCommitAt, "2023-11-14T22:13:20.500Z")
      assert.deepStrictEqual(yield* Schema.decode(Health.HealthSnapshot)(JSON.parse(JSON.stringify(json))), snapshot)
      const fresh = yield* Schema.encode(Health.HealthSnapshot)(yield* Health.snapshot(Runner.makeStats()))
      assert.strictEqual(fresh.lastCommitAt, null)
    }))
})

describe("Health.isLive / isReady", () => {
  it.effect("a fresh runner is live but not ready", () =>
    Effect.gen(function*() {
      const snapshot = yield* Health.snapshot(Runner.makeStats())
      assert.isTrue(Health.isLive(snapshot))
      assert.isFalse(Health.isReady(snapshot))
    }))

  it.effect("ready only when running with nothing pending or restoring; stopped partitions do not matter", () =>
    Effect.gen(function*() {
      const stats = midRun()
      assert.isFalse(Health.isReady(yield* Health.snapshot(stats)), "pending and restoring")
      stats.clearPending()
      assert.isFalse(Health.isReady(yield* Health.snapshot(stats)), "restoring")
      stats.taskStartEnded(3)
      assert.isTrue(Health.isReady(yield* Health.snapshot(stats)), "a stopped partition does not fail readiness")
      assert.isTrue(Health.isLive(yield* Health.snapshot(stats)), "nor liveness")
      yield* stats.setPhase("stopping")
      assert.isFalse(Health.isReady(yield* Health.snapshot(stats)))
      assert.isTrue(Health.isLive(yield* Health.snapshot(stats)))
    }))

  it.effect("a failed run is neither live nor ready", () =>
    Effect.gen(function*() {
      const stats = makeStats()
      yield* stats.setPhase("failed")
      const snapshot = yield* Health.snapshot(stats)
      assert.isFalse(Health.isLive(snapshot))
      assert.isFalse(Health.isReady(snapshot))
    }))
})

describe("Health.prometheus", () => {
  it("every sample line parses and every family has HELP and TYPE before its samples", () => {
    const stats = midRun()
    stats.observeBatchLatency(12)
    const text = Health.prometheus(stats, { applicationId: "orders-app", transformer: "enrich" })
    assert.isTrue(text.endsWith("\n"))
    const described = new Set<string>()
    const typed = new Map<string, string>()
    for (const line of text.trimEnd().split("\n")) {
      const [, help] = /^# HELP ([a-z_]+) \S.*$/.exec(line) ?? []
      const [, typeName, type] = /^# TYPE ([a-z_]+) (counter|gauge|histogram)$/.exec(line) ?? []
      if (help !== undefined) described.add(help)
      else if (typeName !== undefined && type !== undefined) typed.set(typeName, type)
      else {
        assert.match(line, sampleLine)
        const name = line.split(/[{ ]/)[0] ?? ""
        const family = typed.has(name) ? name : name.replace(/_(bucket|sum|count)$/, "")
        assert.isTrue(described.has(family) && typed.has(family), `${line} follows its HELP and TYPE`)
        assert.include(line, `application_id="orders-app",transformer="enrich"`)
      }
    }
    for (const [name, type] of typed) if (name.endsWith("_total")) assert.strictEqual(type, "counter", name)
    assert.strictEqual(typed.get("skein_batch_latency_seconds"), "histogram")
  })

  it("exports the counters and gauges", () => {
    const text = Health.prometheus(midRun())
    const values = samples(text)
    assert.strictEqual(values.get("skein_up"), "1")
    assert.strictEqual(values.get("skein_ready"), "0")
    assert.strictEqual(values.get("skein_records_processed_total"), "120")
    assert.strictEqual(values.get("skein_commits_total"), "5")
    assert.strictEqual(values.get("skein_aborts_total"), "1")
    assert.strictEqual(values.get("skein_retries_total"), "2")
    assert.strictEqual(values.get("skein_dead_lettered_total"), "3")
    assert.strictEqual(values.get("skein_skipped_total"), "4")
    assert.strictEqual(values.get("skein_rebalances_total"), "1")
    assert.strictEqual(values.get("skein_restored_records_total"), "25")
    assert.strictEqual(values.get("skein_assigned_partitions"), "2")
    assert.strictEqual(values.get("skein_pending_partitions"), "1")
    assert.strictEqual(values.get("skein_stopped_partitions"), "1")
    assert.strictEqual(values.get(`skein_partition_stopped{partition="1"}`), "1")
    assert.strictEqual(values.get(`skein_consumer_lag{topic="orders",partition="1"}`), "7")
    assert.strictEqual(values.get(`skein_consumer_lag{topic="audit",partition="0"}`), "0")
    assert.strictEqual(values.get(`skein_restore_progress_ratio{partition="3"}`), "0.25")
    assert.strictEqual(values.get("skein_last_commit_timestamp_seconds"), "1700000000.5")
    assert.strictEqual(values.get(`skein_partition_records_processed_total{partition="2"}`), "120")
    assert.strictEqual(values.get(`skein_partition_records_processed_total{partition="0"}`), "0")
    assert.strictEqual(values.get(`skein_partition_commits_total{partition="0"}`), "2")
    assert.strictEqual(values.get(`skein_partition_commits_total{partition="2"}`), "3")
  })

  it("shows each task's checkpoint lag and each standby's position and lag", () =>
    Effect.gen(function*() {
      const stats = midRun()
      stats.setCheckpointLag(2, 40)
      stats.setStandby(5, 1200, 30)
      stats.setStandby(4, 900, 0)
      stats.recordStandbyFailure()
      const snapshot = yield* Health.snapshot(stats)
      assert.deepStrictEqual(snapshot.restores.map((r) => [r.partition, r.checkpointLag]), [[0, 0], [2, 40]])
      assert.deepStrictEqual(snapshot.standbys, [
        { partition: 4, position: 900, lag: 0 },
        { partition: 5, position: 1200, lag: 30 }
      ])
      assert.strictEqual(snapshot.counters.standbyFailures, 1)
      const values = samples(Health.prometheus(stats))
      assert.strictEqual(values.get(`skein_task_checkpoint_lag_records{partition="2"}`), "40")
      assert.strictEqual(values.get(`skein_standby_lag_records{partition="5"}`), "30")
      assert.strictEqual(values.get(`skein_standby_lag_records{partition="4"}`), "0")
      assert.strictEqual(values.get("skein_standby_failures_total"), "1")
      // A stopped standby or task leaves the snapshot.
      stats.removeStandby(5)
      stats.removeTask(2)
      const later = yield* Health.snapshot(stats)
      assert.deepStrictEqual(later.standbys.map((s) => s.partition), [4])
      assert.deepStrictEqual(later.restores.map((r) => r.partition), [0])
    }))

  it("per-partition counters are Effect metrics tagged with the run's labels and the partition", () => {
    const stats = makeStats()
    Effect.runSync(stats.begin("metrics-app", "per-partition"))
    stats.recordCommit({ processed: 7, skipped: 0, deadLettered: 0 }, 1, 4)
    stats.recordCommit({ processed: 5, skipped: 0, deadLettered: 0 }, 2, 4)
    const series = Metric.unsafeSnapshot().filter((pair) =>
      pair.metricKey.name === "skein_partition_records_processed_total" &&
      pair.metricKey.tags.some((tag) => tag.key === "transformer" && tag.value === "per-partition")
    )
    assert.strictEqual(series.length, 1)
    const tags = Object.fromEntries(series[0]!.metricKey.tags.map((tag) => [tag.key, tag.value]))
    assert.strictEqual(tags["partition"], "4")
    assert.strictEqual(tags["application_id"], "metrics-app")
    assert.deepStrictEqual(series[0]!.metricState, MetricState.counter(12))
  })

  it("a failed run reports skein_up 0; no commit yet: no last commit sample", () => {
    const stats = makeStats()
    Effect.runSync(stats.setPhase("failed"))
    const text = Health.prometheus(stats)
    assert.strictEqual(samples(text).get("skein_up"), "0")
    assert.include(text, "# TYPE skein_last_commit_timestamp_seconds gauge\n")
    assert.isFalse([...samples(text).keys()].includes("skein_last_commit_timestamp_seconds"))
  })

  it("the batch latency histogram has cumulative buckets in seconds, +Inf, _sum and _count", () => {
    const stats = makeStats()
    for (const ms of [3, 5, 7, 40, 40, 900, 20_000]) stats.observeBatchLatency(ms)
    const values = samples(Health.prometheus(stats))
    const bucket = (le: string) => values.get(`skein_batch_latency_seconds_bucket{le="${le}"}`)
    assert.strictEqual(bucket("0.005"), "2", "3 ms and 5 ms (le is inclusive)")
    assert.strictEqual(bucket("0.01"), "3")
    assert.strictEqual(bucket("0.025"), "3")
    assert.strictEqual(bucket("0.05"), "5")
    assert.strictEqual(bucket("0.5"), "5")
    assert.strictEqual(bucket("1"), "6")
    assert.strictEqual(bucket("10"), "6")
    assert.strictEqual(bucket("+Inf"), "7")
    const sum = (3 + 5 + 7 + 40 + 40 + 900 + 20_000) / 1000
    assert.strictEqual(values.get("skein_batch_latency_seconds_sum"), String(sum))
    assert.strictEqual(values.get("skein_batch_latency_seconds_count"), "7")
    const counts = [...values].filter(([key]) => key.startsWith("skein_batch_latency_seconds_bucket"))
      .map(([, value]) => Number(value))
    assert.strictEqual(counts.length, 12, "11 bounds and +Inf")
    assert.deepStrictEqual(counts, [...counts].sort((a, b) => a - b), "non-decreasing")
  })

  it("escapes backslashes, double quotes and newlines in label values", () => {
    const text = Health.prometheus(Runner.makeStats(), { applicationId: "a\\b\"c\nd" })
    assert.include(text, `skein_up{application_id="a\\\\b\\"c\\nd"} 1`)
    for (const line of text.trimEnd().split("\n")) if (!line.startsWith("#")) assert.match(line, sampleLine)
  })
})

describe("Runner.Stats metrics", () => {
  it("two runs in one process keep their own counters and histograms", () => {
    const a = makeStats()
    const b = makeStats()
    a.recordCommit({ processed: 3, skipped: 0, deadLettered: 0 }, 1, 0)
    a.observeBatchLatency(7)
    b.recordAbort()
    assert.strictEqual(a.commits, 1)
    assert.strictEqual(a.recordsProcessed, 3)
    assert.strictEqual(a.aborts, 0)
    assert.strictEqual(b.commits, 0)
    assert.strictEqual(b.aborts, 1)
    assert.strictEqual(a.batchLatency.count, 1)
    assert.strictEqual(b.batchLatency.count, 0)
    assert.strictEqual(samples(Health.prometheus(b)).get("skein_batch_latency_seconds_count"), "0")
  })

  it("a run tags its metrics with its application id and transformer; the exposition has no run id label", () => {
    const stats = makeStats()
    Effect.runSync(stats.begin("orders-app", "enrich"))
    stats.recordAbort()
    assert.deepStrictEqual(stats.labels.map((label) => label.key), ["skein_run_id", "application_id", "transformer"])
    const text = Health.prometheus(stats)
    assert.strictEqual(samples(text).get("skein_aborts_total"), "1")
    assert.notInclude(text, "skein_run_id")
  })
})

describe("Health.changes", () => {
  it.effect("emits the current phase, then each change", () =>
    Effect.gen(function*() {
      const stats = makeStats()
      const subscribed = yield* Deferred.make<void>()
      const fiber = yield* Health.changes(stats).pipe(
        Stream.tap(() => Deferred.succeed(subscribed, undefined)),
        Stream.takeUntil((phase) => phase === "stopped"),
        Stream.runCollect,
        Effect.fork
      )
      yield* Deferred.await(subscribed)
      yield* stats.setPhase("running")
      yield* stats.setPhase("stopping")
      yield* stats.finish
      const phases = yield* Fiber.join(fiber)
      assert.deepStrictEqual(Chunk.toReadonlyArray(phases), ["starting", "running", "stopping", "stopped"])
    }), 10_000)
})
