/**
 * The enrichment app's verifier (`test/apps/enrichmentTopology.ts`: orders re-keyed by customer,
 * left-joined with the customers table, summed per region). Like `verifier.ts`, it shares no code
 * path with the runtime: every topic is read with the raw reader (`wire.ts`, transactions
 * resolved from the log's markers), and the truth is the input topics as they are.
 *
 * The rule (see `enrichmentDriver.ts`): an order carries `minVersion`, the latest version of its
 * customer the driver had seen committed in the table's changelog before writing it. Its join must
 * see a version of that customer that the customers topic holds, not older than `minVersion`, with
 * that version's region; and along the join's output (a customer's joined orders, in the order the
 * task processed them: offset order in the enriched topic's partition) a customer's version never
 * goes back, since the task applies the customer's versions in order and exactly-once makes the
 * committed output that of one serial run.
 *
 * - `duplicates`: an order joined more often than the orders topic holds it; a region total
 *   counting an order twice;
 * - `lost`: an order never joined; an order missing from its region's totals;
 * - `stateMismatches`: a join with a version older than `minVersion`, without a customer, with a
 *   version the topic never held or with another version's region; a customer's version going
 *   back; fields not the order's; a region's totals not the running count and sum of its joined
 *   orders (each update `count` = its place, `sum` the previous plus the order's amount), or its
 *   last total (and its changelog's last value) not the recount; unreadable records; records in
 *   the dead letter topic; open transactions on any output, repartition or changelog partition.
 */
import type { Check } from "./verifier.ts"
import { checkLog } from "./verifier.ts"
import type { PartitionLog } from "./wire.ts"
import { customerIn } from "./enrichmentDriver.ts"

