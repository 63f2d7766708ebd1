/**
 * The HTTP health and metrics endpoint of a runner: liveness, readiness (the
 * health snapshot as JSON) and Prometheus metrics. It listens with
 * `node:http`, which Node, Bun and Deno all provide, and closes with its scope.
 *
 * @internal
 */
import { HttpRouter, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect } from "effect"
import type { Scope } from "effect"
import * as Http from "node:http"
import * as Health from "../Health.ts"
import { HealthServerError } from "../SkeinError.ts"
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
