import { assert, describe, it } from "@effect/vitest"
import * as ChangelogReplay from "../../src/internal/stores/ChangelogReplay.ts"
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

describe("ChangelogReplay.checkLastCommit", () => {
  const commit = [{ key: "a", value: "1" }, { key: "b", value: null }, { key: "ü", value: "é" }]
  const checkpoint = {
    topic: "t",
    partition: 0,
    offset: 10,
    lastCommit: { records: 3, digest: ChangelogReplay.digest(commit) }
  }
  const batch = (from: number, entries: ReadonlyArray<{ key: string; value: string | null }>) =>
    entries.map((e, i) => record(from + i, e.key, e.value))

  it("a checkpoint a restore or a standby wrote names no commit: nothing to check", () => {
    assert.isUndefined(ChangelogReplay.checkLastCommit({ topic: "t", partition: 0, offset: 10 }))
  })

  it("held: the commit's records at the checkpoint, in any number of batches, then anything after", () => {
    const check = ChangelogReplay.checkLastCommit(checkpoint)!
    assert.strictEqual(check.until, 13)
    assert.strictEqual(check.feed(batch(10, commit.slice(0, 2)), 12), "pending")
    assert.strictEqual(check.feed([...batch(12, commit.slice(2)), record(14, "z", "9")], 15), "held")
    assert.strictEqual(check.end(15), "held")
  })

  it("held when the commit is the changelog's last batch (its marker after it)", () => {
    const check = ChangelogReplay.checkLastCommit(checkpoint)!
    check.feed(batch(10, commit), 13)
    assert.strictEqual(check.end(14), "held")
  })

  it("lost: aborted (read_committed skips it), truncated, or other records in its place", () => {
    const aborted = ChangelogReplay.checkLastCommit(checkpoint)!
    assert.strictEqual(aborted.feed([record(14, "a", "1")], 15), "lost")
    const truncated = ChangelogReplay.checkLastCommit(checkpoint)!
    assert.strictEqual(truncated.end(10), "lost")
    const replaced = ChangelogReplay.checkLastCommit(checkpoint)!
    assert.strictEqual(replaced.feed(batch(10, [{ key: "a", value: "1" }, { key: "b", value: "2" }, commit[2]!]), 13), "lost")
    const shorter = ChangelogReplay.checkLastCommit(checkpoint)!
    assert.strictEqual(shorter.feed(batch(10, commit.slice(0, 2)), 12), "pending")
    assert.strictEqual(shorter.end(12), "lost")
    assert.match(ChangelogReplay.lostReason(shorter), /does not hold the store's last commit \(3 records at offset 10\)/)
  })

  it("the digest reads keys and values in order, a tombstone apart from an empty value", () => {
    const d = ChangelogReplay.digest
    assert.notStrictEqual(d([{ key: "a", value: "" }]), d([{ key: "a", value: null }]))
    assert.notStrictEqual(d([{ key: "a", value: "1" }, { key: "b", value: "2" }]), d([{ key: "b", value: "2" }, { key: "a", value: "1" }]))
    assert.notStrictEqual(d([{ key: "ab", value: "c" }]), d([{ key: "a", value: "bc" }]))
    assert.match(d([]), /^[0-9a-f]{8}$/)
  })
})