const parse = (text: string | null): unknown => {
  if (text === null) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

interface OrderRecord {
  readonly id: number
  readonly customer: string
  readonly amount: number
  readonly minVersion: number
}

const orderOf = (u: unknown): OrderRecord | undefined =>
  isObject(u) && typeof u["id"] === "number" && typeof u["customer"] === "string" && typeof u["amount"] === "number" &&
    typeof u["minVersion"] === "number"
    ? { id: u["id"], customer: u["customer"], amount: u["amount"], minVersion: u["minVersion"] }
    : undefined

/** A region's totals somewhere in a changelog value (the stored form may wrap them as JSON text). */
const totalsIn = (u: unknown): { readonly count: number; readonly sum: number } | undefined => {
  if (typeof u === "string") return totalsIn(parse(u))
  if (!isObject(u)) return undefined
  if (typeof u["count"] === "number" && typeof u["sum"] === "number") return { count: u["count"], sum: u["sum"] }
  for (const value of Object.values(u)) {
    const found = totalsIn(value)
    if (found !== undefined) return found
  }
  return undefined
}

/** What every topic of the enrichment app holds, read committed. */
export interface EnrichmentLogs {
  readonly orders: ReadonlyArray<PartitionLog>
  readonly customers: ReadonlyArray<PartitionLog>
  /** The global table's topic (written before the apps started). */
  readonly regions: ReadonlyArray<PartitionLog>
  readonly enriched: ReadonlyArray<PartitionLog>
  readonly totals: ReadonlyArray<PartitionLog>
  readonly deadLetters: ReadonlyArray<PartitionLog>
  /** The aggregation's changelog (its last value per region is the final total). */
  readonly totalsChangelog: ReadonlyArray<PartitionLog>
  /** Every other transactional topic (the table's changelog, the repartition topics), by a name to print. */
  readonly others: ReadonlyMap<string, ReadonlyArray<PartitionLog>>
}

/** The checks of the enrichment app; `acked`: orders the driver had acknowledged. */
export const checkEnrichment = (name: string, logs: EnrichmentLogs, acked: number): ReadonlyArray<Check> => {
  const examples: Array<string> = []
  const example = (line: string) => {
    if (examples.length < 8) examples.push(`${name}: ${line}`)
  }
  let unreadable = 0

  // -- the truth: each customer's versions (their regions), each order and how often it was written
  const regions = new Map<string, Map<number, string>>()
  for (const log of logs.customers) {
    for (const r of log.records) {
      const value = parse(r.value)
      const found = customerIn(value)
      if (found === undefined || !isObject(value) || typeof value["region"] !== "string" || r.key !== found.customer) {
        unreadable++
        example(`customers ${log.partition}@${r.offset}: unreadable record`)
        continue
      }
      const versions = regions.get(found.customer) ?? new Map<number, string>()
      versions.set(found.version, value["region"])
      regions.set(found.customer, versions)
    }
  }
  // Each region's last name: what a global table loaded to its end holds.
  const lastName = new Map<string, { readonly revision: number; readonly name: string }>()
  for (const log of logs.regions) {
    for (const r of log.records) {
      const value = parse(r.value)
      if (!isObject(value) || typeof value["revision"] !== "number" || typeof value["name"] !== "string" || r.key === null) {
        unreadable++
        example(`regions ${log.partition}@${r.offset}: unreadable record`)
        continue
      }
      const known = lastName.get(r.key)
      if (known === undefined || value["revision"] > known.revision) lastName.set(r.key, { revision: value["revision"], name: value["name"] })
    }
  }
  const orders = new Map<number, OrderRecord>()
  const written = new Map<number, number>()
  for (const log of logs.orders) {
    for (const r of log.records) {
      const order = orderOf(parse(r.value))
      if (order === undefined) {
        unreadable++
        example(`orders ${log.partition}@${r.offset}: unreadable record`)
        continue
      }
      orders.set(order.id, order)
      written.set(order.id, (written.get(order.id) ?? 0) + 1)
    }
  }
  const inputProblems = orders.size < acked ? [`${name}: the orders topic holds ${orders.size} distinct orders, the driver had ${acked} acknowledged`] : []

  // -- the join: each order once, with a version its rule allows
  const joined = new Map<number, number>()
  const regionOfOrder = new Map<number, string>()
  const lastVersion = new Map<string, number>()
  let enrichedRecords = 0
  let duplicates = 0
  let tooOld = 0
  let withoutCustomer = 0
  let unknownVersions = 0
  let wrongRegions = 0
  let wentBack = 0
  let staleRegionNames = 0
  let wrongFields = 0
  let atMinimum = 0
  let later = 0
  for (const log of logs.enriched) {
    for (const r of log.records) {
      enrichedRecords++
      const value = parse(r.value)
      const order = orderOf(value)
      if (order === undefined || !isObject(value) || typeof value["version"] !== "number" || r.key === null) {
        unreadable++
        example(`enriched ${log.partition}@${r.offset}: unreadable record`)
        continue
      }
      const version = value["version"]
      const region = typeof value["region"] === "string" ? value["region"] : null
      const regionName = typeof value["regionName"] === "string" ? value["regionName"] : null
      const wantName = region === null ? null : lastName.get(region)?.name ?? null
      if (regionName !== wantName) {
        staleRegionNames++
        example(`order ${order.id} joined region ${region} named ${JSON.stringify(regionName)}, the global table's last name is ${JSON.stringify(wantName)}`)
      }
      const times = (joined.get(order.id) ?? 0) + 1
      joined.set(order.id, times)
      if (times > (written.get(order.id) ?? 0)) {
        duplicates++
        example(`order ${order.id} joined ${times} times (this one ${log.partition}@${r.offset}), written ${written.get(order.id) ?? 0}`)
      }
      const truth = orders.get(order.id)
      if (
        truth === undefined || truth.customer !== order.customer || truth.amount !== order.amount ||
        truth.minVersion !== order.minVersion || r.key !== order.customer
      ) {
        wrongFields++
        example(`enriched ${log.partition}@${r.offset} (key ${r.key}) is not order ${order.id} as written`)
      }
      regionOfOrder.set(order.id, region ?? "none")
      const previous = lastVersion.get(order.customer) ?? 0
      if (version < previous) {
        wentBack++
        example(`customer ${order.customer}: order ${order.id} saw version ${version} after an earlier order saw ${previous} (${log.partition}@${r.offset})`)
      }
      lastVersion.set(order.customer, Math.max(previous, version))
      if (version === 0) {
        withoutCustomer++
        example(`order ${order.id} joined without a customer (${order.customer} version ${order.minVersion} was committed before it)`)
        continue
      }
      if (version < order.minVersion) {
        tooOld++
        example(`order ${order.id} saw ${order.customer} version ${version}, older than version ${order.minVersion} committed before it`)
      } else if (version === order.minVersion) atMinimum++
      else later++
      const want = regions.get(order.customer)?.get(version)
      if (want === undefined) {
        unknownVersions++
        example(`order ${order.id} saw ${order.customer} version ${version}, which the customers topic never held`)
      } else if (want !== region) {
        wrongRegions++
        example(`order ${order.id} saw ${order.customer} version ${version} in region ${region}, that version is in ${want}`)
      }
    }
  }
  let lost = 0
  for (const [id, times] of written) {
    const n = joined.get(id) ?? 0
    if (n >= times) continue
    lost += times - n
    example(`order ${id} (${orders.get(id)?.customer}) joined ${n} times, written ${times}`)
  }

  // -- the totals: per region, the running count and sum of its joined orders, each once
  const amountOf = (id: number) => orders.get(id)?.amount ?? 0
  const expectedCount = new Map<string, number>()
  const expectedSum = new Map<string, number>()
  for (const log of logs.enriched) {
    for (const r of log.records) {
      const order = orderOf(parse(r.value))
      if (order === undefined) continue
      const region = regionOfOrder.get(order.id) ?? "none"
      expectedCount.set(region, (expectedCount.get(region) ?? 0) + 1)
      expectedSum.set(region, (expectedSum.get(region) ?? 0) + order.amount)
    }
  }
  let totalsRecords = 0
  let totalsDuplicates = 0
  let totalsLost = 0
  let wrongTotals = 0
  const last = new Map<string, { count: number; sum: number }>()
  // Per region, how often each order was counted (an order the driver wrote twice is joined, and counted, twice).
  const counted = new Map<string, Map<number, number>>()
  for (const log of logs.totals) {
    for (const r of log.records) {
      totalsRecords++
      const value = parse(r.value)
      if (!isObject(value) || typeof value["count"] !== "number" || typeof value["sum"] !== "number" || typeof value["id"] !== "number" || r.key === null) {
        unreadable++
        example(`totals ${log.partition}@${r.offset}: unreadable record`)
        continue
      }
      const region = r.key
      const { count, sum, id } = value as { count: number; sum: number; id: number }
      const previous = last.get(region) ?? { count: 0, sum: 0 }
      const ids = counted.get(region) ?? new Map<number, number>()
      counted.set(region, ids)
      const times = (ids.get(id) ?? 0) + 1
      ids.set(id, times)
      if (times > (joined.get(id) ?? 0)) {
        totalsDuplicates++
        example(`region ${region}: order ${id} counted ${times} times (${log.partition}@${r.offset}), joined ${joined.get(id) ?? 0}`)
      }
      if (regionOfOrder.get(id) !== region) {
        wrongTotals++
        example(`region ${region}: counts order ${id}, joined in region ${regionOfOrder.get(id) ?? "(never joined)"}`)
      }
      if (count !== previous.count + 1 || sum !== previous.sum + amountOf(id)) {
        wrongTotals++
        example(`region ${region}: ${previous.count}/${previous.sum} then ${count}/${sum} for order ${id} (amount ${amountOf(id)})`)
      }
      last.set(region, { count, sum })
    }
  }
  for (const [region, count] of expectedCount) {
    const got = last.get(region)
    const missing = count - [...(counted.get(region)?.values() ?? [])].reduce((a, b) => a + b, 0)
    if (missing > 0) {
      totalsLost += missing
      example(`region ${region}: ${missing} joined orders never counted`)
    }
    if (got === undefined || got.count !== count || got.sum !== expectedSum.get(region)) {
      wrongTotals++
      example(`region ${region}: last total ${got?.count}/${got?.sum}, the recount ${count}/${expectedSum.get(region)}`)
    }
  }
  for (const region of last.keys()) {
    if (!expectedCount.has(region)) {
      wrongTotals++
      example(`region ${region} has totals but no joined order`)
    }
  }
  // The aggregation's changelog: its last value per region is the recount.
  const stored = new Map<string, unknown>()
  for (const log of logs.totalsChangelog) for (const r of log.records) if (r.key !== null) stored.set(r.key, parse(r.value))
  let wrongStored = 0
  for (const [region, count] of expectedCount) {
    const entry = totalsIn([...stored].find(([key]) => key === region || parse(key) === region)?.[1])
    if (entry === undefined || entry.count !== count || entry.sum !== expectedSum.get(region)) {
      wrongStored++
      example(`region ${region}: the changelog's last state ${entry?.count}/${entry?.sum}, the recount ${count}/${expectedSum.get(region)}`)
    }
  }

  const deadLetters = logs.deadLetters.reduce((n, l) => n + l.records.length, 0)
  const committed = logs.enriched.reduce((n, l) => n + l.committedTransactions, 0)
  const aborted = logs.enriched.reduce((n, l) => n + l.abortedTransactions, 0)
  const abortedRecords = logs.enriched.reduce((n, l) => n + l.abortedRecords, 0)
  const versions = [...regions.values()].reduce((n, m) => n + m.size, 0)
  const joinMismatches = tooOld + withoutCustomer + unknownVersions + wrongRegions + wentBack + wrongFields + staleRegionNames
  const join: Check = {
    name,
    records: enrichedRecords,
    duplicates,
    lost,
    stateMismatches: joinMismatches + unreadable + deadLetters + inputProblems.length,
    details: [
      `${name}: ${orders.size} orders, ${regions.size} customers with ${versions} versions; ${joined.size} orders joined: ` +
      `${atMinimum} with the version committed before them, ${later} with a later one`,
      `${name}: ${committed} committed and ${aborted} aborted transactions on the enriched topic (${abortedRecords} aborted records)`,
      ...(joinMismatches + unreadable > 0
        ? [
          `${name}: ${tooOld} older than committed, ${withoutCustomer} without a customer, ${unknownVersions} unknown versions, ` +
          `${wrongRegions} wrong regions, ${wentBack} versions going back, ${wrongFields} wrong fields, ` +
          `${staleRegionNames} region names not the global table's last, ${unreadable} unreadable records`
        ]
        : []),
      ...(deadLetters > 0 ? [`${name}: ${deadLetters} record(s) in the dead letter topic`] : []),
      ...inputProblems,
      ...examples
    ]
  }
  const totals: Check = {
    name: `${name} totals`,
    records: totalsRecords,
    duplicates: totalsDuplicates,
    lost: totalsLost,
    stateMismatches: wrongTotals + wrongStored,
    details: [
      `${name} totals: ${expectedCount.size} regions, ${[...expectedCount.values()].reduce((a, b) => a + b, 0)} joined orders counted ` +
      `(${wrongTotals} wrong totals, ${wrongStored} wrong changelog states)`
    ]
  }
  return [
    join,
    totals,
    checkLog(`${name} enriched`, logs.enriched),
    checkLog(`${name} totals output`, logs.totals),
    checkLog(`${name} totals changelog`, logs.totalsChangelog),
    checkLog(`${name} dead letters`, logs.deadLetters),
    ...[...logs.others].map(([topic, log]) => checkLog(`${name} ${topic}`, log))
  ]
}
