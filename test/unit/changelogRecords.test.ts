import { assert, describe, it } from "@effect/vitest"
import { changelogRecords, inRange } from "../../src/internal/kafka/changelogReader.ts"
import type { ChangelogRecord } from "../../src/internal/kafka/changelogReader.ts"

const record = (offset: number): ChangelogRecord => ({ offset, key: Buffer.from(`k${offset}`), value: null })
const offsets = (records: ReadonlyArray<ChangelogRecord>) => records.map((r) => r.offset)

describe("changelog records", () => {
  it("a fetched batch becomes offsets, keys and values, in order", () => {
    const batch = {
      messages: [
        { offset: "7", key: Buffer.from("a"), value: Buffer.from("1") },
        { offset: "9", key: null, value: null }
      ]
    }
    assert.deepStrictEqual(changelogRecords(batch), [
      { offset: 7, key: Buffer.from("a"), value: Buffer.from("1") },
      { offset: 9, key: null, value: null }
    ])
  })

  it("inRange keeps the records from `from` until `until`", () => {
    const records = [3, 4, 5, 6, 7].map(record)
    assert.strictEqual(inRange(records, 3, 8), records, "all in range: the same array, not a copy")
    assert.deepStrictEqual(offsets(inRange(records, 5, 8)), [5, 6, 7])
    assert.deepStrictEqual(offsets(inRange(records, 0, 5)), [3, 4])
    assert.deepStrictEqual(offsets(inRange(records, 4, 7)), [4, 5, 6])
    assert.deepStrictEqual(offsets(inRange(records, 8, 10)), [])
    assert.deepStrictEqual(inRange([], 0, 10), [])
  })
})
