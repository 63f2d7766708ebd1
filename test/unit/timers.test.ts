/**
 * Timers (issue 31, item 4): the pure logic of a task's timers (order, due
 * computation, bounds, changes and their writes, loading and committing), and
 * timers end to end through the batch code (TestDriver): a device that has
 * been silent for 5 minutes raises an alert, on wall-clock time (TestClock)
 * and on stream time (piped records, an explicit advance); timer changes
 * commit with their unit or not at all; onTimer's errors go through the rules.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, Effect, Exit, Option, Schema } from "effect"
import { ErrorRule, Timer, Topic, Transformer } from "../../src/index.ts"
import * as MemoryStore from "../../src/internal/stores/memoryStore.ts"
import * as Timers from "../../src/internal/runtime/timers.ts"
import { TestDriver } from "../../src/testing/index.ts"

const entry = (key: string, name: string, at: number, domain: Timer.Domain = "stream-time"): Timers.Entry => ({ key, name, domain, at })

/** A committed table holding `entries`. */
const tableOf = (entries: ReadonlyArray<Timers.Entry>, streamTime = -1): Timers.TimerTable => {
  const table = Timers.makeTable()
  table.loaded = true
  const pending = new Timers.Pending(table)
  const writes: Array<Timers.Write> = []
  for (const e of entries) writes.push(...pending.apply(e.key, [{ _tag: "Schedule", timer: { name: e.name, domain: e.domain, at: e.at } }]))
  const time = pending.advance(streamTime)
  Timers.commit(table, time === undefined ? writes : [...writes, time])
  return table
}

