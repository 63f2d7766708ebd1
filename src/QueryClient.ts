/**
 * A typed client of the query endpoints of a running application (issue 33):
 * asks any instance, follows `NotHere` to the instance that owns the key,
 * retries `NotReady` (a partition restoring or moving, an owner not
 * answering) on a bounded schedule, and returns values decoded with the
 * transformer's and the stores' own Schemas. A scan (`range`, `prefix`) asks
 * every instance for the partitions it runs and merges their pages in key
 * order, so a page covers every partition.
 *
 * It speaks the plain HTTP and JSON any caller can (the README's "Queries"),
 * over `@effect/platform`'s `HttpClient`: provide one (`FetchHttpClient.layer`
 * works on Node, Bun and Deno).
 *
 * @example
 * ```ts
 * import { FetchHttpClient } from "@effect/platform"
 * import { Effect, Option, Redacted } from "effect"
 * import { QueryClient } from "skein"
 *
 * const program = Effect.gen(function*() {
 *   const client = yield* QueryClient.make({ endpoints: ["localhost:8081"], token: Redacted.make("s3cret") })
 *   const count = yield* client.state(WordCount, "alice") // Option<number>, decoded with WordCount's state Schema
 *   const total = yield* client.get(Totals, "alice")     // Option<V> of a KeyValueStore
 *   const page = yield* client.range(Totals, { from: "a", to: "m", limit: 100 })
 * }).pipe(Effect.provide(FetchHttpClient.layer))
 * ```
 *
 * @since 0.6.0
 */
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Array as Arr, Context, Data, Duration, Effect, Either, Layer, Option, Redacted, Ref, Schedule, Schema } from "effect"
import type { ParseResult } from "effect"
import { compare } from "./internal/stores/keys.ts"
import type * as KeyValueStore from "./KeyValueStore.ts"
import type * as SessionStore from "./SessionStore.ts"
import type * as Topic from "./Topic.ts"
import type * as WindowStore from "./WindowStore.ts"

/**
 * Why a query has no answer. `reason`:
 *
 * - `NotHere`: the instances asked do not run the key's partition and named
 *   no owner (the group is rebalancing), or the owners kept moving.
 * - `NotReady`: the partition is restoring, stopped, moving, or its owner
 *   did not answer (`detail` says which).
 * - `Unreachable`: no endpoint answered (connection refused, a timeout).
 * - `BadRequest`: the query is malformed (a key its Schema does not encode,
 *   a page too large, ...); `NotFound`: the application has no such
 *   transformer or store; `Unauthorized`: a missing or wrong token.
 * - `InvalidAnswer`: an answer, or a value in it, does not decode (a Schema
 *   that differs from the application's).
 * - `NotUpToBound`: the store did not reflect the query's `position` within
 *   its `timeout` (KIP-796).
 *
 * The first three are retried by the client's schedule before they are
 * returned.
 *
 * @since 0.6.0
 * @category errors
 */
export class QueryClientError extends Data.TaggedError("QueryClientError")<{
  readonly reason:
    | "NotHere"
    | "NotReady"
    | "Unreachable"
    | "NotUpToBound"
    | "BadRequest"
    | "NotFound"
    | "Unauthorized"
    | "InvalidAnswer"
  /** The endpoint that answered (or did not). */
  readonly endpoint: string
  /** The path and query asked. */
  readonly path: string
  /** The endpoint's own words (its `error` and `message`), or what went wrong. */
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return `query ${this.path} at ${this.endpoint}: ${this.reason}: ${this.detail}`
  }
}

/** The entries of one page when the client reads every page (the endpoints' largest). */
const pageLimit = 1000

/** The reasons the client retries. */
const retried: ReadonlySet<QueryClientError["reason"]> = new Set(["NotHere", "NotReady", "Unreachable"])

/**
 * The settings of a client.
 *
 * @since 0.6.0
 * @category models
 */
