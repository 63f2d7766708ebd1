/**
 * Extractors: exactly-once ingestion from external sources.
 *
 * An extractor reads a source (an HTTP API, a database, a file store) page by
 * page. Its work is split into ownership tokens (a tenant, a table range, an
 * API account): each token has a cursor, typed by a Schema, and is owned by
 * exactly one running instance at a time. For every page the instance commits
 * one Kafka transaction holding the page's records and the token's next
 * cursor, so downstream `read_committed` consumers see every page exactly
 * once, even when an instance crashes between reading a page and committing
 * it: the next owner reads the page again from the last committed cursor, and
 * the crashed attempt was never visible.
 *
 * Cursors live in a compacted topic `${applicationId}-${name}-cursors` with one
 * partition per token (token `i` is partition `i`). Ownership is Kafka's group
 * protocol over that topic: being assigned partition `i` is owning token `i`.
 * Starting to own a token fences its static transactional id
 * (`${applicationId}-extract-${name}-${token}`), which aborts the transaction
 * of any previous owner, then reads the token's committed cursor.
 *
 * An extractor may share a transformer's `applicationId`: its group
 * (`${applicationId}-extract-${name}`) and transactional ids carry its name,
 * so they never meet the transformer's group (`${applicationId}`) and ids
 * (`${applicationId}-${partition}`). Two extractors need different names.
 *
 * @example
 * ```ts
 * const Orders = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Order) })
 *
 * const OrdersExtractor = Extractor.make({
 *   name: "orders",
 *   tokens: ["tenant-a", "tenant-b"],
 *   cursor: Schema.Struct({ after: Schema.Number }),
 *   initial: { after: 0 },
 *   poll: Schedule.spaced("5 seconds"),
 *   rateLimit: { pages: 10, per: "1 second" },
 *   read: (tenant, cursor) =>
 *     fetchOrders(tenant, cursor.after).pipe(Effect.map((response) => {
 *       const emit = response.orders.map((order) => Topic.record(Orders, String(order.id), order))
 *       const next = { after: response.orders.at(-1)?.id ?? cursor.after }
 *       return response.hasMore ? Extractor.page({ emit, next }) : Extractor.drained({ emit, next })
 *     }))
 * })
 *
 * Extractor.run(OrdersExtractor).pipe(Effect.provide(SkeinConfig.layer({ applicationId: "shop", brokers })))
 * ```
 *
 * @since 0.1.0
 */
import { Duration, Effect, Option, Schedule } from "effect"
import type { Schema } from "effect"
import { SkeinConfig } from "./SkeinConfig.ts"
import type { ReadTimeout } from "./internal/extractor/errors.ts"
import * as Cursors from "./internal/extractor/cursors.ts"
import type * as Model from "./internal/extractor/model.ts"
import * as internal from "./internal/extractor/runner.ts"
import * as Topic from "./Topic.ts"

export {
  /**
   * The committed cursor of a token cannot be used (it does not decode, it
   * belongs to another token, or it is a tombstone). Fatal.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { Extractor } from "skein"
   *
   * Extractor.run(OrdersExtractor).pipe(
   *   Effect.catchTag("BadCursor", (e) => Effect.logError(`token ${e.token}: ${e.reason} cursor`, e.cause))
   * )
   * ```
   *
   * @since 0.1.0
   * @category errors
   */
  BadCursor,
  /**
   * The extractor's token list cannot be used: it is empty, has duplicates,
   * or a token was removed. Fatal, at the start of a run.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { Extractor } from "skein"
   *
   * Extractor.run(OrdersExtractor).pipe(
   *   Effect.catchTag("InvalidTokens", (e) => Effect.logError(`fix the token list (${e.reason}): ${e.detail}`))
   * )
   * ```
   *
   * @since 0.1.0
   * @category errors
   */
  InvalidTokens,
  /**
   * A read took longer than the extractor's `timeout`. Fatal unless its
   * `retry` schedule retries it.
   *
   * @example
   * ```ts
   * import { Schedule } from "effect"
   * import { Extractor } from "skein"
   *
   * // with `timeout: "10 seconds"`: retry timed-out reads up to 3 times, other errors end the run
   * const retry = Schedule.recurs(3).pipe(Schedule.whileInput((e: unknown) => e instanceof Extractor.ReadTimeout))
   * ```
   *
   * @since 0.1.0
   * @category errors
   */
  ReadTimeout
} from "./internal/extractor/errors.ts"