describe("timers: pure logic", () => {
  it("due timers come in time order, then by key, then by name; only the domain asked and at or before now", () => {
    const table = tableOf([
      entry("b", "x", 20),
      entry("a", "y", 20),
      entry("a", "x", 20),
      entry("c", "x", 10),
      entry("d", "x", 31),
      entry("e", "x", 5, "wall-clock")
    ])
    const due = new Timers.Pending(table).due("stream-time", 30)
    assert.deepStrictEqual(due.map((e) => `${e.key}.${e.name}@${e.at}`), ["c.x@10", "a.x@20", "a.y@20", "b.x@20"])
    assert.deepStrictEqual(new Timers.Pending(table).due("wall-clock", 5).map((e) => e.key), ["e"])
    assert.deepStrictEqual(new Timers.Pending(table).due("wall-clock", 4), [])
  })

  it("a scan tightens the bounds; below a bound nothing is scanned or due", () => {
    const table = tableOf([entry("a", "x", 100), entry("b", "x", 200)])
    assert.strictEqual(table.next["stream-time"], 100)
    const pending = new Timers.Pending(table)
    assert.deepStrictEqual(pending.due("stream-time", 99), [])
    const due = pending.due("stream-time", 150)
    assert.deepStrictEqual(due.map((e) => e.key), ["a"])
    // Fired and committed: the table's bound is stale (100) until the next scan tightens it.
    Timers.commit(table, [pending.remove(due[0]!)])
    assert.strictEqual(table.next["stream-time"], 100)
    assert.deepStrictEqual(new Timers.Pending(table).due("stream-time", 150), [])
    assert.strictEqual(table.next["stream-time"], 200)
    assert.strictEqual(Timers.wakeAt(table), Number.POSITIVE_INFINITY)
  })

  it("scheduling a name again replaces the timer (any domain); cancel writes a tombstone only for a timer there", () => {
    const table = tableOf([entry("k", "t", 50)])
    const pending = new Timers.Pending(table)
    const old = pending.get("k", "t")!
    const writes = pending.apply("k", [Timer.wallClock("t", 70), Timer.cancel("missing")])
    assert.strictEqual(writes.length, 1)
    assert.deepStrictEqual(pending.get("k", "t"), entry("k", "t", 70, "wall-clock"))
    assert.isFalse(pending.current(old))
    assert.deepStrictEqual(pending.due("stream-time", 1_000), [])
    assert.deepStrictEqual(pending.due("wall-clock", 70).map((e) => e.at), [70])
    const cancelled = pending.apply("k", [Timer.cancel("t")])
    assert.deepStrictEqual(cancelled.map((w) => w.value), [null])
    assert.strictEqual(pending.get("k", "t"), undefined)
    // The committed table is untouched until the writes commit.
    assert.deepStrictEqual(table.entries.get(Timers.timerKey("k", "t")), entry("k", "t", 50))
    Timers.commit(table, [...writes, ...cancelled])
    assert.strictEqual(table.entries.size, 0)
  })

  it("stream time only moves forward; its write commits the later time", () => {
    const table = tableOf([], 10)
    const pending = new Timers.Pending(table)
    assert.strictEqual(pending.advance(5), undefined)
    assert.strictEqual(pending.advance(-1), undefined)
    const write = pending.advance(12)!
    assert.strictEqual(write.value, "12")
    Timers.commit(table, [write])
    assert.strictEqual(table.streamTime, 12)
  })

  it("keys of timers never collide (a name or key with separators) and are reserved", () => {
    assert.notStrictEqual(Timers.timerKey("a\u0000b", "c"), Timers.timerKey("a", "b\u0000c"))
    assert.isTrue(Timers.isReserved(Timers.timerKey("a", "b")))
    assert.isTrue(Timers.isReserved(Timers.streamTimeKey))
    assert.isFalse(Timers.isReserved("skein.timer"))
  })

  it("a time that is not a finite number is refused with the fix", () => {
    assert.include(Timers.invalidChange([Timer.streamTime("t", Number.NaN)]) ?? "", "finite number")
    assert.strictEqual(Timers.invalidChange([Timer.streamTime("t", 1), Timer.cancel("u")]), undefined)
  })

  it.effect("a task's timers and stream time are read back from its store (a restart, a new owner)", () =>
    Effect.gen(function*() {
      const store = MemoryStore.make("memory:timers", 0)
      const source = tableOf(Array.from({ length: 2_500 }, (_, i) => entry(`k${i}`, "t", 1_000 + i, i % 2 === 0 ? "stream-time" : "wall-clock")), 77)
      yield* store.replay([
        ...[...source.entries].map(([key, e]) => ({ key, value: JSON.stringify(e) })),
        { key: Timers.streamTimeKey, value: "77" },
        { key: "k1", value: "1" }
      ])
      const table = Timers.makeTable()
      assert.strictEqual(Timers.wakeAt(table), Number.NEGATIVE_INFINITY)
      yield* Timers.load(table, store, { transformer: "t", partition: 0 })
      assert.strictEqual(table.entries.size, 2_500)
      assert.strictEqual(table.streamTime, 77)
      assert.strictEqual(Timers.wakeAt(table), 1_001)
      assert.strictEqual(table.next["stream-time"], 1_000)
    }))
})

const Readings = Topic.make({ name: "readings", key: Schema.String, value: Topic.json(Schema.Number) })
const Alerts = Topic.make({ name: "alerts", key: Schema.String, value: Schema.String })
const silence = 5 * 60_000

/** Wall clock: each reading (re)schedules its device's "silent" timer 5 minutes from now. */
const WallClockWatchdog = Transformer.make({
  name: "watchdog",
  inputs: [Readings],
  state: Schema.Number,
  transform: (record) =>
    Effect.map(Clock.currentTimeMillis, (now) => ({
      state: Transformer.set(record.value),
      timers: [Timer.wallClock("silent", now + silence)]
    })),
  onTimer: (timer, last) =>
    Effect.succeed({
      emit: [Topic.record(Alerts, timer.key, `silent since ${timer.at - silence}, last ${Option.getOrElse(last, () => -1)}`)]
    })
})

class Unreachable extends Schema.TaggedError<Unreachable>()("Unreachable", {}) {}

/** Stream time: each reading (re)schedules its device's timer 5 minutes of event time later; "pager" alerts fail. */
const streamWatchdog = (rules: ReadonlyArray<Transformer.Rule<Unreachable>>) =>
  Transformer.make({
    name: "stream-watchdog",
    inputs: [Readings],
    state: Schema.Number,
    transform: (record) =>
      Effect.succeed({ state: Transformer.set(record.value), timers: [Timer.streamTime("silent", record.timestamp + silence)] }),
    onTimer: (timer) =>
      timer.key === "pager"
        ? Effect.fail(new Unreachable())
        : Effect.succeed({ emit: [Topic.record(Alerts, timer.key, `silent at ${timer.time}`)], state: Transformer.remove }),
    rules
  })

