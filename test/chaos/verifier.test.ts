/**
 * The verifier must catch what it is there to catch: duplicates, losses,
 * reordering, wrong state, open and aborted transactions. Synthetic logs, no
 * broker.
 */
import { assert, describe, it } from "@effect/vitest"
import type { LogBatch, PartitionLog } from "./wire.ts"
import { resolveTransactions } from "./wire.ts"
import * as Verifier from "./verifier.ts"
import * as WindowedVerifier from "./windowedVerifier.ts"

const record = (offset: number, key: string, value: unknown) => ({ offset, timestamp: 0, key, value: JSON.stringify(value) })

const plain = (partition: number, records: ReadonlyArray<{ readonly key: string; readonly value: unknown }>): PartitionLog =>
  resolveTransactions("t", partition, [{
    baseOffset: 0,
    lastOffset: records.length - 1,
    producerId: -1n,
    transactional: false,
    control: false,
    controlType: -1,
    records: records.map((r, i) => record(i, r.key, r.value))
  }], { highWatermark: records.length, lastStableOffset: records.length })

// key a: v 5, -3, 7; key b: v 1
const inputRecords = [
  { key: "a", value: { id: 0, seq: 1, v: 5 } },
  { key: "b", value: { id: 1, seq: 1, v: 1 } },
  { key: "a", value: { id: 2, seq: 2, v: -3 } },
  { key: "a", value: { id: 3, seq: 3, v: 7 } }
]
const input = Verifier.readInput([plain(0, inputRecords)])

const agg = (count: number, sum: number, min: number, max: number, id: number, seq: number) => ({ count, sum, min, max, id, seq })
const goodAggregates = [
  { key: "a", value: agg(1, 5, 5, 5, 0, 1) },
  { key: "b", value: agg(1, 1, 1, 1, 1, 1) },
  { key: "a", value: agg(2, 2, -3, 5, 2, 2) },
  { key: "a", value: agg(3, 9, -3, 7, 3, 3) }
]

describe("verifier", () => {
  it("passes an exact echo, even with keys interleaved differently across partitions", () => {
    const [r0, r1, r2, r3] = inputRecords
    const out = [plain(0, [r1, r0, r2, r3])]
    const check = Verifier.checkEcho("echo", input, out)
    assert.deepStrictEqual([check.duplicates, check.lost, check.stateMismatches], [0, 0, 0])
  })

  it("counts a duplicate, a loss and a per-key reordering in the echo output", () => {
    const [r0, r1, r2, r3] = inputRecords
    const dup = Verifier.checkEcho("echo", input, [plain(0, [...inputRecords, r0])])
    assert.strictEqual(dup.duplicates, 1)
    assert.strictEqual(dup.stateMismatches, 1)
    const lost = Verifier.checkEcho("echo", input, [plain(0, inputRecords.slice(0, 3))])
    assert.deepStrictEqual([lost.duplicates, lost.lost, lost.stateMismatches], [0, 1, 1])
    const reordered = Verifier.checkEcho("echo", input, [plain(0, [r0, r1, r3, r2])])
    assert.deepStrictEqual([reordered.duplicates, reordered.lost, reordered.stateMismatches], [0, 0, 1])
  })

  it("flags a key split over two output partitions", () => {
    const check = Verifier.checkEcho("echo", input, [plain(0, inputRecords.slice(0, 2)), plain(1, inputRecords.slice(2))])
    assert.isAbove(check.stateMismatches, 0)
  })

  it("checks every running aggregate, not only the last", () => {
    const good = Verifier.checkAggregate("aggregate", input, [plain(0, goodAggregates)])
    assert.deepStrictEqual([good.duplicates, good.lost, good.stateMismatches], [0, 0, 0])
    // Right final value, wrong intermediate one.
    const wrong = goodAggregates.map((r, i) => (i === 2 ? { key: "a", value: agg(2, 2, -3, 6, 2, 2) } : r))
    const check = Verifier.checkAggregate("aggregate", input, [plain(0, wrong)])
    assert.deepStrictEqual([check.duplicates, check.lost, check.stateMismatches], [0, 0, 1])
    // A record processed twice (state counted it twice): same id, next count.
    const twice = [...goodAggregates.slice(0, 3), { key: "a", value: agg(3, -1, -3, 5, 2, 2) }, { key: "a", value: agg(4, 6, -3, 7, 3, 3) }]
    const reprocessed = Verifier.checkAggregate("aggregate", input, [plain(0, twice)])
    assert.deepStrictEqual([reprocessed.duplicates, reprocessed.lost, reprocessed.stateMismatches], [1, 0, 1])
    assert.isTrue(reprocessed.details.some((d) => d.includes("0 of 1 mismatching keys differ only by repeated identical records")))
  })

  it("checks the changelog's final state", () => {
    const changelog = [plain(0, [{ key: "a", value: agg(3, 9, -3, 7, 3, 3) }, { key: "b", value: agg(1, 1, 1, 1, 1, 1) }])]
    const good = Verifier.checkChangelog("c", input, changelog, Verifier.finalAggregate, Verifier.AGGREGATE_STATE_FIELDS)
    assert.strictEqual(good.stateMismatches, 0)
    const stale = [plain(0, [{ key: "a", value: agg(2, 2, -3, 5, 2, 2) }, { key: "b", value: agg(1, 1, 1, 1, 1, 1) }])]
    assert.strictEqual(Verifier.checkChangelog("c", input, stale, Verifier.finalAggregate, Verifier.AGGREGATE_STATE_FIELDS).stateMismatches, 1)
  })

  it("checks the audited pipeline output", () => {
    let updates = 0
    const byKey = new Map<string, { u: number; c: number }>()
    const audited = goodAggregates.map((r) => {
      const s = byKey.get(r.key) ?? { u: 0, c: 0 }
      const next = { u: s.u + 1, c: s.c + r.value.count }
      byKey.set(r.key, next)
      updates++
      return { key: r.key, value: { ...r.value, updates: next.u, countSum: next.c } }
    })
    assert.strictEqual(updates, 4)
    assert.strictEqual(Verifier.checkAudited("p", input, [plain(0, audited)]).stateMismatches, 0)
    const miscounted = audited.map((r, i) => (i === 3 ? { key: r.key, value: { ...r.value, countSum: 7 } } : r))
    assert.strictEqual(Verifier.checkAudited("p", input, [plain(0, miscounted)]).stateMismatches, 1)
  })
})