export interface Options {
  /** Query endpoints (`host:port`) of any instances of the application: the first that answers is asked first. */
  readonly endpoints: Arr.NonEmptyReadonlyArray<string>
  /** The application's `queryToken`, if it has one. */
  readonly token?: Redacted.Redacted | undefined
  /** `https` for endpoints serving TLS (default `http`). */
  readonly scheme?: "http" | "https" | undefined
  /** How `NotHere` without an owner, `NotReady` and `Unreachable` are retried (default: `defaultRetry`). */
  readonly retry?: Schedule.Schedule<unknown, QueryClientError> | undefined
  /** How many owners a query follows before it gives up (default 3). */
  readonly maxHops?: number | undefined
  /** How long one request waits for its answer (default 10 seconds). */
  readonly timeout?: Duration.DurationInput | undefined
  /**
   * The transformer whose stores and routes the client asks, at a
   * `Runner.runAll` endpoint (sent as `?transformer=`): needed there to ask a
   * store whose name several of its transformers declare, and for
   * `metadata` and `metadataForKey` when it serves several transformers. A
   * query's own `transformer` option overrides it; `state` always asks the
   * transformer it is given.
   */
  readonly transformer?: TransformerName | undefined
}

/**
 * A transformer a query names: the transformer itself (its `name` is read),
 * or its name.
 *
 * @since 0.6.0
 * @category models
 */
export type TransformerName = string | { readonly name: string }

/** The name of `transformer`, if one is given. */
const nameOf = (transformer: TransformerName | undefined): string | undefined =>
  transformer === undefined ? undefined : typeof transformer === "string" ? transformer : transformer.name

/**
 * The default retry: 100 ms doubling up to 1 s, at most 20 retries (about
 * 17 s in all), enough for a restore or a rebalance to finish.
 *
 * @since 0.6.0
 * @category schedules
 */
export const defaultRetry: Schedule.Schedule<unknown, QueryClientError> = Schedule.exponential("100 millis").pipe(
  Schedule.either(Schedule.spaced("1 second")),
  Schedule.intersect(Schedule.recurs(20))
)

/**
 * The options of a query by key: `partition` asks that partition instead of
 * the key's (a state key that is not the record key). `position` (KIP-796's
 * position bound) waits until the store reflects these input records (each
 * an input topic and an offset of the key's partition of it, e.g. the offset
 * a producer's send returned), at most `timeout` (default 10 s, at most
 * 60 s), then answers; past it the query fails with `NotUpToBound`.
 *
 * @since 0.6.0
 * @category models
 */
export interface KeyOptions {
  readonly partition?: number | undefined
  /**
   * Let an instance keeping a standby copy of the partition answer from it
   * (KIP-535's stale stores: committed state, possibly behind the active
   * task's) when the instance asked does not run the partition.
   */
  readonly allowStandby?: boolean | undefined
  readonly position?: ReadonlyArray<{ readonly topic: string; readonly offset: number }> | undefined
  readonly timeout?: Duration.DurationInput | undefined
  /**
   * The transformer whose store is asked, at a `Runner.runAll` endpoint
   * where several transformers declare a store of this name (overrides the
   * client's `transformer`).
   */
  readonly transformer?: TransformerName | undefined
}

/** The parameters of a key query's options; `transformer`: the one asked when the options name none. */
const keyParams = (options: KeyOptions, transformer: TransformerName | undefined): Record<string, string | number | undefined> => ({
  transformer: nameOf(options.transformer ?? transformer),
  partition: options.partition,
  allowStandby: options.allowStandby === true ? "true" : undefined,
  position: options.position === undefined ? undefined : options.position.map((b) => `${b.topic}:${b.offset}`).join(","),
  timeout: options.timeout === undefined || options.position === undefined
    ? undefined
    : Math.ceil(Duration.toMillis(Duration.decode(options.timeout)))
})

/**
 * A page of a scan: its entries in key order (each with its partition), and
 * the key to pass as `after` for the next page (none on the last page).
 *
 * @since 0.6.0
 * @category models
 */
