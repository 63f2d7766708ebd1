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
 *   owner, named in the answer); 503 `NotReady` (restoring: retry, with
 *   `Retry-After`).
 *
 * Forwarding: a query whose partition runs on another instance (as the
 * group's routes name it, `QueryRoutes`) is forwarded to it once and its
 * answer returned, unless the request says `x-skein-forward: no` (a client
 * that routes itself) or was forwarded already (`x-skein-forwarded-by`): then
 * it is `NotHere` naming the owner. An owner that does not answer is a 503
 * `NotReady` (reason `unreachable`). Every answer names the instance that
 * read it in `x-skein-served-by`. A scan of every partition (no
 * `partition=`) is answered from every owner's page, merged in key order
 * (`scanAll`).
 *
 * @internal
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Duration, Effect, Either, Layer, Option, Redacted, Schema } from "effect"
import type { Scope } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import * as Http from "node:http"
import * as Https from "node:https"
import { QueryServerError } from "../../SkeinError.ts"
import * as Queries from "./Queries.ts"
import * as QueryError from "./QueryError.ts"
import type { QueryTls } from "./queryTls.ts"
import * as Request from "./request.ts"
import type * as SharedSources from "./SharedSources.ts"
import * as QueryRoutes from "./QueryRoutes.ts"
import { compare } from "../stores/keys.ts"

export interface Options {
  /** 0 listens on any free port; `serve` returns the bound one. */
  readonly port: number
  readonly host: string
  /** The bearer token every request must carry; unset: none. */
  readonly token?: Redacted.Redacted | undefined
  /** How long a forwarded query waits for its owner's answer (default `forwardTimeout`). */
  readonly forwardTimeout?: Duration.DurationInput | undefined
  /** Serve HTTPS with this certificate and key (and forward over HTTPS, trusting `ca`); unset: plain HTTP. */
  readonly tls?: QueryTls | undefined
}

/** The request headers of forwarding. */
export const headers = {
  /** `no`: answer from this instance only (`NotHere` names the owner). */
  forward: "x-skein-forward",
  /** Set on a forwarded request: the instance that forwarded it (never forwarded again). */
  forwardedBy: "x-skein-forwarded-by",
  /** Set on every answer: the instance whose store answered (or that refused). */
  servedBy: "x-skein-served-by"
} as const

/** How long a forwarded query waits for its owner's answer (beyond a position bound's own wait). */
export const forwardTimeout = Duration.seconds(5)

/** Forwards a query to the instance at an endpoint (`host:port`); the owner's answer, or a 503 `NotReady`. */
export type Forward = (owner: string, partition: number) => Effect.Effect<HttpServerResponse.HttpServerResponse>

/** The other instances, as a query reaches them. */
export interface Peers {
  /** The query, answered by the owner of its partition. */
  readonly forward: Forward
  /** The query, answered by the instance at `endpoint` from its own partitions (`undefined`: it did not answer). */
  readonly ask: (endpoint: string) => Effect.Effect<{ readonly status: number; readonly json: unknown } | undefined>
}

/** A scan's page as the instances answer it. */
const ScanPage = Schema.Struct({
  entries: Schema.Array(Schema.Struct({ key: Schema.String, value: Schema.Unknown, partition: Schema.Number })),
  partitions: Schema.Array(Schema.Number)
})

/**
 * A scan of every partition asked at one instance: its own page and every
 * other owner's (asked not to forward), merged in key order. A partition
 * answered twice (the routes moved under the scan) or an owner that does not
 * answer is a 503 `NotReady`; a partition no instance answered for leaves
 * `complete` false.
 */