describe("windowed verifier", () => {
  const W = 10_000
  const stamped = (partition: number, records: ReadonlyArray<{ readonly key: string; readonly value: unknown; readonly timestamp: number }>) =>
    resolveTransactions("t", partition, [{
      baseOffset: 0,
      lastOffset: records.length - 1,
      producerId: -1n,
      transactional: false,
      control: false,
      controlType: -1,
      records: records.map((r, i) => ({ offset: i, timestamp: r.timestamp, key: r.key, value: JSON.stringify(r.value) }))
    }], { highWatermark: records.length, lastStableOffset: records.length })
  // Two second keys (v modulo 2: g0, g1); windows [0, 10 s) and [10 s, 20 s); out of order in event time.
  const windowedInput = [
    stamped(0, [
      { key: "a", value: { id: 0, seq: 1, v: 4 }, timestamp: 1_000 }, // g0 @0
      { key: "a", value: { id: 2, seq: 2, v: 3 }, timestamp: 12_000 }, // g1 @10000
      { key: "a", value: { id: 3, seq: 3, v: -2 }, timestamp: 9_500 } // g0 @0, late in offset order
    ]),
    stamped(1, [{ key: "b", value: { id: 1, seq: 1, v: 7 }, timestamp: 11_000 }]) // g1 @10000
  ]
  const expected = WindowedVerifier.expectedWindows(windowedInput, W, 2)
  const result = (group: string, start: number, count: number, timestamp: number) => ({
    key: JSON.stringify({ key: group, window: { start, end: start + W } }),
    value: count,
    timestamp
  })
  const g0 = result("g0", 0, 2, 9_500)
  const g1 = result("g1", 10_000, 2, 12_000)
  const check = (output: ReadonlyArray<{ readonly key: string; readonly value: unknown; readonly timestamp: number }>, deadLetters = 0) => {
    const c = WindowedVerifier.checkWindowed({
      name: "windowed",
      expected,
      windowMs: W,
      output: [stamped(0, output)],
      deadLetters: [stamped(0, Array.from({ length: deadLetters }, (_, i) => ({ key: "x", value: i, timestamp: 0 })))],
      closersAt: new Map([[0, 1]])
    })
    return [c.duplicates, c.lost, c.stateMismatches]
  }

  it("expects one final result per second key and window: the count of its input records, the latest event time", () => {
    assert.deepStrictEqual(
      [...expected.values()].map((w) => [w.group, w.start, w.count, w.maxTimestamp]),
      [["g0", 0, 2, 9_500], ["g1", 10_000, 2, 12_000]]
    )
    assert.deepStrictEqual(check([g0, g1]), [0, 0, 0])
    assert.deepStrictEqual(check([g1, g0]), [0, 0, 0])
  })

  it("counts a window emitted twice, a window never emitted, a wrong count, end or timestamp, and a window not in the input", () => {
    assert.deepStrictEqual(check([g0, g1, g0]), [1, 0, 0])
    assert.deepStrictEqual(check([g0]), [0, 1, 0])
    assert.deepStrictEqual(check([result("g0", 0, 1, 9_500), g1]), [0, 0, 1])
    assert.deepStrictEqual(check([result("g0", 0, 2, 1_000), g1]), [0, 0, 1])
    assert.deepStrictEqual(check([{ ...g0, key: JSON.stringify({ key: "g0", window: { start: 0, end: 20_000 } }) }, g1]), [0, 0, 1])
    // A closer's window (the closers' own windows never close) or any window the input has not.
    assert.deepStrictEqual(check([g0, g1, result("g1", 60_000, 1, 61_000)]), [0, 0, 1])
    assert.deepStrictEqual(check([g0, g1, { key: "not json", value: 1, timestamp: 0 }]), [0, 0, 1])
  })

  it("fails a run whose records went to the dead letter topic as late", () => {
    assert.deepStrictEqual(check([g0, g1], 2), [0, 0, 2])
  })
})

