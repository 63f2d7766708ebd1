/**
 * The queries of the HTTP endpoint and how a request's path and parameters
 * read as one:
 *
 * - `GET /metadata[?key=|partition=]`: where each partition (or the key's) is
 *   queried: the endpoint of its active instance and its standbys.
 * - `GET /state/{transformer}/{key}`: a transformer's state of a state key.
 * - `GET /stores/{store}/keys/{key}`: a `KeyValueStore`'s value of a key.
 * - `GET /stores/{store}/range?from=&to=&limit=&after=`: its entries from
 *   `from` to `to` (both inclusive, each optional), in key order.
 * - `GET /stores/{store}/prefix?prefix=&limit=&after=`: its entries whose key
 *   starts with `prefix`, in key order.
 * - `GET /stores/{store}/windows/{key}?from=&to=&limit=&after=`: a
 *   `WindowStore`'s windows of a key that start from `from` to `to` (epoch
 *   milliseconds, both inclusive, each optional), in start order, after the
 *   start `after` (Kafka Streams' `ReadOnlyWindowStore.fetch(key, from, to)`).
 * - `GET /stores/{store}/sessions/{key}?earliestEnd=&latestStart=&limit=&after=`:
 *   a `SessionStore`'s sessions of a key that end at or after `earliestEnd`
 *   and start at or before `latestStart` (each optional: every session), by
 *   end then start, after the session `after` (`{end}-{start}`) (Kafka
 *   Streams' `ReadOnlySessionStore.fetch(key)` / `findSessions`).
 *
 * Keys are the stored text (what the key Schema encodes), percent-encoded in
 * the path. Every query takes `partition=` (the partition to ask; default:
 * the key's, by the producer's default partitioner; for a scan, every
 * partition active here). A scan answers at most `limit` entries (default
 * `defaultLimit`, at most `maxLimit`) after the key `after` (the previous
 * page's `next`). `format=text` answers each value as its stored text (what
 * the Schema encodes; the typed client decodes it) instead of its JSON.
 *
 * A position bound (KIP-796), for a query of one partition:
 * `position={topic}:{offset}[,...]` waits, up to `timeout` milliseconds
 * (default `defaultBoundTimeout`, at most `maxBoundTimeout`), until the
 * store reflects the record at `offset` of the partition of each input
 * `topic` (`boundOf`).
 *
 * Pure.
 *
 * @internal
 */
import { Either } from "effect"
import { reservedPrefix } from "../runtime/timers.ts"
import { wellFormed } from "../stores/keys.ts"
import { BadRequest, RangeTooLarge } from "./QueryError.ts"

/** Entries of a scan's page when `limit` is not given. */
export const defaultLimit = 100

/** The largest page of a scan. */
export const maxLimit = 1000

/** How long a position bound waits when `timeout` is not given (ms). */
export const defaultBoundTimeout = 10_000

/** The longest a position bound waits (ms). */
export const maxBoundTimeout = 60_000

/** A query's position bound: the input records its store must reflect, and how long to wait for them. */
export interface PositionBound {
  readonly bound: ReadonlyArray<{ readonly topic: string; readonly offset: number }>
  readonly timeoutMillis: number
}

/** Which entries of a store a scan reads. */
export type Bounds =
  | { readonly _tag: "Range"; readonly from: string | undefined; readonly to: string | undefined }
  | { readonly _tag: "Prefix"; readonly prefix: string }

/** How an answer carries values: their JSON (default), or their stored text. */
export type Format = "json" | "text"

/** A session, as a page's cursor. */
export interface SessionCursor {
  readonly end: number
  readonly start: number
}

/** A query, parsed. */
export type Query =
  | { readonly _tag: "Metadata"; readonly key: string | undefined; readonly partition: number | undefined }
  | {
    readonly _tag: "State"
    readonly transformer: string
    readonly key: string
    readonly partition: number | undefined
    readonly format: Format
  }
  | {
    readonly _tag: "StoreKey"
    readonly store: string
    readonly key: string
    readonly partition: number | undefined
    readonly format: Format
  }
  | {
    readonly _tag: "StoreScan"
    readonly store: string
    readonly bounds: Bounds
    readonly limit: number
    readonly after: string | undefined
    readonly partition: number | undefined
    readonly format: Format
  }
  | {
    readonly _tag: "WindowFetch"
    readonly store: string
    readonly key: string
    /** Window starts from `from` to `to`, both inclusive. */
    readonly from: number
    readonly to: number
    readonly limit: number
    /** The start of the previous page's last window (exclusive). */
    readonly after: number | undefined
    readonly partition: number | undefined
    readonly format: Format
  }
  | {
    readonly _tag: "SessionFetch"
    readonly store: string
    readonly key: string
    readonly earliestEnd: number
    readonly latestStart: number
    readonly limit: number
    /** The previous page's last session (exclusive). */
    readonly after: SessionCursor | undefined
    readonly partition: number | undefined
    readonly format: Format
  }