const scanAll = (
  source: Queries.Source,
  query: Extract<Request.Query, { readonly _tag: "StoreScan" }>,
  owners: ReadonlyArray<string>,
  peers: Peers,
  served: Record<string, string>
): Effect.Effect<HttpServerResponse.HttpServerResponse, QueryError.QueryError> =>
  Effect.gen(function*() {
    const local = yield* Queries.answer(source, query)
    // This instance's own answer has the page's shape: anything else is a broken invariant.
    const pages: Array<typeof ScanPage.Type> = [yield* Effect.orDie(Schema.decodeUnknown(ScanPage)(local))]
    const answers = yield* Effect.forEach(owners, (owner) => Effect.map(peers.ask(owner), (answer) => ({ owner, answer })), {
      concurrency: "unbounded"
    })
    for (const { answer, owner } of answers) {
      const page = answer === undefined ? Option.none() : Schema.decodeUnknownOption(ScanPage)(answer.json)
      if (answer !== undefined && answer.status !== 200) return json(answer.status, answer.json, served)
      if (Option.isNone(page)) {
        const error = new QueryError.NotReady({ partition: -1, reason: "unreachable", retryAfterMillis: Queries.retryAfterMillis })
        return json(503, { ...QueryError.body(error), owner, message: `${owner} did not answer its part of the scan: retry` }, {
          ...served,
          "retry-after": "1"
        })
      }
      pages.push(page.value)
    }
    const partitions = pages.flatMap((page) => page.partitions).sort((a, b) => a - b)
    if (new Set(partitions).size !== partitions.length) {
      const error = new QueryError.NotReady({ partition: -1, reason: "unavailable", retryAfterMillis: Queries.retryAfterMillis })
      return json(503, { ...QueryError.body(error), message: "two instances answered for one partition (it is moving): retry" }, {
        ...served,
        "retry-after": "1"
      })
    }
    const entries = pages.flatMap((page) => page.entries).sort((a, b) => compare(a.key, b.key)).slice(0, query.limit)
    const last = entries[entries.length - 1]
    return json(200, {
      store: query.store,
      entries,
      next: entries.length === query.limit && last !== undefined ? last.key : null,
      partitions,
      complete: partitions.length === source.partitions
    }, served)
  })

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

/**
 * The response to `url` (a request's path and search) from `source`; a
 * `NotHere` whose owner is known goes to `forward` when given.
 */
export const respond = (
  source: Queries.Source,
  url: string,
  peers?: Peers | undefined
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  const self = source.self()
  const served: Record<string, string> = self === undefined ? {} : { [headers.servedBy]: self }
  const query = Request.parse(url)
  if (Either.isLeft(query)) {
    const error = query.left
    return Effect.succeed(
      error._tag === "NoRoute"
        ? json(404, {
          error: "NotFound",
          message: "not a query: see GET /metadata, /state/{transformer}/{key}, /stores/{store}/keys/{key}, " +
            "/stores/{store}/range, /stores/{store}/prefix, /stores/{store}/windows/{key}, /stores/{store}/sessions/{key}"
        })
        : json(QueryError.status(error), QueryError.body(error), served)
    )
  }
  const bound = Request.boundOf(url)
  if (Either.isLeft(bound)) return Effect.succeed(json(400, QueryError.body(bound.left), served))
  const allowStandby = Request.allowsStandby(url)
  if (Either.isLeft(allowStandby)) return Effect.succeed(json(400, QueryError.body(allowStandby.left), served))
  const question = query.right
  // A scan of every partition: this instance's page and the other owners'.
  const owners = peers === undefined || question._tag !== "StoreScan" || question.partition !== undefined
    ? []
    : QueryRoutes.byEndpoint(source.routes()).filter((e) => e.active.length > 0 && e.endpoint !== self).map((e) => e.endpoint)
  const answered = question._tag === "StoreScan" && owners.length > 0 && peers !== undefined
    ? scanAll(source, question, owners, peers, served)
    : Effect.map(Queries.answer(source, question, bound.right, allowStandby.right), (body) => json(200, body, served))
  return answered.pipe(
    Effect.catchAll((error) =>
      error._tag === "NotHere" && error.owner !== undefined && peers !== undefined
        ? peers.forward(error.owner, error.partition)
        : Effect.succeed(json(QueryError.status(error), QueryError.body(error), {
          ...served,
          ...(error._tag === "NotReady" ? { "retry-after": String(Math.ceil(error.retryAfterMillis / 1000)) } : {})
        }))
    )
  )
}

/** Forwarding over `client`: the request as it came (path and search), with this instance's token. */
const forwarding = (
  client: HttpClient.HttpClient,
  url: string,
  self: string | undefined,
  options: Options
): Peers => {
  const get = (endpoint: string) =>
    client.get(`${options.tls === undefined ? "http" : "https"}://${endpoint}${url}`, {
      headers: {
        [headers.forward]: "no",
        [headers.forwardedBy]: self ?? "?",
        ...(options.token === undefined ? {} : { authorization: `Bearer ${Redacted.value(options.token)}` })
      }
    })
  const wait = Duration.sum(
    options.forwardTimeout ?? forwardTimeout,
    Either.match(Request.boundOf(url), { onLeft: () => Duration.zero, onRight: (b) => Duration.millis(b?.timeoutMillis ?? 0) })
  )
  const ask = (endpoint: string) =>
    get(endpoint).pipe(
      Effect.flatMap((response) =>
        Effect.map(response.text, (text): { readonly status: number; readonly json: unknown } | undefined => {
          try {
            return { status: response.status, json: JSON.parse(text) }
          } catch {
            return undefined
          }
        })
      ),
      Effect.scoped,
      Effect.timeout(wait),
      Effect.orElseSucceed(() => undefined)
    )
  return { forward: forwardTo(get, wait, self), ask }
}

