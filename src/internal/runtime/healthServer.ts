/**
 * The HTTP health and metrics endpoint of a runner: liveness, readiness (the
 * health snapshot as JSON) and Prometheus metrics. It listens with
 * `node:http`, which Node, Bun and Deno all provide, and closes with its scope.
 *
 * @internal
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Effect, Schema } from "effect"
import type { Scope } from "effect"
import * as Http from "node:http"
import * as Health from "../../Health.ts"
import { HealthServerError } from "../../SkeinError.ts"
import type { Stats } from "./RunnerStats.ts"

export interface Options {
  /** 0 listens on any free port; `serve` returns the bound one. */
  readonly port: number
  /** Default: every interface. */
  readonly host?: string | undefined
  readonly labels?: Health.Labels | undefined
}

/** The content type of the Prometheus text exposition format. */
export const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

const routes = (stats: Stats, labels: Health.Labels | undefined) =>
  HttpRouter.empty.pipe(
    HttpRouter.get(
      "/health/live",
      Effect.map(Health.snapshot(stats), (snapshot) => {
        const live = Health.isLive(snapshot)
        return HttpServerResponse.unsafeJson(
          { status: live ? "live" : "failed", phase: snapshot.phase },
          { status: live ? 200 : 503 }
        )
      })
    ),
    HttpRouter.get(
      "/health/ready",
      Effect.flatMap(Health.snapshot(stats), (snapshot) =>
        HttpServerResponse.schemaJson(Health.HealthSnapshot)(snapshot, {
          status: Health.isReady(snapshot) ? 200 : 503
        }))
    ),
    HttpRouter.get(
      "/metrics",
      Effect.sync(() => HttpServerResponse.text(Health.prometheus(stats, labels), { contentType: metricsContentType }))
    )
  )

/** Classifies a `listen` failure (a Node system error) by its code. */
const listenError = (cause: unknown, options: Options): HealthServerError => {
  const code = typeof cause === "object" && cause !== null && "code" in cause ? cause.code : undefined
  const reason = code === "EADDRINUSE"
    ? "PortInUse"
    : code === "EACCES"
    ? "PermissionDenied"
    : code === "EADDRNOTAVAIL" || code === "ENOTFOUND"
    ? "AddressUnavailable"
    : "Unknown"
  return new HealthServerError({ reason, port: options.port, host: options.host, cause })
}

/**
 * Serves the health endpoints of `stats` until the scope closes:
 *
 * - `GET /health/live`: 200 `{"status":"live","phase":...}`, 503 once the run failed.
 * - `GET /health/ready`: 200 when ready else 503; the body is the health snapshot.
 * - `GET /metrics`: Prometheus text format 0.0.4.
 *
 * Fails at once if it cannot listen (e.g. the port is in use).
 */
export const serve = (
  stats: Stats,
  options: Options
): Effect.Effect<{ readonly port: number }, HealthServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const server = yield* NodeHttpServer.make(() => Http.createServer(), { port: options.port, host: options.host })
      .pipe(Effect.mapError((error) => listenError(error.cause, options)))
    yield* server.serve(routes(stats, options.labels))
    return { port: server.address._tag === "TcpAddress" ? server.address.port : options.port }
  })

/** One transformer of a shared endpoint (`Runner.runAll`). */
export interface Entry {
  readonly name: string
  readonly stats: Stats
  readonly labels: Health.Labels
}

/** The JSON of the shared readiness endpoint: ready when every transformer is, and each one's snapshot by name. */
export const AllSnapshot = Schema.Struct({
  ready: Schema.Boolean,
  transformers: Schema.Record({ key: Schema.String, value: Health.HealthSnapshot })
})

/**
 * Several Prometheus expositions as one: each metric family once (its
 * `# HELP` and `# TYPE` from the first), then the samples of every exposition.
 */
export const mergeExpositions = (texts: ReadonlyArray<string>): string => {
  const order: Array<string> = []
  const families = new Map<string, { header: Array<string>; samples: Array<string> }>()
  for (const text of texts) {
    let current: { header: Array<string>; samples: Array<string> } | undefined
    for (const line of text.split("\n")) {
      if (line === "") continue
      const help = /^# HELP (\S+)/.exec(line)
      if (help !== null) {
        const name = help[1]!
        const existing = families.get(name)
        if (existing === undefined) {
          current = { header: [line], samples: [] }
          families.set(name, current)
          order.push(name)
        } else {
          current = existing
        }
      } else if (line.startsWith("# TYPE ")) {
        if (current !== undefined && current.header.length === 1) current.header.push(line)
      } else {
        current?.samples.push(line)
      }
    }
  }
  return order.map((name) => {
    const family = families.get(name)!
    return [...family.header, ...family.samples].join("\n")
  }).join("\n") + "\n"
}

const routesAll = (entries: ReadonlyArray<Entry>, isolated: boolean) => {
  const snapshots = Effect.forEach(entries, (entry) => Effect.map(Health.snapshot(entry.stats), (s) => [entry.name, s] as const))
  return HttpRouter.empty.pipe(
    HttpRouter.get(
      "/health/live",
      Effect.map(snapshots, (all) => {
        // Failure isolation "transformer": live while any transformer is; otherwise while all are.
        const live = isolated ? all.some(([, s]) => Health.isLive(s)) : all.every(([, s]) => Health.isLive(s))
        return HttpServerResponse.unsafeJson(
          { status: live ? "live" : "failed", phases: Object.fromEntries(all.map(([name, s]) => [name, s.phase])) },
          { status: live ? 200 : 503 }
        )
      })
    ),
    HttpRouter.get(
      "/health/ready",
      Effect.flatMap(snapshots, (all) => {
        const ready = all.every(([, s]) => Health.isReady(s))
        return HttpServerResponse.schemaJson(AllSnapshot)({ ready, transformers: Object.fromEntries(all) }, {
          status: ready ? 200 : 503
        })
      })
    ),
    HttpRouter.get(
      "/metrics",
      Effect.sync(() =>
        HttpServerResponse.text(
          mergeExpositions(entries.map((entry) => Health.prometheus(entry.stats, entry.labels))),
          { contentType: metricsContentType }
        )
      )
    )
  )
}

/**
 * Serves one health endpoint for several runs (`Runner.runAll`) until the scope closes:
 *
 * - `GET /health/live`: 200 `{"status":"live","phases":{name: phase}}` while every run is live
 *   (with `isolated`, while any is), else 503.
 * - `GET /health/ready`: 200 when every run is ready, else 503; the body is `AllSnapshot`.
 * - `GET /metrics`: every run's metrics, told apart by their `application_id` and `transformer` labels.
 */
export const serveAll = (
  entries: ReadonlyArray<Entry>,
  options: Omit<Options, "labels"> & { readonly isolated: boolean }
): Effect.Effect<{ readonly port: number }, HealthServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const server = yield* NodeHttpServer.make(() => Http.createServer(), { port: options.port, host: options.host })
      .pipe(Effect.mapError((error) => listenError(error.cause, options)))
    yield* server.serve(routesAll(entries, options.isolated))
    return { port: server.address._tag === "TcpAddress" ? server.address.port : options.port }
  })
