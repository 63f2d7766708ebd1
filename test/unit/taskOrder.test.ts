/**
 * Timestamp order across a task's inputs (`taskOrder.ts`), as Kafka
 * Streams' `PartitionGroup` picks records and `readyToProcess` decides
 * whether a task waits (`max.task.idle.ms`, KIP-695): the merge order, the
 * batch a task takes up to a lagging input, and readiness with its idle
 * deadlines. Also the cut of a batch run in that order (`cut.ts`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Option, Schema } from "effect"
import * as Cut from "../../src/internal/runtime/cut.ts"
import { makeStats } from "../../src/internal/runtime/RunnerStats.ts"
import { validateConfig } from "../../src/internal/runtime/validation.ts"
import * as TaskOrder from "../../src/internal/runtime/taskOrder.ts"
import { SkeinConfig, Topic, Transformer } from "../../src/index.ts"
import { inputsOf, seeds } from "../streams/joinCases.ts"

describe("taskOrder.merge", () => {
  it("takes the smallest timestamp across inputs, each input in offset order (its own disorder kept)", () => {
    // Input 0: 5, 1 (out of order within its partition); input 1: 2, 3, 9.
    assert.deepStrictEqual(TaskOrder.merge([[5, 1], [2, 3, 9]]), [1, 1, 0, 0, 1])
  })

  it("on equal timestamps, the input listed first (the table before the stream when listed so)", () => {
    assert.deepStrictEqual(TaskOrder.merge([[7], [7]]), [0, 1])
    assert.deepStrictEqual(TaskOrder.merge([[], [1, 2]]), [1, 1])
  })
})

describe("taskOrder.merge agrees with the order the differential tests pipe into Kafka Streams' TopologyTestDriver", () => {
  // The join cases' seeded inputs interleave `left` (stream) and `right` (table) in timestamp order, as the oracle
  // pipes them; a task holding both inputs buffered takes them in that order (records of one timestamp: each
  // input's in offset order, the input listed first before the other).
  for (const seed of seeds) {
    it(`seed ${seed}: the same records in the same order, ties apart`, () => {
      const inputs = inputsOf(seed)
      const byTopic = ["left", "right"].map((topic) => inputs.filter((r) => r.topic === topic))
      const next = [0, 0]
      const merged = TaskOrder.merge(byTopic.map((records) => records.map((r) => r.timestamp))).map((i) => byTopic[i]![next[i]!++]!)
      assert.strictEqual(merged.length, inputs.length)
      // Equal groups per timestamp; and where a timestamp holds one topic's records only, the very same sequence.
      const groups = (records: ReadonlyArray<typeof inputs[number]>) => {
        const by = new Map<number, Array<string>>()
        for (const r of records) by.set(r.timestamp, [...(by.get(r.timestamp) ?? []), `${r.topic}:${r.key}:${r.value}`])
        return by
      }
      const expected = groups(inputs)
      const actual = groups(merged)
      assert.deepStrictEqual([...actual.keys()], [...expected.keys()])
      let ties = 0
      for (const [timestamp, records] of expected) {
        const topics = new Set(records.map((r) => r.split(":")[0]))
        if (topics.size === 1) assert.deepStrictEqual(actual.get(timestamp), records)
        else {
          ties++
          assert.deepStrictEqual([...actual.get(timestamp)!].sort(), [...records].sort())
        }
      }
      assert.isAbove(ties, 0, "the inputs hold records of both topics at one timestamp")
    })
  }
})

describe("taskOrder.plan", () => {
  it("all inputs buffered to their end, none may run dry: stops where the first one runs out", () => {
    // Stream [10, 30], table [20]: 10 (stream), 20 (table); the table is then empty and may not run dry.
    const plan = TaskOrder.plan([{ timestamps: [10, 30], mayRunDry: false }, { timestamps: [20], mayRunDry: false }], 100)
    assert.deepStrictEqual(plan, { taken: [1, 1], enforced: 0 })
  })

  it("a lagging table input (nothing buffered, not idle): nothing is taken, the stream record waits", () => {
    const plan = TaskOrder.plan([{ timestamps: [30], mayRunDry: false }, { timestamps: [], mayRunDry: false }], 100)
    assert.deepStrictEqual(plan, { taken: [0, 0], enforced: 0 })
  })

  it("an idle input (caught up, past maxTaskIdle) may run dry: the rest goes ahead, counted as enforced", () => {
    const plan = TaskOrder.plan([{ timestamps: [10, 30, 40], mayRunDry: false }, { timestamps: [20], mayRunDry: true }], 100)
    // 10, 20 in order; then 30 and 40 while the table has nothing: enforced. The stream itself may not run dry,
    // but the plan ends with its records all taken (nothing is taken past its end).
    assert.deepStrictEqual(plan, { taken: [3, 1], enforced: 2 })
  })

  it("takes at most max records, in timestamp order", () => {
    const plan = TaskOrder.plan([{ timestamps: [1, 3, 5], mayRunDry: true }, { timestamps: [2, 4, 6], mayRunDry: true }], 4)
    assert.deepStrictEqual(plan.taken, [2, 2])
  })

  it("the table update written before the stream record in event time is taken first, however the batches arrived", () => {
    // The stream's record (t2 = 2000) and the table's update (t1 = 1000): the update first.
    const plan = TaskOrder.plan([{ timestamps: [2000], mayRunDry: false }, { timestamps: [1000], mayRunDry: false }], 10)
    assert.deepStrictEqual(plan.taken, [0, 1])
    assert.deepStrictEqual(TaskOrder.merge([[2000], [1000]]), [1, 0])
  })
})

describe("taskOrder.readiness", () => {
  const input = (topic: string, buffered: number, lag: TaskOrder.Lag = "caught-up"): TaskOrder.InputState => ({ topic, buffered, lag })

  it("every input buffered: ready, and their idle deadlines are cleared", () => {
    const deadlines = new Map([["table", 5]])
    assert.deepStrictEqual(TaskOrder.readiness([input("stream", 1), input("table", 2)], deadlines, 100, 0), { _tag: "Ready" })
    assert.strictEqual(deadlines.size, 0)
  })

  it("an empty input whose lag is unknown: waiting, with a lookup of its end offset", () => {
    const deadlines = new Map<string, number>()
    assert.deepStrictEqual(TaskOrder.readiness([input("stream", 1), input("table", 0, "unknown")], deadlines, 100, 0), {
      _tag: "Waiting",
      lookup: ["table"],
      until: undefined
    })
  })

  it("an empty input known to be behind: waiting for its fetch, whatever maxTaskIdle", () => {
    const deadlines = new Map<string, number>()
    assert.deepStrictEqual(TaskOrder.readiness([input("stream", 1), input("table", 0, "behind")], deadlines, 100, 0), {
      _tag: "Waiting",
      lookup: [],
      until: undefined
    })
  })

  it("an empty, caught-up input with maxTaskIdle 0 (the default): enforced processing at once", () => {
    const deadlines = new Map<string, number>()
    assert.deepStrictEqual(TaskOrder.readiness([input("stream", 1), input("table", 0)], deadlines, 100, 0), {
      _tag: "Enforced",
      idle: ["table"]
    })
  })

  it("with maxTaskIdle above 0: waits until the deadline set when the input was first seen idle, then goes ahead", () => {
    const deadlines = new Map<string, number>()
    const inputs = [input("stream", 1), input("table", 0)]
    assert.deepStrictEqual(TaskOrder.readiness(inputs, deadlines, 100, 50), { _tag: "Waiting", lookup: [], until: 150 })
    // Asked again before the deadline: the same deadline (not pushed back).
    assert.deepStrictEqual(TaskOrder.readiness(inputs, deadlines, 149, 50), { _tag: "Waiting", lookup: [], until: 150 })
    assert.deepStrictEqual(TaskOrder.readiness(inputs, deadlines, 150, 50), { _tag: "Enforced", idle: ["table"] })
    // The input gets records: its deadline is gone, the next idle period starts over.
    TaskOrder.readiness([input("stream", 1), input("table", 1)], deadlines, 160, 50)
    assert.deepStrictEqual(TaskOrder.readiness(inputs, deadlines, 170, 50), { _tag: "Waiting", lookup: [], until: 220 })
  })

  it("nothing buffered at all: waiting; \"no-wait\" (Kafka Streams' -1): ready as soon as anything is buffered", () => {
    assert.strictEqual(TaskOrder.readiness([input("stream", 0), input("table", 0)], new Map(), 100, 0)._tag, "Waiting")
    assert.deepStrictEqual(TaskOrder.readiness([input("stream", 1), input("table", 0, "unknown")], new Map(), 100, "no-wait"), {
      _tag: "Ready"
    })
  })
})

describe("taskOrder.applies", () => {
  const Orders = Topic.make({ name: "orders", key: Schema.String, value: Schema.String })
  const Customers = Topic.make({ name: "customers", key: Schema.String, value: Schema.String })
  const Keyed = Topic.make({ name: "keyed", key: Schema.String, value: Schema.String, keyConcurrency: true })

  it("a transformer reading several topics, one record after the other; not one input, nor key concurrency", () => {
    const of = (inputs: ReadonlyArray<Topic.Any>) =>
      Transformer.make({ name: "t", inputs, state: Schema.String, transform: () => Effect.succeed({}) })
    assert.isTrue(TaskOrder.applies(of([Orders, Customers])))
    assert.isFalse(TaskOrder.applies(of([Orders])))
    assert.isFalse(TaskOrder.applies(of([Orders, Keyed])))
  })
})

describe("cut in processing order", () => {
  const done = (offset: number, key: string, value: number): Cut.Done<number> => ({
    offset,
    stateKey: key,
    outputs: [{ topic: "out", key, value: String(value) }],
    change: Option.some(value),
    disposition: "processed"
  })

  it("outputs and each key's last change follow the order the units ran in, across slices", () => {
    // Slice 0 (stream) ran its record at offset 0 after slice 1's (table) at offset 7, then slice 0's offset 1.
    const result = Cut.cut([
      { offsets: [0, 1], endOffset: 2, lanes: [{ offsets: [0, 1], done: [done(0, "k", 2), done(1, "k", 3)] }] },
      { offsets: [7], endOffset: 8, lanes: [{ offsets: [7], done: [done(7, "k", 1)] }] }
    ], [], [1, 0, 0])
    assert.deepStrictEqual(result.outputs.map((o) => o.value), ["1", "2", "3"])
    assert.deepStrictEqual([...result.states], [["k", Option.some(3)]])
    assert.deepStrictEqual(result.cuts, [{ offset: 2, kept: 2 }, { offset: 8, kept: 1 }])
  })

  it("a batch cut short in that order keeps the prefix that ran: each slice to its first unfinished record", () => {
    const result = Cut.cut([
      { offsets: [0, 1], endOffset: 2, lanes: [{ offsets: [0, 1], done: [done(0, "a", 1)] }] },
      { offsets: [7, 8], endOffset: 9, lanes: [{ offsets: [7, 8], done: [done(7, "b", 1)] }] }
    ], [], [1, 0])
    assert.deepStrictEqual(result.cuts, [{ offset: 1, kept: 1 }, { offset: 8, kept: 1 }])
    assert.strictEqual(result.processed, 2)
  })
})

describe("maxTaskIdle at startup", () => {
  const check = (maxTaskIdle: SkeinConfig.SkeinConfig["maxTaskIdle"]) =>
    Effect.map(
      Effect.exit(validateConfig(
        SkeinConfig.make({ applicationId: "idle", brokers: ["127.0.0.1:9"], maxTaskIdle }),
        makeStats(),
        { name: "t", rules: [], state: Option.none() }
      )),
      (exit) => Exit.isFailure(exit) ? String(exit.cause) : "passed"
    )

  it.effect("an infinite wait fails with the fix; a finite one and no-wait pass", () =>
    Effect.gen(function*() {
      const failure = yield* check(Duration.infinity)
      assert.include(failure, "maxTaskIdle must be finite")
      assert.include(failure, "SKEIN_MAX_TASK_IDLE")
      assert.strictEqual(yield* check(Duration.millis(500)), "passed")
      assert.strictEqual(yield* check("no-wait"), "passed")
    }))
})
