import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { Runner } from "../../src/index.ts"
import * as HealthServer from "../../src/internal/healthServer.ts"
import { makeStats } from "../../src/internal/RunnerStats.ts"

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
})
