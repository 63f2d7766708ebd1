/**
 * The enrichment app's driver (`test/apps/enrichmentTopology.ts`): customers and orders, with a
 * known truth.
 *
 * - **Customers** (`c0000`..): version 1 of every customer first, then, during the run, about one
 *   update per `updateEvery` orders (a random customer's next version, in a random region
 *   `r00`..`r23`). A customer's versions are written in order (its partition's sends are
 *   sequential), to the partition the default partitioner gives its key, as the app's repartition
 *   topic is written: the join's inputs are co-partitioned.
 * - **The watcher** reads the table's changelog with the raw reader (`wire.ts`, transactions
 *   resolved from the log's markers) up to its last stable offset, so it knows, per customer, the
 *   latest version the join's task has committed into its table.
 * - **Orders** (key `o<id>`, `{ id, customer, amount, minVersion }`) start once every customer's
 *   version 1 is committed in the table; each names a random customer and carries as `minVersion`
 *   the latest version of it the watcher had seen committed when the order was made.
 *
 * The rule the verifier checks follows from exactly-once: a version committed in the table's
 * changelog is in the table's state from then on (a restarted task restores it), and an order
 * written after that commit reaches the join after it (through the repartition topic), so its
 * join sees that version or a later one, never an earlier one and never none. Which later one
 * depends on how the task interleaves its two inputs (Skein does not consume a task's inputs in
 * timestamp order yet, docs/streams.md "Input order"); the verifier accepts any, as long as a
 * customer's versions never go back along the join's output.
 *
 * Every send holds one partition's records (FINDINGS.md #2); a failed send is retried, which may
 * write a record twice: the verifier counts the topics as they are.
 */
import { Deferred, Duration, Effect, Ref } from "effect"
import kafkajs from "kafkajs"
import type { Message } from "kafkajs"
import { partitionOf } from "../../src/internal/query/partitioner.ts"
import type { Customer, Order } from "../apps/enrichmentTopology.ts"
import { connectProducer, MAX_SEND, prng, sendByPartition, TICK_MS } from "./driver.ts"
import type { WireClient } from "./wire.ts"

export interface EnrichmentDriverOptions {
  readonly brokers: ReadonlyArray<string>
  readonly wire: WireClient
  readonly orders: string
  readonly customers: string
  /** The changelog of the join's sub-topology (the customers table's state). */
  readonly changelog: string
  readonly partitions: number
  /** Orders to write. */
  readonly records: number
  /** Orders per second. */
  readonly rate: number
  /** Distinct customers. */
  readonly customerCount: number
  /** About one customer update per this many orders. */
  readonly updateEvery: number
  readonly seed: number
  readonly say: (line: string) => Effect.Effect<void>
  /** Completed when the orders start (every customer's version 1 committed in the table). */
  readonly ordering: Deferred.Deferred<void>
}

export interface EnrichmentProgress {
  /** Orders acknowledged by the broker. */
  readonly acked: number
  /** Customer versions acknowledged (version 1 of every customer included). */
  readonly updates: number
  /** Send attempts that failed and were retried. */
  readonly retries: number
}

/** Customer `index`'s key. */
export const customerName = (index: number): string => `c${String(index).padStart(4, "0")}`

/** Regions a customer version is in. */
export const REGIONS = 24

const regionName = (index: number): string => `r${String(index).padStart(2, "0")}`

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

/**
 * The customer version somewhere in a record's value: the topic's JSON, or a changelog's stored
 * form, which wraps it (`{ "value": "<the topic's JSON>", "timestamp": ... }`).
 */
export const customerIn = (u: unknown): { readonly customer: string; readonly version: number } | undefined => {
  if (typeof u === "string") return customerIn(parse(u))
  if (!isObject(u)) return undefined
  if (typeof u["customer"] === "string" && typeof u["version"] === "number") return { customer: u["customer"], version: u["version"] }
  for (const value of Object.values(u)) {
    const found = customerIn(value)
    if (found !== undefined) return found
  }
  return undefined
}