export interface Page<K, V> {
  readonly entries: ReadonlyArray<KeyValueStore.Entry<K, V> & { readonly partition: number }>
  readonly next: Option.Option<K>
}

/**
 * The options of a scan: at most `limit` entries (default 100, at most
 * 1000) after the key `after`; `partition` reads only that partition;
 * `transformer` names the transformer whose store is read, at a
 * `Runner.runAll` endpoint where several declare a store of this name
 * (overrides the client's `transformer`).
 *
 * @since 0.6.0
 * @category models
 */
export interface ScanOptions<K> {
  readonly limit?: number | undefined
  readonly after?: K | undefined
  readonly partition?: number | undefined
  readonly transformer?: TransformerName | undefined
}

/**
 * Where a key is queried: its partition, the endpoint of the instance that
 * runs it (none known during a rebalance) and of its standbys (KIP-535).
 *
 * @since 0.6.0
 * @category models
 */
export interface KeyMetadata {
  readonly partition: number
  readonly active: Option.Option<string>
  readonly standbys: ReadonlyArray<string>
}

/**
 * The instances of the application and the partitions each runs and keeps
 * standbys of, as the instance asked knows them.
 *
 * @since 0.6.0
 * @category models
 */
export interface Metadata {
  readonly partitions: number
  readonly instances: ReadonlyArray<{
    readonly endpoint: string
    readonly active: ReadonlyArray<number>
    readonly standbys: ReadonlyArray<number>
  }>
  /** Partitions no instance with an endpoint runs now. */
  readonly unrouted: ReadonlyArray<number>
}

/** What the client reads of a transformer: its name and state codec. */
type WithState<S> = { readonly name: string; readonly state: Option.Option<Topic.Codec<S>> }

/**
 * A client of an application's query endpoints. Every query retries on
 * `options.retry` and fails with a `QueryClientError`.
 *
 * @since 0.6.0
 * @category models
 */
export interface QueryClient {
  /** A stateful transformer's committed state of a state key. */
  readonly state: <S>(
    transformer: WithState<S>,
    key: string,
    options?: Omit<KeyOptions, "transformer">
  ) => Effect.Effect<Option.Option<S>, QueryClientError>
  /** A `KeyValueStore`'s committed value of a key. */
  readonly get: <K, V>(store: KeyValueStore.KeyValueStore<K, V>, key: K, options?: KeyOptions) => Effect.Effect<Option.Option<V>, QueryClientError>
  /** A page of a `KeyValueStore`'s entries from `from` to `to` (both inclusive, each optional), in key order, over every partition. */
  readonly range: <K, V>(
    store: KeyValueStore.KeyValueStore<K, V>,
    options?: ScanOptions<K> & { readonly from?: K | undefined; readonly to?: K | undefined }
  ) => Effect.Effect<Page<K, V>, QueryClientError>
  /** A page of a `KeyValueStore`'s entries whose encoded key starts with `prefix`, in key order, over every partition. */
  readonly prefix: <K, V>(store: KeyValueStore.KeyValueStore<K, V>, prefix: string, options?: ScanOptions<K>) => Effect.Effect<Page<K, V>, QueryClientError>
  /** A `WindowStore`'s windows of a key that start from `from` to `to` (both inclusive), in start order (every page). */
  readonly windows: <K, V>(
    store: WindowStore.WindowStore<K, V>,
    key: K,
    from: number,
    to: number,
    options?: KeyOptions
  ) => Effect.Effect<ReadonlyArray<WindowStore.Entry<K, V>>, QueryClientError>
  /**
   * A `SessionStore`'s sessions of a key that end at or after `earliestEnd`
   * and start at or before `latestStart` (each optional: every session), by
   * end then start (every page).
   */
  readonly sessions: <K, V>(
    store: SessionStore.SessionStore<K, V>,
    key: K,
    options?: KeyOptions & { readonly earliestEnd?: number | undefined; readonly latestStart?: number | undefined }
  ) => Effect.Effect<ReadonlyArray<SessionStore.Entry<K, V>>, QueryClientError>
  /**
   * Where a key (its state key or record key text) is queried: its
   * partition, owner and standbys (in `transformer`'s group at a
   * `Runner.runAll` endpoint; default: the client's `transformer`).
   */
  readonly metadataForKey: (
    key: string,
    options?: { readonly transformer?: TransformerName | undefined }
  ) => Effect.Effect<KeyMetadata, QueryClientError>
  /** Every instance and its partitions (in the group of the client's `transformer` at a `Runner.runAll` endpoint). */
  readonly metadata: Effect.Effect<Metadata, QueryClientError>
}

