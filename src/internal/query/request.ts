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
 *
 * Keys are the stored text (what the key Schema encodes), percent-encoded in
 * the path. Every query takes `partition=` (the partition to ask; default:
 * the key's, by the producer's default partitioner; for a scan, every
 * partition active here). A scan answers at most `limit` entries (default
 * `defaultLimit`, at most `maxLimit`) after the key `after` (the previous
 * page's `next`).
 *
 * Pure.
 *
 * @internal
 */
import { Either } from "effect"
import { reservedPrefix } from "../timers.ts"
import { wellFormed } from "../stores/keys.ts"
import { BadRequest, RangeTooLarge } from "./QueryError.ts"

/** Entries of a scan's page when `limit` is not given. */
export const defaultLimit = 100

/** The largest page of a scan. */
export const maxLimit = 1000

/** Which entries of a store a scan reads. */
export type Bounds =
  | { readonly _tag: "Range"; readonly from: string | undefined; readonly to: string | undefined }
  | { readonly _tag: "Prefix"; readonly prefix: string }

/** A query, parsed. */
export type Query =
  | { readonly _tag: "Metadata"; readonly key: string | undefined; readonly partition: number | undefined }
  | { readonly _tag: "State"; readonly transformer: string; readonly key: string; readonly partition: number | undefined }
  | { readonly _tag: "StoreKey"; readonly store: string; readonly key: string; readonly partition: number | undefined }
  | {
    readonly _tag: "StoreScan"
    readonly store: string
    readonly bounds: Bounds
    readonly limit: number
    readonly after: string | undefined
    readonly partition: number | undefined
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
    if (parts[1] === "state" && parts.length === 4 && parts[2] !== "" && parts[2] !== undefined && parts[3] !== undefined) {
      const transformer = yield* segment(parts[2], "transformer name")
      const key = yield* Either.flatMap(segment(parts[3], "key"), (key) => checkedKey(key, "key"))
      return { _tag: "State", transformer, key, partition } as const
    }
    if (parts[1] !== "stores" || parts[2] === undefined || parts[2] === "") return yield* Either.left(noRoute)
    const store = yield* segment(parts[2], "store name")
    if (parts[3] === "keys" && parts.length === 5 && parts[4] !== undefined) {
      const key = yield* Either.flatMap(segment(parts[4], "key"), (key) => checkedKey(key, "key"))
      return { _tag: "StoreKey", store, key, partition } as const
    }
    if (parts.length !== 4 || (parts[3] !== "range" && parts[3] !== "prefix")) return yield* Either.left(noRoute)
    const limit = yield* parseLimit(params)
    const after = yield* optionalKey(params, "after")
    if (parts[3] === "range") {
      const from = yield* optionalKey(params, "from")
      const to = yield* optionalKey(params, "to")
      return { _tag: "StoreScan", store, bounds: { _tag: "Range", from, to }, limit, after, partition } as const
    }
    const prefix = yield* optionalKey(params, "prefix")
    if (prefix === undefined) {
      return yield* Either.left(invalid("a prefix scan needs prefix= (the start of the keys; empty: every key)"))
    }
    return { _tag: "StoreScan", store, bounds: { _tag: "Prefix", prefix }, limit, after, partition } as const
  })
