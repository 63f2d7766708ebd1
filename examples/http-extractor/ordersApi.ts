/**
 * The source of the HTTP extractor example: a shop's orders API, served with
 * @effect/platform's HttpServer on Node.
 *
 *   GET /tenants/:tenant/orders?after=<order id>&limit=<n>
 *     -> { "orders": [{ "id", "customer", "cents" }], "hasMore": boolean }
 *
 * Orders keep arriving for a while after it starts, and every seventh request
 * answers 503, as real APIs do now and then.
 */
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Duration, Effect, Layer, Schedule, Schema } from "effect"
import { createServer } from "node:http"

export const Order = Schema.Struct({ id: Schema.Number, customer: Schema.String, cents: Schema.Number })
export type Order = typeof Order.Type

export const OrdersPage = Schema.Struct({ orders: Schema.Array(Order), hasMore: Schema.Boolean })

export interface OrdersApi {
  /** `http://host:port` */
  readonly url: string
  /** Every order of a tenant so far. */
  readonly orders: (tenant: string) => ReadonlyArray<Order>
  /** Requests answered, and how many of them with a 503. */
  readonly requests: () => { readonly total: number; readonly failed: number }
}

const customers = ["ada", "grace", "edsger", "barbara", "donald", "leslie"]

/**
 * Starts the API on a free port for the life of the scope. It begins with
 * `initial` orders per tenant and adds `arriving` more, one every 150 ms.
 */
export const make = (options: {
  readonly tenants: ReadonlyArray<string>
  readonly initial: number
  readonly arriving: number
}) =>
  Effect.gen(function*() {
    const store = new Map<string, Array<Order>>(options.tenants.map((tenant) => [tenant, []]))
    let nextId = 1
    let seed = 7
    const random = () => {
      seed = (seed * 16807) % 2147483647
      return seed / 2147483647
    }
    const addOrder = (tenant: string) => {
      const order: Order = {
        id: nextId++,
        customer: customers[Math.floor(random() * customers.length)] ?? "ada",
        cents: 100 + Math.floor(random() * 9900)
      }
      store.get(tenant)?.push(order)
    }
    for (let i = 0; i < options.initial; i++) for (const tenant of options.tenants) addOrder(tenant)

    let total = 0
    let failed = 0
    const router = HttpRouter.empty.pipe(
      HttpRouter.get(
        "/tenants/:tenant/orders",
        Effect.gen(function*() {
          const { tenant } = yield* HttpRouter.schemaPathParams(Schema.Struct({ tenant: Schema.String }))
          const { after, limit } = yield* HttpServerRequest.schemaSearchParams(
            Schema.Struct({ after: Schema.NumberFromString, limit: Schema.NumberFromString })
          )
          const orders = store.get(tenant)
          if (orders === undefined) return HttpServerResponse.empty({ status: 404 })
          total++
          if (total % 7 === 0) {
            failed++
            return HttpServerResponse.empty({ status: 503 })
          }
          const next = orders.filter((order) => order.id > after)
          return yield* HttpServerResponse.json({ orders: next.slice(0, limit), hasMore: next.length > limit })
        }).pipe(Effect.catchTag("ParseError", () => Effect.succeed(HttpServerResponse.empty({ status: 400 }))))
      )
    )

    const context = yield* Layer.build(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
    yield* HttpServer.serveEffect(router).pipe(Effect.provide(context))
    const url = yield* HttpServer.addressWith((address) =>
      Effect.succeed(address._tag === "TcpAddress" ? `http://${address.hostname}:${address.port}` : "")
    ).pipe(Effect.provide(context))

    // New orders keep arriving for a while: drained tenants are polled again.
    let arrived = 0
    yield* Effect.forkScoped(
      Effect.sync(() => {
        const tenant = options.tenants[arrived % options.tenants.length]
        if (tenant !== undefined) addOrder(tenant)
        arrived++
      }).pipe(Effect.repeat(Schedule.spaced(Duration.millis(150)).pipe(Schedule.intersect(Schedule.recurs(options.arriving - 1)))))
    )

    const api: OrdersApi = {
      url,
      orders: (tenant) => store.get(tenant) ?? [],
      requests: () => ({ total, failed })
    }
    return api
  })