/**
 * The client as a service.
 *
 * @since 0.6.0
 * @category tags
 */
export const QueryClient: Context.Tag<QueryClient, QueryClient> = Context.GenericTag<QueryClient>("skein/QueryClient")

// The answers, as the endpoints write them (values as their stored text: `format=text`).

const ErrorAnswer = Schema.Struct({
  error: Schema.String,
  message: Schema.optional(Schema.String),
  owner: Schema.optional(Schema.NullOr(Schema.String)),
  reason: Schema.optional(Schema.String)
})
const KeyAnswer = Schema.Struct({ partition: Schema.Number, found: Schema.Boolean, value: Schema.NullOr(Schema.String) })
const ScanAnswer = Schema.Struct({
  entries: Schema.Array(Schema.Struct({ key: Schema.String, value: Schema.String, partition: Schema.Number })),
  next: Schema.NullOr(Schema.String),
  partitions: Schema.Array(Schema.Number)
})
const WindowsAnswer = Schema.Struct({
  windows: Schema.Array(Schema.Struct({ start: Schema.Number, value: Schema.String })),
  next: Schema.NullOr(Schema.Number)
})
const SessionsAnswer = Schema.Struct({
  sessions: Schema.Array(Schema.Struct({ start: Schema.Number, end: Schema.Number, value: Schema.String })),
  next: Schema.NullOr(Schema.String)
})
const KeyMetadataAnswer = Schema.Struct({
  partition: Schema.Number,
  active: Schema.NullOr(Schema.String),
  standbys: Schema.Array(Schema.String)
})
const MetadataAnswer = Schema.Struct({
  partitions: Schema.Number,
  instances: Schema.Array(Schema.Struct({
    endpoint: Schema.String,
    active: Schema.Array(Schema.Number),
    standbys: Schema.Array(Schema.Number)
  })),
  unrouted: Schema.Array(Schema.Number)
})

/** An answer's status and JSON, from the endpoint that gave it. */
interface Answer {
  readonly endpoint: string
  readonly status: number
  readonly json: unknown
}

/** The reason of an endpoint's error answer. */
const reasonOf = (status: number, error: string): QueryClientError["reason"] =>
  status === 401
    ? "Unauthorized"
    : error === "NotHere"
    ? "NotHere"
    : error === "NotUpToBound"
    ? "NotUpToBound"
    : error === "NotReady" || status === 503
    ? "NotReady"
    : error === "UnknownStore" || error === "UnknownTransformer" || status === 404
    ? "NotFound"
    : status >= 400 && status < 500
    ? "BadRequest"
    : "InvalidAnswer"

/** A path with its parameters (unset ones left out), values as their stored text. */
const pathOf = (segments: ReadonlyArray<string>, params: Record<string, string | number | undefined>): string => {
  const search = new URLSearchParams({ format: "text" })
  for (const [name, value] of Object.entries(params)) if (value !== undefined) search.set(name, String(value))
  return `/${segments.map(encodeURIComponent).join("/")}?${search.toString()}`
}