describe("resolving transactions from the log", () => {
  const data = (baseOffset: number, producerId: bigint, ids: ReadonlyArray<number>): LogBatch => ({
    baseOffset,
    lastOffset: baseOffset + ids.length - 1,
    producerId,
    transactional: true,
    control: false,
    controlType: -1,
    records: ids.map((id, i) => record(baseOffset + i, "k", { id, seq: 1, v: 0 }))
  })
  const marker = (offset: number, producerId: bigint, commit: boolean): LogBatch => ({
    baseOffset: offset,
    lastOffset: offset,
    producerId,
    transactional: true,
    control: true,
    controlType: commit ? 1 : 0,
    records: []
  })

  it("keeps committed, drops aborted, counts open transactions, across interleaved producers", () => {
    const log = resolveTransactions("t", 0, [
      data(0, 1n, [1, 2]),
      data(2, 2n, [3]),
      marker(3, 2n, false), // producer 2 aborts
      data(4, 1n, [4]),
      marker(5, 1n, true), // producer 1 commits 1, 2, 4
      data(6, 3n, [5]), // producer 3 never decides
      data(7, 2n, [6]),
      marker(8, 2n, true)
    ], { highWatermark: 9, lastStableOffset: 6 })
    assert.deepStrictEqual(log.records.map((r) => JSON.parse(r.value ?? "{}").id), [1, 2, 4, 6])
    assert.deepStrictEqual(
      [log.committedTransactions, log.abortedTransactions, log.abortedRecords, log.openTransactions],
      [2, 1, 1, 1]
    )
    const check = Verifier.checkEcho("echo", Verifier.readInput([]), [log])
    assert.isTrue(check.details.some((d) => d.includes("open transaction")))
    assert.isTrue(check.details.some((d) => d.includes("last stable offset 6 != high watermark 9")))
  })

  it("tells how the transaction of the first transactional batch ended (the transaction kill's check)", () => {
    const ends = { highWatermark: 9, lastStableOffset: 9 }
    const first = (batches: ReadonlyArray<LogBatch>) => resolveTransactions("t", 0, batches, ends).firstTransaction
    // Producer 1's transaction comes first; producer 2's markers in between say nothing of it.
    assert.strictEqual(first([data(0, 1n, [1]), data(1, 2n, [2]), marker(2, 2n, true), marker(3, 1n, false)]), "aborted")
    assert.strictEqual(first([data(0, 1n, [1]), data(1, 2n, [2]), marker(2, 2n, false), marker(3, 1n, true)]), "committed")
    assert.strictEqual(first([data(0, 1n, [1]), data(1, 2n, [2]), marker(2, 2n, false)]), "open")
    assert.strictEqual(first([]), "none")
  })
})