describe("timers: TestDriver", () => {
  it.scoped("wall clock: an alert when a device has been silent for 5 minutes (TestClock)", () =>
    Effect.gen(function*() {
      const driver = yield* TestDriver.make(WallClockWatchdog)
      yield* driver.pipe(Readings, "d1", 1)
      yield* driver.advanceWallClock("4 minutes")
      yield* driver.pipe(Readings, "d1", 2) // moves d1's timer to 4 + 5 minutes
      yield* driver.pipe(Readings, "d2", 7)
      assert.deepStrictEqual(yield* driver.timers("d1"), [{ name: "silent", domain: "wall-clock", at: 9 * 60_000 }])
      yield* driver.advanceWallClock("4 minutes")
      assert.deepStrictEqual(yield* driver.outputs(Alerts), [])
      yield* driver.advanceWallClock("1 minute")
      const fired = yield* driver.outputs(Alerts)
      assert.deepStrictEqual(fired.map((r) => [r.key, r.value, r.timestamp]), [
        ["d1", "silent since 240000, last 2", 9 * 60_000],
        ["d2", "silent since 240000, last 7", 9 * 60_000]
      ])
      assert.deepStrictEqual(yield* driver.timers("d1"), [])
      yield* driver.advanceWallClock("1 hour")
      assert.strictEqual((yield* driver.outputs(Alerts)).length, 2)
      // The timers were changelogged with the state: scheduled, then deleted when they fired.
      const changelog = yield* driver.records(driver.changelogTopic)
      const timerRecords = changelog.filter((r) => r.key?.toString().startsWith("\u0000skein.timer.") === true)
      assert.deepStrictEqual(timerRecords.map((r) => r.value === null), [false, false, false, true, true])
    }))

  it.scoped("stream time: piped records and an explicit advance fire due timers, after the record that moved it", () =>
    Effect.gen(function*() {
      const driver = yield* TestDriver.make(streamWatchdog([]))
      yield* driver.pipeAll(Readings, [{ key: "d1", value: 1, timestamp: 0 }, { key: "d2", value: 2, timestamp: 0 }])
      yield* driver.pipe(Readings, "d2", 3, { timestamp: 200_000 })
      assert.deepStrictEqual(yield* driver.outputs(Alerts), [])
      // One batch: the record at 400,000 moves stream time past d1's timer (300,000); it fires after it.
      yield* driver.pipeAll(Readings, [{ key: "d2", value: 4, timestamp: 400_000 }, { key: "d3", value: 5, timestamp: 100 }])
      assert.deepStrictEqual((yield* driver.outputs(Alerts)).map((r) => [r.key, r.value, r.timestamp]), [["d1", "silent at 400000", 400_000]])
      assert.deepStrictEqual(yield* driver.state("d1"), Option.none())
      assert.strictEqual(yield* driver.streamTime(), 400_000)
      // d3's record (timestamp 100) scheduled its timer at 300,100, behind stream time: it fires at the
      // next check, here an explicit advance without a record, before d2's (700,000).
      yield* driver.advanceStreamTime(700_000)
      assert.deepStrictEqual((yield* driver.outputs(Alerts)).map((r) => r.key), ["d1", "d3", "d2"])
      assert.strictEqual(yield* driver.streamTime(), 700_000)
      // Stream time never goes back.
      yield* driver.advanceStreamTime(10)
      assert.strictEqual(yield* driver.streamTime(), 700_000)
    }))

  it.scoped("onTimer's errors go through the rules: skipped (the timer is gone), dead-lettered (a copy of the timer)", () =>
    Effect.gen(function*() {
      const skipping = yield* TestDriver.make(streamWatchdog([ErrorRule.tagged("Unreachable", { then: "skip" })]))
      yield* skipping.pipe(Readings, "pager", 1, { timestamp: 0 })
      yield* skipping.advanceStreamTime(silence)
      assert.deepStrictEqual(yield* skipping.timers("pager"), [])
      assert.deepStrictEqual(yield* skipping.outputs(Alerts), [])

      const lettering = yield* TestDriver.make(streamWatchdog([ErrorRule.tagged("Unreachable", { then: "dlq" })]), {
        deadLetterTopic: "dlq"
      })
      yield* lettering.pipe(Readings, "pager", 1, { timestamp: 0 })
      yield* lettering.advanceStreamTime(silence + 1)
      const [letter] = yield* lettering.deadLetters
      assert.strictEqual(letter?.key?.toString(), "pager")
      assert.deepStrictEqual(JSON.parse(letter?.value?.toString() ?? ""), { name: "silent", domain: "stream-time", at: silence, time: silence + 1 })
      const header = (name: string) => letter?.headers.find(([n]) => n === name)?.[1].toString()
      assert.strictEqual(header("skein.error.part"), "timer")
      assert.include(header("skein.error") ?? "", "Unreachable")
      assert.deepStrictEqual(yield* lettering.timers("pager"), [])
    }))

  it.scoped("without a rule, onTimer's error fails the batch: the record that moved stream time commits nothing", () =>
    Effect.gen(function*() {
      const driver = yield* TestDriver.make(streamWatchdog([]))
      yield* driver.pipe(Readings, "pager", 1, { timestamp: 0 })
      const error = yield* Effect.flip(driver.pipe(Readings, "d1", 2, { timestamp: silence }))
      assert.strictEqual(error._tag, "Unreachable")
      // Neither the record (its state, its timer) nor the fired timer's removal nor stream time committed.
      assert.deepStrictEqual(yield* driver.state("d1"), Option.none())
      assert.deepStrictEqual(yield* driver.timers("d1"), [])
      assert.deepStrictEqual(yield* driver.timers("pager"), [{ name: "silent", domain: "stream-time", at: silence }])
      assert.strictEqual(yield* driver.streamTime(), 0)
    }))

  it.scoped("a result that schedules timers without onTimer, or at a time that is not a number, is a defect naming the fix", () =>
    Effect.gen(function*() {
      const NoHandler = Transformer.make({
        name: "no-handler",
        inputs: [Readings],
        state: Schema.Number,
        transform: () => Effect.succeed({ timers: [Timer.streamTime("t", 1)] })
      })
      const driver = yield* TestDriver.make(NoHandler)
      const exit = yield* Effect.exit(driver.pipe(Readings, "d", 1))
      assert.include(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "", "has no onTimer")
      const Nan = Transformer.make({
        name: "nan",
        inputs: [Readings],
        state: Schema.Number,
        transform: () => Effect.succeed({ timers: [Timer.wallClock("t", Number.NaN)] }),
        onTimer: () => Effect.succeed({})
      })
      const nan = yield* TestDriver.make(Nan)
      const nanExit = yield* Effect.exit(nan.pipe(Readings, "d", 1))
      assert.include(Exit.isFailure(nanExit) ? Cause.pretty(nanExit.cause) : "", "finite number")
    }))

  it.scoped("onTimer can reschedule its own timer (a recurring timer) and change the key's state", () =>
    Effect.gen(function*() {
      const Ticker = Transformer.make({
        name: "ticker",
        inputs: [Readings],
        state: Schema.Number,
        transform: () => Effect.succeed({ state: Transformer.set(0), timers: [Timer.wallClock("tick", 60_000)] }),
        onTimer: (timer, ticks) => {
          const next = Option.getOrElse(ticks, () => 0) + 1
          return Effect.succeed({
            emit: [Topic.record(Alerts, timer.key, `tick ${next}`)],
            state: Transformer.set(next),
            timers: next < 3 ? [Timer.wallClock("tick", timer.at + 60_000)] : []
          })
        }
      })
      const driver = yield* TestDriver.make(Ticker)
      yield* driver.pipe(Readings, "k", 1)
      for (let i = 0; i < 5; i++) yield* driver.advanceWallClock("1 minute")
      assert.deepStrictEqual((yield* driver.outputs(Alerts)).map((r) => r.value), ["tick 1", "tick 2", "tick 3"])
      assert.deepStrictEqual(yield* driver.state("k"), Option.some(3))
    }))
})