/** Forwarding to the owner: its answer as it is, or a 503 `NotReady` naming it. */
const forwardTo = (
  get: (endpoint: string) => Effect.Effect<HttpClientResponse.HttpClientResponse, HttpClientError.HttpClientError>,
  wait: Duration.Duration,
  self: string | undefined
): Forward =>
(owner, partition) =>
  get(owner).pipe(
    Effect.flatMap((response) =>
      Effect.map(response.text, (text) => {
        const retryAfter = response.headers["retry-after"]
        return HttpServerResponse.text(text, {
          status: response.status,
          contentType: "application/json",
          headers: {
            [headers.servedBy]: response.headers[headers.servedBy] ?? owner,
            ...(retryAfter === undefined ? {} : { "retry-after": retryAfter })
          }
        })
      })
    ),
    Effect.scoped,
    Effect.timeout(wait),
    Effect.catchAll(() => {
      const error = new QueryError.NotReady({ partition, reason: "unreachable", retryAfterMillis: Queries.retryAfterMillis })
      return Effect.succeed(json(QueryError.status(error), { ...QueryError.body(error), owner }, {
        ...(self === undefined ? {} : { [headers.servedBy]: self }),
        "retry-after": String(Math.ceil(error.retryAfterMillis / 1000))
      }))
    })
  )

const handler = (sources: Queries.Source | SharedSources.Pick, options: Options, client: HttpClient.HttpClient) =>
  Effect.gen(function*() {
    const token = options.token
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
    const picked = typeof sources === "function" ? sources(request.url) : Either.right(sources)
    if (Either.isLeft(picked)) {
      const error = picked.left
      return json(QueryError.status(error), QueryError.body(error), {
        ...(error._tag === "NotReady" ? { "retry-after": String(Math.ceil(error.retryAfterMillis / 1000)) } : {})
      })
    }
    const source = picked.right
    const peers = request.headers[headers.forward] === "no" || request.headers[headers.forwardedBy] !== undefined
      ? undefined
      : forwarding(client, request.url, source.self(), options)
    return yield* respond(source, request.url, peers)
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

/**
 * Serves the queries of `source` until the scope closes; fails at once if it
 * cannot listen. Several runs' endpoint (`Runner.runAll`) gives a `Pick`
 * instead, which picks each request's source (`SharedSources`).
 */
export const serve = (
  source: Queries.Source | SharedSources.Pick,
  options: Options
): Effect.Effect<{ readonly port: number }, QueryServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const tls = options.tls
    const server = yield* NodeHttpServer.make(
      () => tls === undefined ? Http.createServer() : Https.createServer({ cert: tls.cert, key: Redacted.value(tls.key) }),
      { port: options.port, host: options.host }
    ).pipe(Effect.mapError((error) => listenError(error.cause, options)))
    // The request's path is read by `request.ts`, not a router: a router answers a malformed
    // percent-encoding with an empty 404, where a query answers a 400 that says what is wrong.
    // Forwards over HTTPS trust the configured CA (a private one, typically), through Node's agent.
    const client = yield* HttpClient.HttpClient.pipe(
      Effect.provide(
        tls === undefined
          ? FetchHttpClient.layer
          : NodeHttpClient.layerWithoutAgent.pipe(
            Layer.provide(NodeHttpClient.makeAgentLayer(tls.ca === undefined ? {} : { ca: tls.ca }))
          )
      )
    )
    // @effect/platform runs an app uninterruptibly: a query's waits (a position bound, a forward) are
    // interruptible, or their timeouts could never end them.
    yield* server.serve(Effect.interruptible(handler(source, options, client)))
    if (options.token === undefined && !loopback.has(options.host)) {
      yield* Effect.logWarning(
        `the query endpoint listens on ${options.host} without a token: anyone who reaches it reads the state. ` +
          "Set queryToken (SKEIN_QUERY_TOKEN), or queryHost to 127.0.0.1"
      )
    }
    yield* Effect.logInfo(
      `query endpoint on ${tls === undefined ? "http" : "https"}://${options.host}:${
        server.address._tag === "TcpAddress" ? server.address.port : options.port
      }` + (options.token === undefined ? "" : " (bearer token required)")
    )
    return { port: server.address._tag === "TcpAddress" ? server.address.port : options.port }
  })