/**
 * A client of the query endpoints `options.endpoints`, over the
 * `HttpClient` in context.
 *
 * @since 0.6.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<QueryClient, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const http = yield* HttpClient.HttpClient
    const scheme = options.scheme ?? "http"
    const maxHops = options.maxHops ?? 3
    const timeout = options.timeout ?? Duration.seconds(10)
    const retry = options.retry ?? defaultRetry
    const transformer = options.transformer
    // The configured endpoint asked first: the next one after one does not answer.
    const start = yield* Ref.make(0)
    const headers: Record<string, string> = {
      "x-skein-forward": "no",
      ...(options.token === undefined ? {} : { authorization: `Bearer ${Redacted.value(options.token)}` })
    }

    const failure = (answer: Answer, path: string): QueryClientError => {
      const error = Schema.decodeUnknownOption(ErrorAnswer)(answer.json)
      return Option.match(error, {
        onNone: () =>
          new QueryClientError({ reason: "InvalidAnswer", endpoint: answer.endpoint, path, detail: `status ${answer.status}` }),
        onSome: (body) =>
          new QueryClientError({
            reason: reasonOf(answer.status, body.error),
            endpoint: answer.endpoint,
            path,
            detail: `${body.error}${body.reason === undefined ? "" : ` (${body.reason})`}: ${body.message ?? ""}`
          })
      })
    }

    /** One request to one endpoint. */
    const send = (endpoint: string, path: string): Effect.Effect<Answer, QueryClientError> => {
      // A position bound waits at the endpoint: the request waits that long more.
      const bounded = new URLSearchParams(path.slice(path.indexOf("?") + 1)).get("timeout")
      const wait = Duration.sum(timeout, Duration.millis(bounded === null ? 0 : Number(bounded)))
      return http.get(`${scheme}://${endpoint}${path}`, { headers }).pipe(
        Effect.flatMap((response: HttpClientResponse.HttpClientResponse) =>
          Effect.map(response.text, (text) => ({ endpoint, status: response.status, text }))
        ),
        Effect.scoped,
        Effect.timeoutFail({
          duration: wait,
          onTimeout: () => new QueryClientError({ reason: "Unreachable", endpoint, path, detail: `no answer in ${Duration.format(wait)}` })
        }),
        Effect.catchTag("RequestError", "ResponseError", (cause) =>
          Effect.fail(new QueryClientError({ reason: "Unreachable", endpoint, path, detail: cause.message, cause }))),
        Effect.flatMap(({ endpoint, status, text }) =>
          Effect.try({
            try: (): Answer => ({ endpoint, status, json: JSON.parse(text) }),
            catch: (cause) =>
              new QueryClientError({ reason: "InvalidAnswer", endpoint, path, detail: `status ${status}, not JSON`, cause })
          })
        )
      )
    }

    /** A configured endpoint to start from; one that does not answer moves the start on. */
    const startingPoint = Effect.map(Ref.get(start), (i) => options.endpoints[i % options.endpoints.length] ?? options.endpoints[0])
    const moveOn = Ref.update(start, (i) => i + 1)

    /** `path` at the instance owning its partition: asked at a start, following `NotHere` to the owner it names. */
    const routed = (path: string): Effect.Effect<Answer, QueryClientError> =>
      Effect.gen(function*() {
        const first = yield* startingPoint
        let endpoint = first
        for (let hop = 0; hop <= maxHops; hop++) {
          const answer = yield* send(endpoint, path).pipe(
            Effect.tapError((error) => error.reason === "Unreachable" && endpoint === first ? moveOn : Effect.void)
          )
          if (answer.status === 200) return answer
          const error = failure(answer, path)
          const owner = Schema.decodeUnknownOption(ErrorAnswer)(answer.json).pipe(
            Option.flatMap((body) => Option.fromNullable(body.owner))
          )
          if (error.reason !== "NotHere" || Option.isNone(owner)) return yield* error
          endpoint = owner.value
        }
        return yield* new QueryClientError({
          reason: "NotHere",
          endpoint,
          path,
          detail: `followed ${maxHops} owners without an answer: the partitions are moving`
        })
      }).pipe(Effect.retry({ schedule: retry, while: (error) => retried.has(error.reason) }))

    const decoded = <A, I>(schema: Schema.Schema<A, I>, answer: Answer, path: string): Effect.Effect<A, QueryClientError> =>
      Schema.decodeUnknown(schema)(answer.json).pipe(
        Effect.mapError((cause) =>
          new QueryClientError({ reason: "InvalidAnswer", endpoint: answer.endpoint, path, detail: cause.message, cause })
        )
      )

    /** A value's stored text through its codec. */
    const value = <A>(
      decode: (text: string) => Either.Either<A, ParseResult.ParseError>,
      text: string,
      answer: Answer,
      path: string
    ): Effect.Effect<A, QueryClientError> =>
      Either.match(decode(text), {
        onLeft: (cause) =>
          Effect.fail(
            new QueryClientError({
              reason: "InvalidAnswer",
              endpoint: answer.endpoint,
              path,
              detail: `a stored value does not decode with the Schema given (is it the application's?): ${cause.message}`,
              cause
            })
          ),
        onRight: Effect.succeed
      })

    const keyText = <K>(schema: Schema.Schema<K, string>, key: K, what: string): Effect.Effect<string, QueryClientError> =>
      Schema.encode(schema)(key).pipe(
        Effect.mapError((cause) =>
          new QueryClientError({ reason: "BadRequest", endpoint: "(none asked)", path: what, detail: `the key does not encode: ${cause.message}`, cause })
        )
      )

    const byKey = <V>(path: string, decode: (text: string) => Either.Either<V, ParseResult.ParseError>) =>
      Effect.gen(function*() {
        const answer = yield* routed(path)
        const body = yield* decoded(KeyAnswer, answer, path)
        return body.value === null ? Option.none<V>() : Option.some(yield* value(decode, body.value, answer, path))
      })

    /**
     * The routes of `asked`'s group (a `Runner.runAll` endpoint's transformer); `store` names the
     * store a scan reads (such an endpoint picks its transformer's routes by it when `asked` is not given).
     */
    const metadataOf = (store: string | undefined, asked: TransformerName | undefined): Effect.Effect<Metadata, QueryClientError> =>
      Effect.gen(function*() {
        const path = pathOf(["metadata"], { store, transformer: nameOf(asked) })
        const answer = yield* routed(path)
        return yield* decoded(MetadataAnswer, answer, path)
      })
    const metadata = metadataOf(undefined, transformer)

    /** A page of a scan's entries (in key order, at most `limit`), decoded with the store's Schemas. */
    const pageOf = <K, V>(
      store: KeyValueStore.KeyValueStore<K, V>,
      entries: ReadonlyArray<{ readonly answer: Answer; readonly entry: typeof ScanAnswer.Type.entries[number] }>,
      path: string,
      limit: number
    ): Effect.Effect<Page<K, V>, QueryClientError> =>
      Effect.gen(function*() {
        const decodedEntries = yield* Effect.forEach(entries, ({ answer, entry }) =>
          Effect.gen(function*() {
            const key = yield* Schema.decode(store.keySchema)(entry.key).pipe(
              Effect.mapError((cause) =>
                new QueryClientError({
                  reason: "InvalidAnswer",
                  endpoint: answer.endpoint,
                  path,
                  detail: `a stored key does not decode with the Schema given: ${cause.message}`,
                  cause
                })
              )
            )
            return { key, value: yield* value(store.values.decode, entry.value, answer, path), partition: entry.partition }
          }))
        const last = decodedEntries[decodedEntries.length - 1]
        return {
          entries: decodedEntries,
          next: decodedEntries.length === limit && last !== undefined ? Option.some(last.key) : Option.none()
        }
      })

    /**
     * A scan over every partition: each instance's page of the partitions it
     * runs, merged in key order. Partitions not covered exactly once (the
     * routes moving under the scan) are a `NotReady`, retried.
     */
    const scanAll = <K, V>(
      store: KeyValueStore.KeyValueStore<K, V>,
      segments: ReadonlyArray<string>,
      params: Record<string, string | number | undefined>,
      limit: number,
      asked: string | undefined
    ): Effect.Effect<Page<K, V>, QueryClientError> =>
      Effect.gen(function*() {
        const path = pathOf(segments, params)
        const routes = yield* metadataOf(store.name, asked)
        const owners = routes.instances.filter((instance) => instance.active.length > 0)
        if (routes.unrouted.length > 0) {
          return yield* new QueryClientError({
            reason: "NotReady",
            endpoint: "(metadata)",
            path,
            detail: `partitions ${routes.unrouted.join(", ")} have no owner with a query endpoint now`
          })
        }
        const pages = yield* Effect.forEach(owners, (owner) =>
          Effect.gen(function*() {
            const answer = yield* send(owner.endpoint, path)
            if (answer.status !== 200) return yield* failure(answer, path)
            return { answer, page: yield* decoded(ScanAnswer, answer, path) }
          }), { concurrency: "unbounded" })
        const covered = pages.flatMap(({ page }) => page.partitions).sort((a, b) => a - b)
        if (covered.length !== routes.partitions || covered.some((p, i) => p !== i)) {
          return yield* new QueryClientError({
            reason: "NotReady",
            endpoint: owners.map((o) => o.endpoint).join(","),
            path,
            detail: `the instances answered for partitions [${covered.join(",")}] of ${routes.partitions}: the partitions are moving`
          })
        }
        const merged = pages.flatMap(({ answer, page }) => page.entries.map((entry) => ({ answer, entry })))
          .sort((a, b) => compare(a.entry.key, b.entry.key))
          .slice(0, limit)
        return yield* pageOf(store, merged, path, limit)
      }).pipe(Effect.retry({ schedule: retry, while: (error) => retried.has(error.reason) }))

    /** A scan of one partition: asked at its owner. */
    const scanOne = <K, V>(
      store: KeyValueStore.KeyValueStore<K, V>,
      segments: ReadonlyArray<string>,
      params: Record<string, string | number | undefined>,
      limit: number
    ): Effect.Effect<Page<K, V>, QueryClientError> =>
      Effect.gen(function*() {
        const path = pathOf(segments, params)
        const answer = yield* routed(path)
        const page = yield* decoded(ScanAnswer, answer, path)
        return yield* pageOf(store, page.entries.map((entry) => ({ answer, entry })), path, limit)
      })

    const scan = <K, V>(
      store: KeyValueStore.KeyValueStore<K, V>,
      kind: "range" | "prefix",
      params: Record<string, string | number | undefined>,
      options: ScanOptions<K>
    ) =>
      Effect.gen(function*() {
        const limit = options.limit ?? 100
        const after = options.after === undefined ? undefined : yield* keyText(store.keySchema, options.after, `${store.name} after`)
        const asked = nameOf(options.transformer ?? transformer)
        const all = { ...params, transformer: asked, limit, after, partition: options.partition }
        return options.partition === undefined
          ? yield* scanAll(store, ["stores", store.name, kind], all, limit, asked)
          : yield* scanOne(store, ["stores", store.name, kind], all, limit)
      })

    const windows = <K, V>(
      store: WindowStore.WindowStore<K, V>,
      key: K,
      from: number,
      to: number,
      keyOptions: KeyOptions = {}
    ): Effect.Effect<ReadonlyArray<WindowStore.Entry<K, V>>, QueryClientError> =>
      Effect.gen(function*() {
        const text = yield* keyText(store.keySchema, key, store.name)
        const out: Array<WindowStore.Entry<K, V>> = []
        const first = Math.max(0, Math.ceil(from))
        const last = Math.min(Number.MAX_SAFE_INTEGER, Math.floor(to))
        if (!(first <= last)) return out
        let after: number | undefined = undefined
        for (;;) {
          const path = pathOf(["stores", store.name, "windows", text], {
            from: first,
            to: last,
            after,
            limit: pageLimit,
            ...keyParams(keyOptions, transformer)
          })
          const answer = yield* routed(path)
          const page = yield* decoded(WindowsAnswer, answer, path)
          for (const window of page.windows) {
            out.push({ key, start: window.start, value: yield* value(store.values.decode, window.value, answer, path) })
          }
          if (page.next === null) return out
          after = page.next
        }
      })

    const sessions = <K, V>(
      store: SessionStore.SessionStore<K, V>,
      key: K,
      sessionOptions: KeyOptions & { readonly earliestEnd?: number | undefined; readonly latestStart?: number | undefined } = {}
    ): Effect.Effect<ReadonlyArray<SessionStore.Entry<K, V>>, QueryClientError> =>
      Effect.gen(function*() {
        const text = yield* keyText(store.keySchema, key, store.name)
        const out: Array<SessionStore.Entry<K, V>> = []
        const clamp = (time: number | undefined) =>
          time === undefined ? undefined : Math.max(0, Math.min(Number.MAX_SAFE_INTEGER, Math.floor(time)))
        let after: string | undefined = undefined
        for (;;) {
          const path = pathOf(["stores", store.name, "sessions", text], {
            earliestEnd: clamp(sessionOptions.earliestEnd === undefined ? undefined : Math.ceil(sessionOptions.earliestEnd)),
            latestStart: clamp(sessionOptions.latestStart),
            after,
            limit: pageLimit,
            ...keyParams(sessionOptions, transformer)
          })
          const answer = yield* routed(path)
          const page = yield* decoded(SessionsAnswer, answer, path)
          for (const session of page.sessions) {
            out.push({
              key,
              start: session.start,
              end: session.end,
              value: yield* value(store.values.decode, session.value, answer, path)
            })
          }
          if (page.next === null) return out
          after = page.next
        }
      })

    const client: QueryClient = {
      state: (asked, key, keyOptions = {}) => {
        // The path names the transformer: never another's ?transformer=.
        const path = pathOf(["state", asked.name, key], keyParams(keyOptions, undefined))
        return Option.match(asked.state, {
          onNone: () =>
            Effect.fail(
              new QueryClientError({ reason: "NotFound", endpoint: "(none asked)", path, detail: `transformer ${asked.name} keeps no state` })
            ),
          onSome: (codec) => byKey(path, Schema.decodeEither(codec))
        })
      },
      get: (store, key, keyOptions = {}) =>
        Effect.flatMap(
          keyText(store.keySchema, key, store.name),
          (text) => byKey(pathOf(["stores", store.name, "keys", text], keyParams(keyOptions, transformer)), store.values.decode)
        ),
      range: (store, rangeOptions = {}) =>
        Effect.gen(function*() {
          const from = rangeOptions.from === undefined ? undefined : yield* keyText(store.keySchema, rangeOptions.from, `${store.name} from`)
          const to = rangeOptions.to === undefined ? undefined : yield* keyText(store.keySchema, rangeOptions.to, `${store.name} to`)
          return yield* scan(store, "range", { from, to }, rangeOptions)
        }),
      prefix: (store, prefix, scanOptions = {}) => scan(store, "prefix", { prefix }, scanOptions),
      windows,
      sessions,
      metadataForKey: (key, keyOptions = {}) =>
        Effect.gen(function*() {
          const path = pathOf(["metadata"], { key, transformer: nameOf(keyOptions.transformer ?? transformer) })
          const answer = yield* routed(path)
          const body = yield* decoded(KeyMetadataAnswer, answer, path)
          return { partition: body.partition, active: Option.fromNullable(body.active), standbys: body.standbys }
        }),
      metadata
    }
    return client
  })

/**
 * A layer of the client, over the `HttpClient` in context.
 *
 * @since 0.6.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<QueryClient, never, HttpClient.HttpClient> =>
  Layer.effect(QueryClient, make(options))
