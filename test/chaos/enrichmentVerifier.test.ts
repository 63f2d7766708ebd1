/**
 * The enrichment verifier must catch what it is there to catch: an order joined twice or never,
 * a join older than the version committed before the order, without a customer, with a version
 * going back or with another version's region, and region totals that count an order twice or
 * do not add up. Synthetic logs, no broker.
 */
import { assert, describe, it } from "@effect/vitest"
import type { EnrichmentLogs } from "./enrichmentVerifier.ts"
import { checkEnrichment } from "./enrichmentVerifier.ts"
import type { PartitionLog } from "./wire.ts"
import { resolveTransactions } from "./wire.ts"

const plain = (records: ReadonlyArray<{ readonly key: string; readonly value: unknown }>): PartitionLog =>
  resolveTransactions("t", 0, [{
    baseOffset: 0,
    lastOffset: records.length - 1,
    producerId: -1n,
    transactional: false,
    control: false,
    controlType: -1,
    records: records.map((r, i) => ({ offset: i, timestamp: 0, key: r.key, value: JSON.stringify(r.value) }))
  }], { highWatermark: records.length, lastStableOffset: records.length })

const customers = [
  { key: "c1", value: { customer: "c1", version: 1, region: "r01" } },
  { key: "c2", value: { customer: "c2", version: 1, region: "r02" } },
  { key: "c1", value: { customer: "c1", version: 2, region: "r02" } }
]
// Order 1 was written after c1's version 2 was committed; orders 0 and 2 after version 1's.
const orders = [
  { key: "o0", value: { id: 0, customer: "c1", amount: 10, minVersion: 1 } },
  { key: "o1", value: { id: 1, customer: "c1", amount: 20, minVersion: 2 } },
  { key: "o2", value: { id: 2, customer: "c2", amount: 5, minVersion: 1 } }
]
const regions = [
  { key: "r01", value: { region: "r01", revision: 1, name: "one" } },
  { key: "r02", value: { region: "r02", revision: 1, name: "two" } },
  { key: "r01", value: { region: "r01", revision: 2, name: "One" } },
  { key: "r03", value: { region: "r03", revision: 1, name: "three" } }
]
const names: Record<string, string> = { r01: "One", r02: "two", r03: "three" }
const joined = (id: number, version: number, region: string | null, regionName = region === null ? null : names[region] ?? null) => {
  const order = orders[id]!.value
  return { key: order.customer, value: { ...order, version, region, regionName } }
}
const goodJoins = [joined(0, 1, "r01"), joined(1, 2, "r02"), joined(2, 1, "r02")]
const total = (region: string, count: number, sum: number, id: number) => ({ key: region, value: { count, sum, id } })
const goodTotals = [total("r01", 1, 10, 0), total("r02", 1, 20, 1), total("r02", 2, 25, 2)]
const stored = (region: string, count: number, sum: number, id: number) => ({
  key: region,
  value: { value: JSON.stringify({ count, sum, id }), timestamp: 0 }
})

const logs = (overrides: Partial<EnrichmentLogs> = {}): EnrichmentLogs => ({
  orders: [plain(orders)],
  customers: [plain(customers)],
  regions: [plain(regions)],
  enriched: [plain(goodJoins)],
  totals: [plain(goodTotals)],
  deadLetters: [plain([])],
  totalsChangelog: [plain([stored("r01", 1, 10, 0), stored("r02", 2, 25, 2)])],
  others: new Map(),
  ...overrides
})

/** [duplicates, lost, stateMismatches] of the join's check and of the totals' check. */
const verdict = (l: EnrichmentLogs) => {
  const [join, totals] = checkEnrichment("enrichment", l, orders.length)
  return [join!.duplicates, join!.lost, join!.stateMismatches, totals!.duplicates, totals!.lost, totals!.stateMismatches]
}

describe("enrichment verifier", () => {
  it("passes every order joined once with a version the rule allows, a later one too, and totals that add up", () => {
    assert.deepStrictEqual(verdict(logs()), [0, 0, 0, 0, 0, 0])
    // Order 0 may see version 2 (committed after it was written, applied before it was joined).
    const later = [joined(0, 2, "r02"), joined(1, 2, "r02"), joined(2, 1, "r02")]
    const totals = [total("r02", 1, 10, 0), total("r02", 2, 30, 1), total("r02", 3, 35, 2)]
    assert.deepStrictEqual(
      verdict(logs({ enriched: [plain(later)], totals: [plain(totals)], totalsChangelog: [plain([stored("r02", 3, 35, 2)])] })),
      [0, 0, 0, 0, 0, 0]
    )
  })

  it("counts an order joined twice and one never joined", () => {
    const [j0, j1, j2] = goodJoins
    assert.deepStrictEqual(verdict(logs({ enriched: [plain([j0!, j1!, j2!, j2!])] })).slice(0, 3), [1, 0, 0])
    assert.deepStrictEqual(verdict(logs({ enriched: [plain([j0!, j2!])] })).slice(0, 3), [0, 1, 0])
  })

  it("fails a join older than the version committed before the order, without a customer, or with another version's region", () => {
    const [j0, , j2] = goodJoins
    assert.strictEqual(verdict(logs({ enriched: [plain([j0!, joined(1, 1, "r01"), j2!])] }))[2], 1)
    // Without a customer: and c1's version went back from 1 to none.
    assert.strictEqual(verdict(logs({ enriched: [plain([j0!, joined(1, 0, null), j2!])] }))[2], 2)
    assert.strictEqual(verdict(logs({ enriched: [plain([j0!, joined(1, 2, "r01"), j2!])] }))[2], 1)
    assert.strictEqual(verdict(logs({ enriched: [plain([j0!, joined(1, 3, "r03"), j2!])] }))[2], 1)
  })

  it("fails a region name that is not the global table's last (a join before the table was loaded to its end)", () => {
    const [, j1, j2] = goodJoins
    assert.strictEqual(verdict(logs({ enriched: [plain([joined(0, 1, "r01", "one"), j1!, j2!])] }))[2], 1)
    assert.strictEqual(verdict(logs({ enriched: [plain([joined(0, 1, "r01", null), j1!, j2!])] }))[2], 1)
  })

  it("fails a customer's version going back along the join's output", () => {
    // Order 1 (min 2) processed first with version 2, then order 0 with version 1: allowed by each
    // order's minimum, but the table went back.
    const back = [joined(1, 2, "r02"), joined(0, 1, "r01"), joined(2, 1, "r02")]
    assert.strictEqual(verdict(logs({ enriched: [plain(back)] }))[2], 1)
  })

  it("fails totals that count an order twice, miss one, or do not add up, and a changelog state that is not the recount", () => {
    const [t0, t1, t2] = goodTotals
    assert.deepStrictEqual(verdict(logs({ totals: [plain([t0!, t1!, t2!, total("r02", 3, 30, 2)])] })).slice(3, 5), [1, 0])
    assert.deepStrictEqual(verdict(logs({ totals: [plain([t0!, t1!])] })).slice(3, 5), [0, 1])
    assert.ok(verdict(logs({ totals: [plain([t0!, t1!, total("r02", 2, 26, 2)])] }))[5]! > 0)
    assert.ok(verdict(logs({ totalsChangelog: [plain([stored("r01", 1, 10, 0), stored("r02", 1, 20, 1)])] }))[5]! > 0)
  })
})