/** Not a query's path (a 404 of the router's). */
export interface NoRoute {
  readonly _tag: "NoRoute"
}

const noRoute: NoRoute = { _tag: "NoRoute" }

const malformed = (message: string) => new BadRequest({ reason: "MalformedKey", message })
const invalid = (message: string) => new BadRequest({ reason: "InvalidParameter", message })

/** A path segment, percent-decoded. */
const segment = (raw: string, what: string): Either.Either<string, BadRequest> => {
  try {
    return Either.right(decodeURIComponent(raw))
  } catch {
    return Either.left(
      new BadRequest({
        reason: "MalformedPath",
        message: `the ${what} ${JSON.stringify(raw)} is not valid percent-encoding (UTF-8)`
      })
    )
  }
}

/** Why `key` cannot be a stored key, or `undefined`. */
const keyProblem = (key: string, what: string): string | undefined =>
  !wellFormed(key)
    ? `the ${what} holds a lone surrogate, which has no UTF-8 form`
    : key.startsWith(reservedPrefix)
    ? `the ${what} starts with ${JSON.stringify(reservedPrefix)}, which Skein reserves for its own keys`
    : undefined

const checkedKey = (key: string, what: string): Either.Either<string, BadRequest> => {
  const problem = keyProblem(key, what)
  return problem === undefined ? Either.right(key) : Either.left(malformed(problem))
}

const integer = (params: URLSearchParams, name: string): Either.Either<number | undefined, BadRequest> => {
  const text = params.get(name)
  if (text === null) return Either.right(undefined)
  const n = /^\d{1,9}$/.test(text) ? Number(text) : Number.NaN
  return Number.isSafeInteger(n)
    ? Either.right(n)
    : Either.left(invalid(`${name}=${JSON.stringify(text)}: ${name} must be an integer, 0 or more`))
}

const optionalKey = (params: URLSearchParams, name: string): Either.Either<string | undefined, BadRequest> => {
  const text = params.get(name)
  return text === null ? Either.right(undefined) : checkedKey(text, `parameter ${name}`)
}

/** A time parameter (epoch milliseconds, an integer 0 or more), `fallback` when unset. */
const time = (params: URLSearchParams, name: string, fallback: number): Either.Either<number, BadRequest> => {
  const text = params.get(name)
  if (text === null) return Either.right(fallback)
  const n = /^\d{1,16}$/.test(text) ? Number(text) : Number.NaN
  return Number.isSafeInteger(n)
    ? Either.right(n)
    : Either.left(invalid(`${name}=${JSON.stringify(text)}: ${name} must be a time in epoch milliseconds, an integer 0 or more`))
}

const format = (params: URLSearchParams): Either.Either<Format, BadRequest> => {
  const text = params.get("format")
  return text === null || text === "json"
    ? Either.right("json")
    : text === "text"
    ? Either.right("text")
    : Either.left(invalid(`format=${JSON.stringify(text)}: format is json (default) or text`))
}

/** The text of a session cursor (`{end}-{start}`), as `next` answers it and `after` takes it. */
export const sessionCursorText = (cursor: SessionCursor): string => `${cursor.end}-${cursor.start}`

const sessionCursor = (params: URLSearchParams): Either.Either<SessionCursor | undefined, BadRequest> => {
  const text = params.get("after")
  if (text === null) return Either.right(undefined)
  const match = /^(\d{1,16})-(\d{1,16})$/.exec(text)
  const end = Number(match?.[1])
  const start = Number(match?.[2])
  return Number.isSafeInteger(end) && Number.isSafeInteger(start)
    ? Either.right({ end, start })
    : Either.left(invalid(`after=${JSON.stringify(text)}: a session page's after is the previous page's next, {end}-{start}`))
}

/** The limit of a scan: `defaultLimit` when unset, a positive integer up to `maxLimit`. */
export const parseLimit = (params: URLSearchParams): Either.Either<number, BadRequest | RangeTooLarge> =>
  Either.flatMap(integer(params, "limit"), (limit): Either.Either<number, BadRequest | RangeTooLarge> =>
    limit === undefined
      ? Either.right(defaultLimit)
      : limit === 0
      ? Either.left(invalid("limit=0: a page holds at least 1 entry"))
      : limit > maxLimit
      ? Either.left(new RangeTooLarge({ limit, maxLimit }))
      : Either.right(limit))

/**
 * Reads the query of `url` (a request's path and search, e.g.
 * `/stores/counts/range?from=a&limit=10`): `NoRoute` when the path is not a
 * query's, a `BadRequest` or `RangeTooLarge` when its parts are malformed.
 */
