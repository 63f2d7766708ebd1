/**
 * A paginated HTTP source for extractor tests: every token has items with
 * ids 1..n; `GET /items/<token>?after=<id>&limit=<n>` returns the next items
 * after `after` and whether more follow. The test controls it: grow a token,
 * make its next requests fail with a status or hang, and watch every page
 * served.
 */
import { Effect, Queue } from "effect"
import type { Scope } from "effect"
import * as Http from "node:http"

export interface ServedPage {
  readonly token: string
  readonly after: number
  readonly ids: ReadonlyArray<number>
  /** When it was served (epoch ms). */
  readonly at: number
}

export interface Source {
  readonly url: string
  /** Every page served, in order. */
  readonly served: Queue.Dequeue<ServedPage>
  /** Every request received, in order (failed ones too). */
  readonly requests: Array<{ readonly token: string; readonly after: number; readonly status: number }>
  /** Sets how many items a token has. */
  readonly setItems: (token: string, count: number) => void
  /** The next `times` requests of `token` answer `status` (e.g. 503). */
  readonly failNext: (token: string, status: number, times: number) => void
  /** Requests of `token` wait `ms` before answering, until set back to 0. */
  readonly delay: (token: string, ms: number) => void
}

export const make = (options: {
  readonly items: Readonly<Record<string, number>>
  readonly pageSize: number
  readonly port?: number
}): Effect.Effect<Source, never, Scope.Scope> =>
  Effect.gen(function*() {
    const served = yield* Queue.unbounded<ServedPage>()
    const items = new Map(Object.entries(options.items))
    const failures = new Map<string, { status: number; times: number }>()
    const delays = new Map<string, number>()
    const requests: Array<{ token: string; after: number; status: number }> = []

    const handler = (request: Http.IncomingMessage, response: Http.ServerResponse) => {
      const url = new URL(request.url ?? "/", "http://localhost")
      const match = /^\/items\/([^/]+)$/.exec(url.pathname)
      const token = match?.[1] === undefined ? undefined : decodeURIComponent(match[1])
      const count = token === undefined ? undefined : items.get(token)
      if (token === undefined || count === undefined) {
        response.writeHead(404).end()
        return
      }
      const after = Number(url.searchParams.get("after") ?? "0")
      const limit = Number(url.searchParams.get("limit") ?? String(options.pageSize))
      const answer = () => {
        const failure = failures.get(token)
        if (failure !== undefined && failure.times > 0) {
          failure.times--
          requests.push({ token, after, status: failure.status })
          response.writeHead(failure.status, { "content-type": "application/json" }).end("{}")
          return
        }
        const ids: Array<number> = []
        for (let id = after + 1; id <= count && ids.length < limit; id++) ids.push(id)
        const last = ids[ids.length - 1] ?? after
        requests.push({ token, after, status: 200 })
        Queue.unsafeOffer(served, { token, after, ids, at: Date.now() })
        response.writeHead(200, { "content-type": "application/json" }).end(
          JSON.stringify({ items: ids.map((id) => ({ id })), hasMore: last < count })
        )
      }
      const ms = delays.get(token) ?? 0
      if (ms > 0) setTimeout(answer, ms)
      else answer()
    }

    const server = yield* Effect.acquireRelease(
      Effect.async<Http.Server>((resume) => {
        const server = Http.createServer(handler)
        server.listen(options.port ?? 0, "127.0.0.1", () => resume(Effect.succeed(server)))
      }),
      (server) =>
        Effect.async<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    return {
      url: `http://127.0.0.1:${port}`,
      served,
      requests,
      setItems: (token, count) => {
        items.set(token, count)
      },
      failNext: (token, status, times) => {
        failures.set(token, { status, times })
      },
      delay: (token, ms) => {
        delays.set(token, ms)
      }
    }
  })
