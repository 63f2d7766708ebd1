/**
 * One query endpoint for several runs (`Runner.runAll`): each request is
 * answered by one transformer's run, picked from the request.
 *
 * - `/state/{transformer}/...`: that transformer.
 * - `/stores/{store}/...`: the transformer named by `?transformer=`, else the
 *   one transformer declaring a store of that name (a name declared by
 *   several needs `?transformer=`: a 400 naming them).
 * - `/metadata`: the transformer named by `?transformer=` (each run has its
 *   own group, so its own owners), or the one declaring `?store=` (as
 *   `QueryClient`'s scans ask it); one of them is needed when there are
 *   several.
 *
 * A run registers its source once its setup reaches the endpoint; until
 * then its queries are `NotReady` (starting). What is not a query (a
 * malformed path) is left to the source, which answers it as a single run's
 * endpoint does.
 *
 * @internal
 */
import { Either } from "effect"
import type * as Queries from "./Queries.ts"
import { BadRequest, NotReady, type QueryError, Unknown } from "./QueryError.ts"
import * as Request from "./request.ts"

/** A transformer served by the shared endpoint: what it declares (known before its run starts). */
export interface Declared {
  readonly name: string
  readonly stateful: boolean
  readonly stores: ReadonlyArray<{ readonly name: string; readonly kind: string }>
}

/** Picks the source of a request (its path and search). */
export type Pick = (url: string) => Either.Either<Queries.Source, QueryError>

/** The runs' sources, registered as each run's setup reaches its query endpoint. */
export interface SharedSources {
  readonly pick: Pick
  /** Registers `source` (its transformer's); returns the unregistering. */
  readonly register: (source: Queries.Source) => () => void
}

/** A transformer named `name` of `declared`, by the `?transformer=` parameter. */
const byParameter = (declared: ReadonlyArray<Declared>, name: string): Either.Either<Declared, QueryError> => {
  const found = declared.find((d) => d.name === name)
  return found === undefined
    ? Either.left(new Unknown({ what: "transformer", name, known: declared.map((d) => d.name) }))
    : Either.right(found)
}

const starting = () => new NotReady({ partition: -1, reason: "restoring", retryAfterMillis: 1000 })

export const make = (declared: ReadonlyArray<Declared>): SharedSources => {
  const sources = new Map<string, Queries.Source>()
  /** A declared transformer's source, once its run registered it. */
  const sourceOf = (d: Declared): Either.Either<Queries.Source, QueryError> => {
    const source = sources.get(d.name)
    return source === undefined ? Either.left(starting()) : Either.right(source)
  }
  /** The one transformer declaring a store named `store`. */
  const byStore = (store: string): Either.Either<Queries.Source, QueryError> => {
    const declaring = declared.filter((d) => d.stores.some((s) => s.name === store))
    const only = declaring[0]
    if (only === undefined) {
      const known = [...new Set(declared.flatMap((d) => d.stores.map((s) => s.name)))].sort()
      return Either.left(new Unknown({ what: "store", name: store, known }))
    }
    if (declaring.length > 1) {
      return Either.left(
        new BadRequest({
          reason: "InvalidParameter",
          message: `store "${store}" is declared by transformers ${declaring.map((d) => `"${d.name}"`).join(", ")}: ` +
            "add ?transformer={name}"
        })
      )
    }
    return sourceOf(only)
  }
  const pick: Pick = (url) => {
    const question = url.indexOf("?")
    const params = new URLSearchParams(question === -1 ? "" : url.slice(question + 1))
    const named = params.get("transformer")
    const query = Request.parse(url)
    const first = declared[0]
    if (Either.isLeft(query) || first === undefined) {
      // Not a query: any source answers it as a single run's endpoint does (a 400 or 404).
      const first = sources.values().next()
      return first.done === true ? Either.left(starting()) : Either.right(first.value)
    }
    if (named !== null) return Either.flatMap(byParameter(declared, named), sourceOf)
    const asked = query.right
    switch (asked._tag) {
      case "State": {
        const found = declared.find((d) => d.name === asked.transformer && d.stateful)
        const known = declared.filter((d) => d.stateful).map((d) => d.name)
        return found === undefined ? Either.left(new Unknown({ what: "transformer", name: asked.transformer, known })) : sourceOf(found)
      }
      case "Metadata": {
        // A scan's routes (QueryClient asks them with the store it reads): the store's transformer's.
        const store = params.get("store")
        if (store !== null) return byStore(store)
        if (declared.length === 1) return sourceOf(first)
        return Either.left(
          new BadRequest({
            reason: "InvalidParameter",
            message: `this endpoint serves transformers ${declared.map((d) => `"${d.name}"`).join(", ")}, each with its own owners: ` +
              "add ?transformer={name}"
          })
        )
      }
      default:
        return byStore(asked.store)
    }
  }
  return {
    pick,
    register: (source) => {
      sources.set(source.transformer, source)
      return () => {
        if (sources.get(source.transformer) === source) sources.delete(source.transformer)
      }
    }
  }
}
