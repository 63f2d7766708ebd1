import { assert, describe, it } from "@effect/vitest"
import * as ChangelogReplay from "../../src/internal/ChangelogReplay.ts"
import type { ChangelogRecord } from "../../src/internal/kafka/changelogReader.ts"

const record = (offset: number, key: string | null, value: string | null): ChangelogRecord => ({
  offset,
  key: key === null ? null : Buffer.from(key),
  value: value === null ? null : Buffer.from(value)
})

describe("ChangelogReplay.writes", () => {
  it("keeps the last record of each key, in the order of those last records", () => {
    const writes = ChangelogReplay.writes([
      record(0, "a", "1"),
      record(1, "b", "1"),
      record(2, "a", "2"),
      record(3, "c", "1"),
      record(4, "b", null),
      record(5, "a", "3")
    ])
    assert.deepStrictEqual(writes, [{ key: "c", value: "1" }, { key: "b", value: null }, { key: "a", value: "3" }])
  })

  it("a put after a tombstone is a put; a tombstone after a put is a delete", () => {
    assert.deepStrictEqual(ChangelogReplay.writes([record(0, "k", null), record(1, "k", "back")]), [{ key: "k", value: "back" }])
    assert.deepStrictEqual(ChangelogReplay.writes([record(0, "k", "v"), record(1, "k", null)]), [{ key: "k", value: null }])
  })

  it("no records, no writes", () => {
    assert.deepStrictEqual(ChangelogReplay.writes([]), [])
  })
})