/**
 * What one read of the source returns: the records to emit and the cursor
 * the next read starts from, committed together in one transaction.
 *
 * - `Page`: more may follow at once; the next read starts immediately
 *   (subject to the rate limit).
 * - `Drained`: the source has nothing more for now; the next read waits for
 *   the extractor's `poll` schedule, or never comes once that schedule ends.
 *
 * @example
 * ```ts
 * import { Extractor, Topic } from "skein"
 *
 * const toPage = (orders: ReadonlyArray<Order>, hasMore: boolean): Extractor.Page<{ readonly after: number }> => {
 *   const emit = orders.map((order) => Topic.record(Orders, String(order.id), order))
 *   const next = { after: orders.at(-1)?.id ?? 0 }
 *   return hasMore ? Extractor.page({ emit, next }) : Extractor.drained({ emit, next })
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Page<C> extends Model.Page<C> {}

/**
 * A page after which more may follow at once. A page that emits nothing and
 * leaves the cursor where it was counts as drained (reading again at once
 * would spin).
 *
 * @example
 * ```ts
 * import { Extractor, Topic } from "skein"
 *
 * // more may follow: the next read, from `next`, starts at once
 * Extractor.page({ emit: orders.map((order) => Topic.record(Orders, String(order.id), order)), next: { after: 200 } })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const page = <C>(options: { readonly emit?: ReadonlyArray<Topic.OutputRecord>; readonly next: C }): Page<C> => ({
  _tag: "Page",
  emit: options.emit ?? [],
  next: options.next
})

/**
 * The last page for now: the source is caught up. The next read, from
 * `next`, happens when the extractor's `poll` schedule says so. A drained
 * read that emits nothing and leaves the cursor unchanged commits nothing.
 *
 * @example
 * ```ts
 * import { Extractor } from "skein"
 *
 * // caught up: read again from the same cursor when the poll schedule says so
 * Extractor.drained({ next: cursor })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const drained = <C>(options: { readonly emit?: ReadonlyArray<Topic.OutputRecord>; readonly next: C }): Page<C> => ({
  _tag: "Drained",
  emit: options.emit ?? [],
  next: options.next
})

/**
 * At most `pages` reads per `per`, for each token separately.
 *
 * @example
 * ```ts
 * import { Extractor } from "skein"
 *
 * // at most 10 reads per second for each token (pass as `rateLimit` to `make`)
 * const rateLimit: Extractor.RateLimit = { pages: 10, per: "1 second" }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface RateLimit {
  readonly pages: number
  readonly per: Duration.DurationInput
}

/**
 * A declared extractor. Build one with `make`, run it with `run`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Extractor } from "skein"
 *
 * const runLogged = <Token extends string, C, E, R>(extractor: Extractor.Extractor<Token, C, E, R>) =>
 *   Extractor.run(extractor).pipe(Effect.tapError((error) => Effect.logError(`extractor ${extractor.name}`, error)))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Extractor<in out Token extends string, in out C, in out E, out R>
  extends Model.Extractor<Token, C, E, R>
{}

/**
 * The default `poll` schedule: read a drained token again every 5 seconds.
 *
 * @example
 * ```ts
 * import { Schedule } from "effect"
 * import { Extractor } from "skein"
 *
 * // read drained tokens every 5 seconds (the default), for one hour at most
 * const poll = Extractor.defaultPoll.pipe(Schedule.upTo("1 hour"))
 * ```
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaultPoll: Schedule.Schedule<number> = Schedule.spaced(Duration.seconds(5))

/**
 * Declares an extractor.
 *
 * `read` gets a token and its cursor and reads one page from there: it
 * returns `Extractor.page({ emit, next })` when more may follow at once, or
 * `Extractor.drained({ emit, next })` when the source is caught up.
 *
 * A failed read ends the run (the transaction of that page was never
 * opened; a restarted instance reads it again from the committed cursor).
 * Remedy what can be remedied inside `read` itself (refresh a token, skip a
 * tenant without the endpoint); retry transient failures only by passing a
 * `retry` schedule, e.g. `Schedule.exponential("200 millis").pipe(Schedule.intersect(Schedule.recurs(3)))`.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Extractor } from "skein"
 *
 * const OrdersExtractor = Extractor.make({
 *   name: "orders", tokens: ["tenant-a", "tenant-b"],
 *   cursor: Schema.Struct({ after: Schema.Number }), initial: { after: 0 },
 *   read: (tenant, cursor) => fetchPage(tenant, cursor) // an Effect of Extractor.page(...) or Extractor.drained(...)
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <const Token extends string, C, CI, E = never, R = never>(options: {
  readonly name: string
  /** The ownership tokens. Append new tokens at the end; never reorder or remove them. */
  readonly tokens: ReadonlyArray<Token>
  readonly cursor: Schema.Schema<C, CI>
  readonly initial: C
  readonly read: (token: Token, cursor: C) => Effect.Effect<Page<C>, E, R>
  /** Default `defaultPoll` (every 5 seconds). */
  readonly poll?: Schedule.Schedule<unknown, unknown>
  readonly rateLimit?: RateLimit
  readonly timeout?: Duration.DurationInput
  readonly retry?: Schedule.Schedule<unknown, NoInfer<E> | ReadTimeout>
}): Extractor<Token, C, E, R> => ({
  name: options.name,
  tokens: options.tokens,
  cursor: Topic.json(options.cursor),
  initial: options.initial,
  read: options.read,
  poll: options.poll ?? defaultPoll,
  rateLimit: Option.map(
    Option.fromNullable(options.rateLimit),
    (limit) => ({ pages: limit.pages, per: Duration.decode(limit.per) })
  ),
  timeout: Option.map(Option.fromNullable(options.timeout), Duration.decode),
  retry: Option.fromNullable(options.retry)
})