export const parse = (url: string): Either.Either<Query, NoRoute | BadRequest | RangeTooLarge> =>
  Either.gen(function*() {
    const question = url.indexOf("?")
    const path = question === -1 ? url : url.slice(0, question)
    const params = new URLSearchParams(question === -1 ? "" : url.slice(question + 1))
    const parts = path.split("/")
    // "", "state" | "stores", ...
    if (parts[0] !== "") return yield* Either.left(noRoute)
    const partition = yield* integer(params, "partition")
    if (parts[1] === "metadata" && parts.length === 2) {
      const key = yield* optionalKey(params, "key")
      return { _tag: "Metadata", key, partition } as const
    }
    const as = yield* format(params)
    if (parts[1] === "state" && parts.length === 4 && parts[2] !== "" && parts[2] !== undefined && parts[3] !== undefined) {
      const transformer = yield* segment(parts[2], "transformer name")
      const key = yield* Either.flatMap(segment(parts[3], "key"), (key) => checkedKey(key, "key"))
      return { _tag: "State", transformer, key, partition, format: as } as const
    }
    if (parts[1] !== "stores" || parts[2] === undefined || parts[2] === "") return yield* Either.left(noRoute)
    const store = yield* segment(parts[2], "store name")
    if ((parts[3] === "keys" || parts[3] === "windows" || parts[3] === "sessions") && parts.length === 5 && parts[4] !== undefined) {
      const key = yield* Either.flatMap(segment(parts[4], "key"), (key) => checkedKey(key, "key"))
      if (parts[3] === "keys") return { _tag: "StoreKey", store, key, partition, format: as } as const
      const limit = yield* parseLimit(params)
      if (parts[3] === "windows") {
        const from = yield* time(params, "from", 0)
        const to = yield* time(params, "to", Number.MAX_SAFE_INTEGER)
        const afterText = params.get("after")
        const after = afterText === null ? undefined : yield* time(params, "after", 0)
        return { _tag: "WindowFetch", store, key, from, to, limit, after, partition, format: as } as const
      }
      const earliestEnd = yield* time(params, "earliestEnd", 0)
      const latestStart = yield* time(params, "latestStart", Number.MAX_SAFE_INTEGER)
      const after = yield* sessionCursor(params)
      return { _tag: "SessionFetch", store, key, earliestEnd, latestStart, limit, after, partition, format: as } as const
    }
    if (parts.length !== 4 || (parts[3] !== "range" && parts[3] !== "prefix")) return yield* Either.left(noRoute)
    const limit = yield* parseLimit(params)
    const after = yield* optionalKey(params, "after")
    if (parts[3] === "range") {
      const from = yield* optionalKey(params, "from")
      const to = yield* optionalKey(params, "to")
      return { _tag: "StoreScan", store, bounds: { _tag: "Range", from, to }, limit, after, partition, format: as } as const
    }
    const prefix = yield* optionalKey(params, "prefix")
    if (prefix === undefined) {
      return yield* Either.left(invalid("a prefix scan needs prefix= (the start of the keys; empty: every key)"))
    }
    return { _tag: "StoreScan", store, bounds: { _tag: "Prefix", prefix }, limit, after, partition, format: as } as const
  })

/** The position bound of `url` (`position=`, `timeout=`), `undefined` without one. */
export const boundOf = (url: string): Either.Either<PositionBound | undefined, BadRequest> =>
  Either.gen(function*() {
    const question = url.indexOf("?")
    const params = new URLSearchParams(question === -1 ? "" : url.slice(question + 1))
    const text = params.get("position")
    const timeout = yield* integer(params, "timeout")
    if (text === null) {
      return timeout === undefined
        ? undefined
        : yield* Either.left(invalid("timeout= is the wait of a position bound: give position={topic}:{offset} with it"))
    }
    const bound: Array<{ readonly topic: string; readonly offset: number }> = []
    for (const part of text.split(",")) {
      const colon = part.lastIndexOf(":")
      const topic = part.slice(0, colon)
      const offset = /^\d{1,16}$/.test(part.slice(colon + 1)) ? Number(part.slice(colon + 1)) : Number.NaN
      if (colon <= 0 || !Number.isSafeInteger(offset)) {
        return yield* Either.left(
          invalid(`position=${JSON.stringify(text)}: a position bound is {topic}:{offset}[,{topic}:{offset}...] (an input topic and an offset of the key's partition)`)
        )
      }
      bound.push({ topic, offset })
    }
    if (timeout !== undefined && timeout > maxBoundTimeout) {
      return yield* Either.left(invalid(`timeout=${timeout}: a position bound waits at most ${maxBoundTimeout} ms`))
    }
    return { bound, timeoutMillis: timeout ?? defaultBoundTimeout }
  })

/**
 * True when `url` allows a standby's store to answer (`allowStandby=true`,
 * KIP-535's stale stores): a partition not active here is answered from the
 * standby copy kept here, with its lag.
 */
export const allowsStandby = (url: string): Either.Either<boolean, BadRequest> => {
  const question = url.indexOf("?")
  const text = new URLSearchParams(question === -1 ? "" : url.slice(question + 1)).get("allowStandby")
  return text === null || text === "false"
    ? Either.right(false)
    : text === "true"
    ? Either.right(true)
    : Either.left(invalid(`allowStandby=${JSON.stringify(text)}: allowStandby is true or false`))
}
