/**
 * The Postgres verifier must catch what it is there to catch: a record's row twice or never
 * (by id), a row for a poison record or for no record, a poison record dead-lettered twice or
 * never, and an offsets table short of (or past) the input's end. Synthetic logs, no broker.
 */
import { assert, describe, it } from "@effect/vitest"
import type { OffsetRow, PostgresTruth, Row } from "./postgresVerifier.ts"
import { checkPostgres } from "./postgresVerifier.ts"
import type { PartitionLog } from "./wire.ts"
import { resolveTransactions } from "./wire.ts"

const log = (partition: number, values: ReadonlyArray<unknown>): PartitionLog =>
  resolveTransactions("t", partition, [{
    baseOffset: 0,
    lastOffset: values.length - 1,
    producerId: -1n,
    transactional: false,
    control: false,
    controlType: -1,
    records: values.map((v, i) => ({ offset: i, timestamp: 0, key: `k${i}`, value: JSON.stringify(v) }))
  }], { highWatermark: values.length, lastStableOffset: values.length })

// Partition 0: ids 0, 1 and the poison record 2; partition 1: id 3.
const input = [
  log(0, [{ id: 0, seq: 1, v: 5 }, { id: 1, seq: 1, v: -3 }, { id: 2, seq: 2, v: "poison" }]),
  log(1, [{ id: 3, seq: 1, v: 7 }])
]
const row = (id: number, partition: number, offset: number, writer = "postgres-0/node/1"): Row => ({ id, partition, offset, writer })
const goodRows = [row(0, 0, 0), row(1, 0, 1, "postgres-1/bun/2"), row(3, 1, 0, "postgres-2/deno/3")]
const goodOffsets: ReadonlyArray<OffsetRow> = [{ topic: "in", partition: 0, next: 3 }, { topic: "in", partition: 1, next: 1 }]
const goodLetters = [log(0, [{ id: 2, seq: 2, v: "poison" }]), log(1, [])]

const check = (overrides: Partial<PostgresTruth>) =>
  checkPostgres("postgres", { inputTopic: "in", input, rows: goodRows, offsets: goodOffsets, deadLetters: goodLetters, ...overrides })

describe("the Postgres verifier", () => {
  it("passes one row per record, each poison record dead-lettered once, the offsets at the end", () => {
    const c = check({})
    assert.deepStrictEqual([c.records, c.duplicates, c.lost, c.stateMismatches, c.details], [4, 0, 0, 0, []])
    assert.include(c.summary[0], "3 rows for 3 records (4 input records, 1 poison); rows by runtime: bun 1, deno 1, node 1")
  })

  it("counts a second row of a record as a duplicate, and a missing row as lost, by id", () => {
    const c = check({ rows: [row(0, 0, 0), row(0, 0, 0, "postgres-1/bun/9"), row(1, 0, 1)] })
    assert.deepStrictEqual([c.duplicates, c.lost], [1, 1])
    assert.include(c.details.join("\n"), "duplicated rows (1): id 0 (0@0) 2 rows by postgres-0/node/1 and postgres-1/bun/9")
    assert.include(c.details.join("\n"), "missing rows (1): id 3 (1@0)")
  })

  it("fails a row for a poison record, for no record, or with another id", () => {
    const c = check({ rows: [...goodRows.slice(0, 2), row(9, 1, 0), row(2, 0, 2), row(5, 1, 7)] })
    assert.strictEqual(c.stateMismatches, 3)
    const text = c.details.join("\n")
    assert.include(text, "rows with another id than their input record's (1): 1@0: id 9, the input's is 3")
    assert.include(text, "rows of poison records (1): id 2 (0@2)")
    assert.include(text, "rows at no input record (1): id 5 (1@7)")
  })

  it("counts a poison record dead-lettered twice or never, and a dead letter of no poison record", () => {
    const twice = check({ deadLetters: [log(0, [{ id: 2, seq: 2, v: "poison" }, { id: 2, seq: 2, v: "poison" }])] })
    assert.strictEqual(twice.duplicates, 1)
    assert.include(twice.details.join("\n"), "poison records dead-lettered more than once (1): id 2 2 times")
    const never = check({ deadLetters: [log(0, [{ id: 1, seq: 1, v: -3 }])] })
    assert.strictEqual(never.lost, 1)
    assert.strictEqual(never.stateMismatches, 1)
    assert.include(never.details.join("\n"), "poison records not dead-lettered (1): id 2")
    assert.include(never.details.join("\n"), "dead letters of no poison record (1): 0@0 (id 1)")
  })

  it("fails an offsets table short of the input's end, past it, or without a partition", () => {
    const c = check({ offsets: [{ topic: "in", partition: 0, next: 2 }, { topic: "in", partition: 2, next: null }] })
    assert.strictEqual(c.stateMismatches, 3)
    const text = c.details.join("\n")
    assert.include(text, "in/0: next offset 2, the input ends at 3")
    assert.include(text, "in/1: no row in the offsets table")
    assert.include(text, "in/2: a row for no input partition")
  })
})
