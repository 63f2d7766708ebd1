/**
 * An HTTP API extractor feeding a transformer, end to end.
 *
 * It starts a shop's orders API (examples/http-extractor/ordersApi.ts, a
 * paginated HTTP server on @effect/platform), a Kafka broker (or uses
 * KAFKA_BROKERS), then:
 *
 *   orders API --(Extractor, one token per tenant, HttpClient)--> orders topic
 *   orders topic --(Transformer, revenue per tenant)--> revenue topic
 *
 * and reads the revenue back read_committed until every order of every tenant
 * is counted, once. The API answers 503 to every seventh request: the
 * extractor's `retry` schedule is the rule that retries them; without it the
 * run would fail with the 503.
 *
 *   node --import tsx examples/http-extractor.ts
 */
import { FetchHttpClient, HttpClient, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import { Duration, Effect, Fiber, Layer, Option, Schedule, Schema } from "effect"
import kafkajs from "kafkajs"
import { Extractor, Runner, SkeinConfig, Topic, Transformer } from "../src/index.ts"
import { KafkaBroker } from "../src/testing/index.ts"
import * as OrdersApi from "./http-extractor/ordersApi.ts"

const run = `${Date.now()}`
const tenants = ["acme", "globex", "initech"] as const

const TenantOrder = Schema.Struct({ tenant: Schema.String, id: Schema.Number, customer: Schema.String, cents: Schema.Number })
const Revenue = Schema.Struct({ tenant: Schema.String, orders: Schema.Number, cents: Schema.Number })

const Orders = Topic.make({ name: `orders-${run}`, key: Schema.String, value: Topic.json(TenantOrder) })
const RevenueTopic = Topic.make({ name: `revenue-${run}`, key: Schema.String, value: Topic.json(Revenue) })

/**
 * One token per tenant; the cursor is the id of the last order extracted.
 * The HttpClient it uses has the API's base URL (see `apiClient`).
 */
const OrdersExtractor = Extractor.make({
  name: "orders",
  tokens: tenants,
  cursor: Schema.Struct({ after: Schema.Number }),
  initial: { after: 0 },
  // A drained tenant is asked again every 300 ms.
  poll: Schedule.spaced(Duration.millis(300)),
  rateLimit: { pages: 20, per: "1 second" },
  timeout: "5 seconds",
  // The rule for transient failures (503s, timeouts): up to 3 retries, backing off.
  retry: Schedule.exponential(Duration.millis(50)).pipe(Schedule.intersect(Schedule.recurs(3))),
  read: (tenant, cursor) =>
    Effect.gen(function*() {
      const response = yield* HttpClient.get(`/tenants/${tenant}/orders`, {
        urlParams: { after: cursor.after, limit: 4 }
      })
      const page = yield* HttpClientResponse.schemaBodyJson(OrdersApi.OrdersPage)(response)
      const emit = page.orders.map((order) => Topic.record(Orders, tenant, { tenant, ...order }))
      const next = { after: page.orders[page.orders.length - 1]?.id ?? cursor.after }
      return page.hasMore ? Extractor.page({ emit, next }) : Extractor.drained({ emit, next })
    })
})

/** Revenue per tenant: the state is the tenant's running total. */
const RevenuePerTenant = Transformer.make({
  name: "revenue",
  inputs: [Orders],
  state: Revenue,
  transform: (order, state) => {
    const before = Option.getOrElse(state, () => ({ tenant: order.value.tenant, orders: 0, cents: 0 }))
    const after = { tenant: before.tenant, orders: before.orders + 1, cents: before.cents + order.value.cents }
    return Effect.succeed({ emit: [Topic.record(RevenueTopic, after.tenant, after)], state: Transformer.set(after) })
  }
})

/** An HttpClient for the API: base URL prepended, non-2xx answers are errors. */
const apiClient = (url: string) =>
  Layer.effect(
    HttpClient.HttpClient,
    Effect.map(HttpClient.HttpClient, (client) =>
      client.pipe(HttpClient.mapRequest(HttpClientRequest.prependUrl(url)), HttpClient.filterStatusOk))
  ).pipe(Layer.provide(FetchHttpClient.layer))

const dollars = (cents: number) => `$${(cents / 100).toFixed(2)}`

const program = Effect.gen(function*() {
  const { brokers, kind } = yield* KafkaBroker.KafkaBroker
  const api = yield* OrdersApi.make({ tenants, initial: 9, arriving: 12 })
  yield* Effect.log(`Kafka (${kind}) at ${brokers.join(",")}; orders API at ${api.url}; run ${run}`)

  const kafka = new kafkajs.Kafka({ brokers: [...brokers], logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  yield* Effect.promise(() => admin.connect())
  yield* Effect.promise(() =>
    admin.createTopics({
      waitForLeaders: true,
      topics: [Orders, RevenueTopic].map((t) => ({ topic: t.name, numPartitions: 3 }))
    })
  )
  yield* Effect.promise(() => admin.disconnect())

  const config = (applicationId: string) =>
    SkeinConfig.layer({ applicationId, brokers, stateDir: ".skein/example-state", sessionTimeout: Duration.seconds(6) })
  const stats = Extractor.makeStats()
  const extractor = yield* Effect.fork(
    Extractor.runWithStats(OrdersExtractor, stats).pipe(
      Effect.provide(Layer.merge(config(`shop-${run}`), apiClient(api.url)))
    )
  )
  const transformer = yield* Effect.fork(Runner.run(RevenuePerTenant).pipe(Effect.provide(config(`shop-${run}`))))

  // Read the revenue back, read_committed, until every order the API has is counted.
  const latest = new Map<string, typeof Revenue.Type>()
  console.log("revenue updates, read_committed:")
  const consumer = kafka.consumer({ groupId: `revenue-reader-${run}`, readUncommitted: false })
  yield* Effect.promise(() => consumer.connect())
  yield* Effect.promise(() => consumer.subscribe({ topic: RevenueTopic.name, fromBeginning: true }))
  yield* Effect.promise(() =>
    consumer.run({
      eachMessage: async ({ message }) => {
        const revenue = Schema.decodeUnknownSync(Schema.parseJson(Revenue))(message.value?.toString() ?? "")
        latest.set(revenue.tenant, revenue)
        console.log(`  ${revenue.tenant.padEnd(8)} ${String(revenue.orders).padStart(3)} orders  ${dollars(revenue.cents)}`)
      }
    })
  )
  const done = () =>
    tenants.every((tenant) => latest.get(tenant)?.orders === api.orders(tenant).length) &&
    tenants.reduce((n, tenant) => n + api.orders(tenant).length, 0) === tenants.length * 9 + 12
  // Wait for every order, or for either runtime to fail.
  yield* Effect.raceFirst(
    Effect.sleep("200 millis").pipe(Effect.repeat({ until: () => done() })),
    Effect.raceFirst(Fiber.join(extractor), Fiber.join(transformer))
  )
  yield* Effect.promise(() => consumer.disconnect())
  yield* Fiber.interrupt(extractor)
  yield* Fiber.interrupt(transformer)

  const requests = api.requests()
  console.log(
    `\nextractor: ${stats.pagesCommitted} pages committed (one transaction each), ${stats.emptyPolls} empty polls; ` +
      `API: ${requests.total} requests, ${requests.failed} answered 503 and retried`
  )
  console.log("revenue per tenant (Kafka vs the API):")
  for (const tenant of tenants) {
    const orders = api.orders(tenant)
    const truth = orders.reduce((sum, order) => sum + order.cents, 0)
    const counted = latest.get(tenant)
    const ok = counted?.orders === orders.length && counted.cents === truth
    console.log(
      `  ${tenant.padEnd(8)} ${String(counted?.orders ?? 0).padStart(3)} orders ${dollars(counted?.cents ?? 0).padStart(10)}` +
        `  | API ${String(orders.length).padStart(3)} orders ${dollars(truth).padStart(10)}  ${ok ? "exactly once" : "MISMATCH"}`
    )
  }
})

program.pipe(
  Effect.scoped,
  Effect.provide(Layer.orDie(KafkaBroker.layer())),
  Effect.timeout("5 minutes"),
  Runner.runMain // Ctrl-C: the runs stop gracefully; exit code 0, or 1 on a failure
)
