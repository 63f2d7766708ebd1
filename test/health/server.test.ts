import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Exit, Schema, Scope } from "effect"
import { KGroupedStream, KStream, KTable, Runner, TimeWindowedKStream, TimeWindows, Topic, Topology, Windowed } from "../../src/index.ts"
import type { Transformer } from "../../src/index.ts"
import * as HealthServer from "../../src/internal/runtime/healthServer.ts"
import { applicationIdOf } from "../../src/internal/runtime/runAll.ts"
import { makeStats } from "../../src/internal/runtime/RunnerStats.ts"
import { TestDriver } from "../../src/testing/index.ts"

const get = (port: number, path: string) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`)
    const body = await response.text()
    return { status: response.status, contentType: response.headers.get("content-type"), body }
  })

describe("health server", () => {
  it.scopedLive("serves liveness, readiness and metrics, following the stats", () =>
    Effect.gen(function*() {
      const stats = makeStats()
      const { port } = yield* HealthServer.serve(stats, { port: 0, host: "127.0.0.1", labels: { applicationId: "app" } })
      assert.isAbove(port, 0)

      const starting = yield* get(port, "/health/ready")
      assert.strictEqual(starting.status, 503)
      assert.strictEqual(JSON.parse(starting.body).phase, "starting")
      assert.strictEqual((yield* get(port, "/health/live")).status, 200)

      yield* stats.setPhase("running")
      stats.recordTaskStarted(0, { mode: "full", reason: "no local state (no checkpoint)", records: 0, from: 0, until: 0, millis: 1 })
      stats.addPending(1)
      assert.strictEqual((yield* get(port, "/health/ready")).status, 503, "a pending partition")
      stats.taskStartEnded(1)
      stats.recordTaskStarted(1, { mode: "full", reason: "no local state (no checkpoint)", records: 0, from: 0, until: 0, millis: 1 })
      stats.markStopped(2, "Invalid: bad")
      stats.recordOffsetCommit(Date.UTC(2024, 0, 1))
      const ready = yield* get(port, "/health/ready")
      assert.strictEqual(ready.status, 200, "ready, a stopped partition notwithstanding")
      assert.match(ready.contentType ?? "", /^application\/json/)
      const body = JSON.parse(ready.body)
      assert.deepStrictEqual(body.assigned, [0, 1])
      assert.deepStrictEqual(body.stopped, [{ partition: 2, error: "Invalid: bad" }])
      assert.strictEqual(body.lastCommitAt, "2024-01-01T00:00:00.000Z")

      const metrics = yield* get(port, "/metrics")
      assert.strictEqual(metrics.status, 200)
      assert.match(metrics.contentType ?? "", /^text\/plain; version=0\.0\.4/)
      assert.include(metrics.body, `skein_assigned_partitions{application_id="app"} 2\n`)
      assert.include(metrics.body, `skein_partition_stopped{application_id="app",partition="2"} 1\n`)

      yield* stats.setPhase("failed")
      const live = yield* get(port, "/health/live")
      assert.strictEqual(live.status, 503)
      assert.deepStrictEqual(JSON.parse(live.body), { status: "failed", phase: "failed" })
      assert.strictEqual((yield* get(port, "/health/ready")).status, 503)
      assert.include((yield* get(port, "/metrics")).body, `skein_up{application_id="app"} 0\n`)

      assert.strictEqual((yield* get(port, "/nope")).status, 404)
    }))

  it.scopedLive("a port in use fails at startup with HealthServerError naming the port and the setting", () =>
    Effect.gen(function*() {
      const { port } = yield* HealthServer.serve(Runner.makeStats(), { port: 0, host: "127.0.0.1" })
      const error = yield* Effect.flip(HealthServer.serve(Runner.makeStats(), { port, host: "127.0.0.1" }))
      assert.strictEqual(error._tag, "HealthServerError")
      assert.strictEqual(error.reason, "PortInUse")
      assert.strictEqual(error.port, port)
      assert.include(error.message, String(port))
      assert.include(error.message, "SKEIN_HEALTH_PORT")
      assert.include(error.message, "healthPort")
    }))

  it.live("closing the scope closes the server", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const serve = HealthServer.serve(Runner.makeStats(), { port: 0, host: "127.0.0.1" })
      const { port } = yield* Scope.extend(serve, scope)
      assert.strictEqual((yield* get(port, "/health/live")).status, 200)
      yield* Scope.close(scope, Exit.void)
      const after = yield* Effect.tryPromise(() => fetch(`http://127.0.0.1:${port}/health/live`)).pipe(Effect.flip)
      assert.match(String(after.cause), /fetch failed|ECONNREFUSED/)
    }))

  it.scopedLive("serveAll: one endpoint for several runs, ready when all are, each metric family once", () =>
    Effect.gen(function*() {
      const a = makeStats()
      const b = makeStats()
      const { port } = yield* HealthServer.serveAll([
        { name: "a", stats: a, labels: { applicationId: "app-a", transformer: "a" } },
        { name: "b", stats: b, labels: { applicationId: "app-b", transformer: "b" } }
      ], { port: 0, host: "127.0.0.1", isolated: false })
      yield* a.setPhase("running")
      const one = yield* get(port, "/health/ready")
      assert.strictEqual(one.status, 503, "b is still starting")
      assert.deepStrictEqual(Object.keys(JSON.parse(one.body).transformers), ["a", "b"])
      yield* b.setPhase("running")
      const both = yield* get(port, "/health/ready")
      assert.strictEqual(both.status, 200)
      assert.strictEqual(JSON.parse(both.body).ready, true)
      const metrics = (yield* get(port, "/metrics")).body
      assert.strictEqual(metrics.split("# HELP skein_up ").length, 2)
      assert.strictEqual(metrics.split("# TYPE skein_up ").length, 2)
      assert.include(metrics, `skein_up{application_id="app-a",transformer="a"} 1\nskein_up{application_id="app-b",transformer="b"} 1\n`)
      yield* b.setPhase("failed")
      const live = yield* get(port, "/health/live")
      assert.strictEqual(live.status, 503)
      assert.deepStrictEqual(JSON.parse(live.body).phases, { a: "running", b: "failed" })
    }))

  it.scopedLive("a topology's late records on /metrics: skein_streams_late_records_total per windowed operator, its run's only", () =>
    Effect.gen(function*() {
      const Events = Topic.make({ name: "events", key: Schema.String, value: Topic.json(Schema.Struct({ at: Schema.Number })) })
      const Counts = Topic.make({ name: "counts", key: Windowed.json(Schema.String), value: Topic.json(Schema.Number) })
      const topology = Topology.make("counting", [
        KStream.fromTopics([Events], { timestamp: (record) => record.value.at }).pipe(
          KStream.groupByKey(),
          KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace(1000, 0)),
          TimeWindowedKStream.count({ name: "counts" }),
          KTable.toStream,
          KStream.to(Counts)
        )
      ])
      const compiled = Topology.compile(topology, "late-app")
      assert.ok(Either.isRight(compiled))
      if (Either.isLeft(compiled)) return
      const sub = compiled.right.subTopologies[0]!
      // The compiled transformer is a Transformer.Any: its inputs, state and errors erased by compile.
      const driver = yield* TestDriver.make(sub.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>)
      // [0, 1000) closes at stream time 1500 (grace 0): the records at 200 and 300 are late.
      yield* driver.pipeAll(Events, [100, 1500, 200, 300].map((at) => ({ key: "a", value: { at } })))

      // The topology's runs as Topology.run (runAll) starts them: its sub-topology's transformer under
      // `{applicationId}-{sub-topology}`, and another of the application without windows.
      const windowed = makeStats()
      yield* windowed.begin(applicationIdOf("late-app", sub), sub.name)
      const other = makeStats()
      yield* other.begin("late-app-other", "other")
      const { port } = yield* HealthServer.serveAll([
        { name: sub.name, stats: windowed, labels: { applicationId: applicationIdOf("late-app", sub), transformer: sub.name } },
        { name: "other", stats: other, labels: { applicationId: "late-app-other", transformer: "other" } }
      ], { port: 0, host: "127.0.0.1", isolated: false })
      const metrics = (yield* get(port, "/metrics")).body
      assert.include(
        metrics,
        "# HELP skein_streams_late_records_total Records a windowed aggregation dropped from a window that had closed " +
          "(Kafka Streams' dropped-records), per operator.\n# TYPE skein_streams_late_records_total counter\n" +
          `skein_streams_late_records_total{application_id="late-app-events",transformer="events",operator="counts"} 2\n`
      )
      assert.strictEqual(metrics.split("# TYPE skein_streams_late_records_total ").length, 2, "one family")
      assert.notInclude(metrics, `skein_streams_late_records_total{application_id="late-app-other"`)
    }))

  it.scopedLive("a topology's dropped records on /metrics: skein_streams_dropped_records_total per table and join", () =>
    Effect.gen(function*() {
      const Orders = Topic.make({ name: "orders", key: Schema.String, value: Schema.String })
      const Customers = Topic.make({ name: "customers", key: Schema.String, value: Schema.String })
      const Enriched = Topic.make({ name: "enriched", key: Schema.String, value: Schema.String })
      const topology = Topology.make("enriching", [
        KStream.from(Orders).pipe(
          KStream.join(KTable.from(Customers, { name: "customer-table" }), (order, customer) => `${order}:${customer}`, { name: "enrich" }),
          KStream.to(Enriched)
        )
      ])
      const compiled = Topology.compile(topology, "drop-app")
      assert.ok(Either.isRight(compiled))
      if (Either.isLeft(compiled)) return
      const sub = compiled.right.subTopologies[0]!
      // The compiled transformer is a Transformer.Any: its inputs, state and errors erased by compile.
      const driver = yield* TestDriver.make(sub.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>)
      // A table record without a key, then two stream records without one (an inner join drops them).
      yield* driver.pipeRaw("customers", { key: null, value: Buffer.from("eu") })
      yield* driver.pipeRaw("orders", { key: null, value: Buffer.from("o1") })
      yield* driver.pipeRaw("orders", { key: null, value: Buffer.from("o2") })

      const stats = makeStats()
      yield* stats.begin(applicationIdOf("drop-app", sub), sub.name)
      const { port } = yield* HealthServer.serveAll([
        { name: sub.name, stats, labels: { applicationId: applicationIdOf("drop-app", sub), transformer: sub.name } }
      ], { port: 0, host: "127.0.0.1", isolated: false })
      const metrics = (yield* get(port, "/metrics")).body
      const family = `skein_streams_dropped_records_total{application_id="${applicationIdOf("drop-app", sub)}",transformer="${sub.name}"`
      assert.include(metrics, "# TYPE skein_streams_dropped_records_total counter\n")
      assert.include(metrics, `${family},operator="customer-table"} 1\n`)
      assert.include(metrics, `${family},operator="enrich"} 2\n`)
    }))
})