/**
 * Every fatal error a run can end with, besides the read's own errors.
 *
 * @example
 * ```ts
 * import type { Effect } from "effect"
 * import { Extractor, type SkeinConfig } from "skein"
 *
 * // OrdersExtractor's read fails with ApiError
 * const program: Effect.Effect<never, Extractor.ExtractorError | ApiError, SkeinConfig.SkeinConfig> =
 *   Extractor.run(OrdersExtractor)
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export type ExtractorError = Model.ExtractorError

/**
 * The compacted topic holding an extractor's cursors, one partition per token.
 *
 * @example
 * ```ts
 * import { Extractor } from "skein"
 *
 * Extractor.cursorTopic("shop", OrdersExtractor) // "shop-orders-cursors"
 * ```
 *
 * @since 0.1.0
 * @category utils
 */
export const cursorTopic = (applicationId: string, extractor: { readonly name: string }): string =>
  Cursors.topicName(applicationId, extractor.name)

/**
 * Counters of a running extractor: pages read and committed, records
 * emitted, token starts, stops and migrations, and the tokens owned now.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Extractor } from "skein"
 *
 * const report = (stats: Extractor.Stats) =>
 *   Effect.log(`${stats.pagesCommitted} pages committed, owning ${[...stats.owned].join(", ")}`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Stats = internal.ExtractorStats

/**
 * Fresh counters to pass to `runWithStats`.
 *
 * @example
 * ```ts
 * import { Extractor } from "skein"
 *
 * const stats = Extractor.makeStats()
 * const program = Extractor.runWithStats(OrdersExtractor, stats) // stats.pagesRead, stats.owned, ... as it runs
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeStats: () => Stats = internal.makeStats

/**
 * Runs an extractor until interrupted or until a fatal error. This instance
 * joins the extractor's group and extracts the tokens the group assigns to
 * it; start more instances to spread the tokens. Interrupting it lets the
 * pages being committed finish, abandons the reads in flight and leaves the
 * group.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Extractor, Runner, SkeinConfig } from "skein"
 *
 * Extractor.run(OrdersExtractor).pipe(
 *   Effect.provide(SkeinConfig.layerConfig()), // SKEIN_APPLICATION_ID, KAFKA_BROKERS, ...
 *   Runner.runMain
 * )
 * ```
 *
 * @since 0.1.0
 * @category running
 */
export const run = <Token extends string, C, E, R>(
  extractor: Extractor<Token, C, E, R>
): Effect.Effect<never, ExtractorError | E, R | SkeinConfig> => runWithStats(extractor, internal.makeStats())

/**
 * Like `run`, updating `stats` as it goes.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Extractor, SkeinConfig } from "skein"
 *
 * const stats = Extractor.makeStats()
 * Extractor.runWithStats(OrdersExtractor, stats).pipe(
 *   Effect.provide(SkeinConfig.layer({ applicationId: "shop", brokers: ["localhost:9092"] }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category running
 */
export const runWithStats = <Token extends string, C, E, R>(
  extractor: Extractor<Token, C, E, R>,
  stats: Stats
): Effect.Effect<never, ExtractorError | E, R | SkeinConfig> =>
  Effect.flatMap(SkeinConfig, (config) => Effect.scoped(internal.run(extractor, config, stats)))