const parse = (text: string | null): unknown => {
  if (text === null) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** Region `index`'s name at `revision`. */
export const regionTitle = (index: number, revision: number): string => `Region ${regionName(index)} (revision ${revision})`

/**
 * Writes the global table of regions before the apps start: `revisions` revisions of each
 * region's name, in order, so that loading the table takes a while (a kill may land in it) and
 * only a table loaded to its end gives every region its last name.
 */
export const writeRegions = (brokers: ReadonlyArray<string>, topic: string, partitions: number, revisions: number) =>
  Effect.promise(async () => {
    const producer = new kafkajs.Kafka({ brokers: [...brokers], logLevel: kafkajs.logLevel.NOTHING })
      .producer({ idempotent: true, maxInFlightRequests: 1 })
    await producer.connect()
    try {
      for (let from = 1; from <= revisions; from += 40) {
        const byPartition = new Map<number, Array<Message>>()
        for (let revision = from; revision < from + 40 && revision <= revisions; revision++) {
          for (let r = 0; r < REGIONS; r++) {
            const region = regionName(r)
            const p = partitionOf(region, partitions)
            byPartition.set(p, [
              ...(byPartition.get(p) ?? []),
              { key: region, value: JSON.stringify({ region, revision, name: regionTitle(r, revision) }), partition: p }
            ])
          }
        }
        // One send per partition (FINDINGS.md #2).
        for (const messages of byPartition.values()) await producer.send({ topic, acks: -1, messages })
      }
    } finally {
      await producer.disconnect()
    }
    return REGIONS * revisions
  })

/**
 * Writes the customers and `records` orders at `rate` per second (after every customer's first
 * version is committed in the table); `progress` follows the acknowledged counts.
 */
export const drive = (options: EnrichmentDriverOptions, progress: Ref.Ref<EnrichmentProgress>): Effect.Effect<EnrichmentProgress> =>
  Effect.gen(function*() {
    const random = prng(options.seed ^ 0x5eed)
    const produced = new Int32Array(options.customerCount)
    const committed = new Int32Array(options.customerCount)
    const indexOf = new Map<string, number>()
    for (let c = 0; c < options.customerCount; c++) indexOf.set(customerName(c), c)

    // -- the watcher: the table's committed versions, from its changelog's decided records
    const positions = new Map<number, number>()
    const watchOnce = Effect.gen(function*() {
      const partitions = yield* options.wire.partitions(options.changelog)
      for (let p = 0; p < partitions; p++) {
        const log = yield* options.wire.readFrom(options.changelog, p, positions.get(p) ?? 0)
        for (const r of log.records) {
          if (r.offset >= log.lastStableOffset) continue
          const found = customerIn(parse(r.value))
          const c = found === undefined ? undefined : indexOf.get(found.customer)
          if (found !== undefined && c !== undefined && found.version > (committed[c] ?? 0)) committed[c] = found.version
        }
        positions.set(p, Math.max(positions.get(p) ?? 0, log.lastStableOffset))
      }
    }).pipe(Effect.catchAll(() => Effect.void))
    yield* Effect.forkScoped(Effect.forever(watchOnce.pipe(Effect.zipRight(Effect.sleep(Duration.millis(200))))))

    // -- the producer
    const kafka = new kafkajs.Kafka({
      clientId: "skein-chaos-enrichment-driver",
      brokers: [...options.brokers],
      logLevel: kafkajs.logLevel.NOTHING,
      retry: { initialRetryTime: 200, retries: 10 }
    })
    const producer = yield* connectProducer(kafka)
    const retried = Ref.update(progress, (p) => ({ ...p, retries: p.retries + 1 }))
    // One send per partition, concurrently; each retried until the broker takes it.
    const send = (topic: string, messages: ReadonlyArray<Message>) => sendByPartition(producer, topic, messages, retried)
    const customerVersion = (c: number): Message => {
      const customer = customerName(c)
      const value: Customer = { customer, version: ++produced[c]!, region: regionName(Math.floor(random() * REGIONS)) }
      return { key: customer, value: JSON.stringify(value), partition: partitionOf(customer, options.partitions) }
    }

    // -- every customer's version 1, committed in the table before the first order
    const firsts = Array.from({ length: options.customerCount }, (_, c) => customerVersion(c))
    for (let i = 0; i < firsts.length; i += MAX_SEND) yield* send(options.customers, firsts.slice(i, i + MAX_SEND))
    yield* Ref.update(progress, (p) => ({ ...p, updates: p.updates + firsts.length }))
    const waitedFrom = Date.now()
    while (committed.some((v) => v < 1)) {
      if (Date.now() - waitedFrom > 300_000) return yield* Effect.dieMessage("the customers table did not load within 5 minutes")
      yield* Effect.sleep(Duration.millis(200))
    }
    yield* options.say(
      `enrichment: ${options.customerCount} customers' version 1 committed in the table after ${Math.round((Date.now() - waitedFrom) / 1000)} s`
    )

    // -- the orders, with customer updates among them
    yield* Deferred.succeed(options.ordering, undefined)
    let next = 0
    const started = Date.now()
    while (next < options.records) {
      const due = Math.min(options.records, Math.floor(((Date.now() - started) / 1000) * options.rate) + 1)
      if (due <= next) {
        yield* Effect.sleep(Duration.millis(TICK_MS))
        continue
      }
      const orders: Array<Message> = []
      const updates: Array<Message> = []
      while (next < due && orders.length < MAX_SEND) {
        const id = next++
        const c = Math.floor(random() * options.customerCount)
        const order: Order = { id, customer: customerName(c), amount: Math.floor(random() * 1000) + 1, minVersion: committed[c] ?? 0 }
        orders.push({ key: `o${id}`, value: JSON.stringify(order), partition: id % options.partitions })
        if (random() < 1 / options.updateEvery) updates.push(customerVersion(Math.floor(random() * options.customerCount)))
      }
      // The updates after the orders made with the versions committed before them; both concurrently.
      yield* Effect.all([send(options.orders, orders), send(options.customers, updates)], { concurrency: 2, discard: true })
      yield* Ref.update(progress, (p) => ({ ...p, acked: p.acked + orders.length, updates: p.updates + updates.length }))
    }
    return yield* Ref.get(progress)
  }).pipe(Effect.scoped)
