import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import * as Cut from "../../src/internal/runtime/cut.ts"

const done = (offset: number, stateKey: string, value: number, disposition: Cut.Done<number>["disposition"] = "processed") => ({
  offset,
  stateKey,
  outputs: [{ topic: "out", key: stateKey, value: String(value) }],
  change: Option.some(value),
  disposition
})

describe("cut", () => {
  it("a fully processed slice commits to its end offset, with every output and the last state per key", () => {
    const result = Cut.cut([{
      offsets: [10, 11, 12],
      endOffset: 14,
      lanes: [{ offsets: [10, 11, 12], done: [done(10, "a", 1), done(11, "b", 1), done(12, "a", 2)] }]
    }])
    assert.deepStrictEqual(result.cuts, [{ offset: 14, kept: 3 }])
    assert.deepStrictEqual([...result.states], [["a", Option.some(2)], ["b", Option.some(1)]])
    assert.strictEqual(result.outputs.length, 3)
    assert.strictEqual(result.processed, 3)
  })

  it("a failed record cuts its slice there: nothing at or past it is kept", () => {
    const result = Cut.cut([{
      offsets: [0, 1, 2, 3],
      endOffset: 4,
      lanes: [{ offsets: [0, 1, 2, 3], done: [done(0, "a", 1), done(1, "a", 2)] }]
    }])
    assert.deepStrictEqual(result.cuts, [{ offset: 2, kept: 2 }])
    assert.deepStrictEqual([...result.states], [["a", Option.some(2)]])
  })

  it("with several lanes (key concurrency) the cut is the first unfinished record of any lane", () => {
    // Lane a finished 0 and 3; lane b finished 1 but not 2: 3 is past the cut and is dropped.
    const result = Cut.cut([{
      offsets: [0, 1, 2, 3],
      endOffset: 4,
      lanes: [
        { offsets: [0, 3], done: [done(0, "a", 1), done(3, "a", 2)] },
        { offsets: [1, 2], done: [done(1, "b", 1)] }
      ]
    }])
    assert.deepStrictEqual(result.cuts, [{ offset: 2, kept: 2 }])
    assert.deepStrictEqual([...result.states].sort(), [["a", Option.some(1)], ["b", Option.some(1)]])
    assert.strictEqual(result.processed, 2)
  })

  it("counts skipped and dead-lettered records; each slice is cut on its own", () => {
    const result = Cut.cut([
      { offsets: [5], endOffset: 6, lanes: [{ offsets: [5], done: [done(5, "x", 1, "skipped")] }] },
      { offsets: [7, 8], endOffset: 9, lanes: [{ offsets: [7, 8], done: [done(7, "y", 1, "deadLettered")] }] }
    ])
    assert.deepStrictEqual(result.cuts, [{ offset: 6, kept: 1 }, { offset: 8, kept: 1 }])
    assert.deepStrictEqual({ skipped: result.skipped, deadLettered: result.deadLettered, processed: result.processed }, {
      skipped: 1,
      deadLettered: 1,
      processed: 2
    })
  })
})
