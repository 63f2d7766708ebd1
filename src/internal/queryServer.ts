/**
 * The HTTP query endpoint of a run (`queryPort`): plain HTTP with JSON, on
 * `@effect/platform`'s router and `node:http`, closed with its scope. What it
 * answers and how a request reads is `query/request.ts` and
 * `query/Queries.ts` (the path is read there, not by a router); this module
 * listens, checks the bearer token, and maps
 * answers and their failures to statuses:
 *
 * - 200 the answer; 400 a malformed key or parameter, a page too large; 401
 *   a missing or wrong token (logged without it); 404 an unknown transformer
 *   or store, or `NotHere` (the key's partition is not active here: ask its
 *   owner); 503 `NotReady` (restoring: retry, with `Retry-After`).
 *
 * @internal
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Effect, Either, Redacted } from "effect"
import type { Scope } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import * as Http from "node:http"
import { QueryServerError } from "../SkeinError.ts"
import * as Queries from "./query/Queries.ts"
import * as QueryError from "./query/QueryError.ts"
import * as Request from "./query/request.ts"

export interface Options {
  /** 0 listens on any free port; `serve` returns the bound one. */
  readonly port: number
  readonly host: string
  /** The bearer token every request must carry; unset: none. */
  readonly token?: Redacted.Redacted | undefined
}

/** Addresses only this machine reaches. */
const loopback: ReadonlySet<string> = new Set(["127.0.0.1", "localhost", "::1"])

const digest = (text: string): Buffer => createHash("sha256").update(text).digest()

/** True when `header` is `Bearer <token>` (compared in constant time). */
export const authorized = (header: string | undefined, token: Redacted.Redacted): boolean => {
  const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header)
  const given = match?.[1]
  return given !== undefined && timingSafeEqual(digest(given), digest(String(Redacted.value(token))))
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(body, { status, headers })

/** The response to `url` (a request's path and search) from `source`. */
export const respond = (
  source: Queries.Source,
  url: string
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  const query = Request.parse(url)
  if (Either.isLeft(query)) {
    const error = query.left
    return Effect.succeed(
      error._tag === "NoRoute"
        ? json(404, {
          error: "NotFound",
          message: "not a query: see GET /state/{transformer}/{key}, /stores/{store}/keys/{key}, " +
            "/stores/{store}/range, /stores/{store}/prefix"
        })
        : json(QueryError.status(error), QueryError.body(error))
    )
  }
  return Queries.answer(source, query.right).pipe(
    Effect.map((body) => json(200, body)),
    Effect.catchAll((error) =>
      Effect.succeed(json(
        QueryError.status(error),
        QueryError.body(error),
        error._tag === "NotReady" ? { "retry-after": String(Math.ceil(error.retryAfterMillis / 1000)) } : {}
      ))
    )
  )
}

const handler = (source: Queries.Source, token: Redacted.Redacted | undefined) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (request.method !== "GET") {
      return json(405, { error: "MethodNotAllowed", message: "queries are GET requests" }, { allow: "GET" })
    }
    if (token !== undefined && !authorized(request.headers["authorization"], token)) {
      const path = request.url.split("?")[0] ?? ""
      const why = request.headers["authorization"] === undefined ? "no bearer token" : "a wrong bearer token"
      const from = request.remoteAddress._tag === "Some" ? request.remoteAddress.value : "?"
      yield* Effect.logWarning(`query endpoint: refused ${request.method} ${path} from ${from}: ${why}`)
      return json(401, { error: "Unauthorized", message: "this endpoint needs Authorization: Bearer <queryToken>" }, {
        "www-authenticate": "Bearer"
      })
    }
    return yield* respond(source, request.url)
  })

/** Classifies a `listen` failure (a Node system error) by its code. */
const listenError = (cause: unknown, options: Options): QueryServerError => {
  const code = typeof cause === "object" && cause !== null && "code" in cause ? cause.code : undefined
  const reason = code === "EADDRINUSE"
    ? "PortInUse"
    : code === "EACCES"
    ? "PermissionDenied"
    : code === "EADDRNOTAVAIL" || code === "ENOTFOUND"
    ? "AddressUnavailable"
    : "Unknown"
  return new QueryServerError({ reason, port: options.port, host: options.host, cause })
}

/** Serves the queries of `source` until the scope closes; fails at once if it cannot listen. */
export const serve = (
  source: Queries.Source,
  options: Options
): Effect.Effect<{ readonly port: number }, QueryServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const server = yield* NodeHttpServer.make(() => Http.createServer(), { port: options.port, host: options.host })
      .pipe(Effect.mapError((error) => listenError(error.cause, options)))
    // The request's path is read by `request.ts`, not a router: a router answers a malformed
    // percent-encoding with an empty 404, where a query answers a 400 that says what is wrong.
    yield* server.serve(handler(source, options.token))
    if (options.token === undefined && !loopback.has(options.host)) {
      yield* Effect.logWarning(
        `the query endpoint listens on ${options.host} without a token: anyone who reaches it reads the state. ` +
          "Set queryToken (SKEIN_QUERY_TOKEN), or queryHost to 127.0.0.1"
      )
    }
    yield* Effect.logInfo(
      `query endpoint on ${options.host}:${server.address._tag === "TcpAddress" ? server.address.port : options.port}` +
        (options.token === undefined ? "" : " (bearer token required)")
    )
    return { port: server.address._tag === "TcpAddress" ? server.address.port : options.port }
  })
