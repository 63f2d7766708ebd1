/**
 * Windowed aggregations in process (TestDriver): bad windows fail at
 * startup with the fix; a negative event time and a late record (with
 * `late: "error"`) are record errors the rules send to the dead letter
 * topic; the task's stream time and open windows are kept in its state; a
 * window's final result is emitted once, when a record of another key moves
 * stream time past its end plus grace.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Exit, Metric, Option, Schema } from "effect"
import {
  ErrorRule,
  KGroupedStream,
  KStream,
  KTable,
  SessionWindowedKStream,
  SessionWindows,
  SlidingWindows,
  TimeWindowedKStream,
  TimeWindows,
  Topic,
  Topology,
  Transformer,
  Windowed
} from "../../src/index.ts"
import { streamsLateRecordsOf } from "../../src/internal/runtime/RunnerMetrics.ts"
import { TestDriver } from "../../src/testing/index.ts"

const Events = Topic.make({ name: "events", key: Schema.String, value: Topic.json(Schema.Struct({ at: Schema.Number })) })
const Counts = Topic.make({ name: "counts", key: Windowed.json(Schema.String), value: Topic.json(Schema.Number) })

const counting = (
  windows: TimeWindows.TimeWindows | SlidingWindows.SlidingWindows,
  options: TimeWindowedKStream.WindowedOptions = {}
) =>
  Topology.make("counting", [
    KStream.fromTopics([Events], { timestamp: (record) => record.value.at }).pipe(
      KStream.groupByKey(),
      KGroupedStream.windowedBy(windows),
      TimeWindowedKStream.count({ name: "counts", ...options }),
      KTable.toStream,
      KStream.to(Counts)
    )
  ])

/** The topology's one transformer in a TestDriver (compile erases its types). */
const driverOf = (topology: Topology.Topology<never, never>, rules: Topology.RunOptions<never>["rules"] = []) =>
  Effect.gen(function*() {
    const compiled = Topology.compile(topology, "app", { rules })
    if (Either.isLeft(compiled)) return yield* Effect.dieMessage(compiled.left.message)
    const transformer = compiled.right.subTopologies[0]!.transformer
    return yield* TestDriver.make(
      transformer as Transformer.Transformer<readonly [typeof Events], unknown, unknown, never>,
      { deadLetterTopic: "dead-letters" }
    )
  })

const at = (key: string, millis: number): TestDriver.Input<string, { at: number }> => ({ key, value: { at: millis } })

const results = (records: ReadonlyArray<TestDriver.OutputRecord<Windowed.Windowed<string>, number>>) =>
  records.map((r) => `${r.key?.key}@${r.key?.window.start}/${r.key?.window.end}=${r.value}@${r.timestamp}`)

describe("windowed aggregations", () => {
  it("a window size of 0, a negative grace or a bad advance fail at startup with the fix", () => {
    const problems = [
      counting(TimeWindows.ofSizeAndGrace(0, 0)),
      counting(TimeWindows.ofSizeAndGrace(1000, -1)),
      counting(TimeWindows.ofSizeAndGrace(1000, 0).pipe(TimeWindows.advanceBy(2000)))
    ].map((topology) => Topology.compile(topology, "app"))
    const messages = problems.map((p) => Either.isLeft(p) ? `${p.left._tag}: ${p.left.message}` : "compiled")
    assert.match(messages[0]!, /^ConfigurationError: The windows of "counts" have a size of 0 ms\. Give TimeWindows.ofSizeAndGrace a size of at least 1 ms/)
    assert.match(messages[1]!, /^ConfigurationError: The windows of "counts" have a grace period of -1 ms\. Give TimeWindows.ofSizeAndGrace a grace of 0 or more/)
    assert.match(messages[2]!, /^ConfigurationError: The windows of "counts" advance by 2000 ms, with a size of 1000 ms\. Give TimeWindows.advanceBy/)
    const sliding = [
      SlidingWindows.ofTimeDifferenceAndGrace(0, 100),
      SlidingWindows.ofTimeDifferenceAndGrace(100, -5)
    ].map((windows) => {
      const compiled = Topology.compile(counting(windows), "app")
      return Either.isLeft(compiled) ? compiled.left.message : "compiled"
    })
    assert.match(sliding[0]!, /^The sliding windows of "counts" have a time difference of 0 ms\. Give SlidingWindows.ofTimeDifferenceAndGrace a time difference of at least 1 ms/)
    assert.match(sliding[1]!, /^The sliding windows of "counts" have a grace period of -5 ms\. Give SlidingWindows.ofTimeDifferenceAndGrace a grace of 0 or more/)
    const session = Topology.compile(
      Topology.make("visits", [
        KStream.from(Events).pipe(
          KStream.groupByKey(),
          KGroupedStream.windowedBy(SessionWindows.ofInactivityGapAndGrace(0, 0)),
          SessionWindowedKStream.count({ name: "visits" }),
          KTable.toStream,
          KStream.to(Topic.make({ name: "visits", key: Windowed.json(Schema.String), value: Topic.json(Schema.NullOr(Schema.Number)) }))
        )
      ]),
      "app"
    )
    assert.match(
      Either.isLeft(session) ? session.left.message : "compiled",
      /^The session windows of "visits" have an inactivity gap of 0 ms\. Give SessionWindows.ofInactivityGapAndGrace a gap of at least 1 ms/
    )
    // Topology.describe says so too, instead of throwing.
    assert.match(Topology.describe(counting(TimeWindows.ofSizeAndGrace(0, 0))), /cannot run: The windows of "counts" have a size of 0 ms/)
  })

  it.scoped("a negative event time is a record error: to the dead letter topic under a rule, else the run's failure", () =>
    Effect.gen(function*() {
      const topology = counting(TimeWindows.ofSizeAndGrace(1000, 0))
      const ruled = yield* driverOf(topology, [ErrorRule.tagged("InvalidTimestamp", { then: "dlq" })])
      yield* ruled.pipeAll(Events, [at("a", 100), at("a", -5), at("a", 200)])
      assert.deepStrictEqual(results(yield* ruled.outputs(Counts)), ["a@0/1000=1@100", "a@0/1000=2@200"])
      const letters = yield* ruled.deadLetters
      assert.strictEqual(letters.length, 1)
      const error = letters[0]!.headers.find(([name]) => name === "skein.error")?.[1].toString("utf8") ?? ""
      assert.match(error, /events\/0@1 has the event time -5, which is negative/)

      const unruled = yield* driverOf(topology)
      const exit = yield* Effect.exit(unruled.pipe(Events, "a", { at: -1 }))
      assert.ok(Exit.isFailure(exit) && Exit.causeOption(exit).pipe(Option.map(String), Option.getOrElse(() => "")).includes("InvalidTimestamp"))
    }))

  it.scoped("late records: dropped (counted) by default; with late: \"error\", to the dead letter topic with the reason", () =>
    Effect.gen(function*() {
      const input = [at("a", 100), at("a", 1500), at("a", 900), at("a", 400), at("a", 1600)]
      // Tagged as the sub-topology's run ("app-events", transformer "events") and the operator (on /metrics: test/health/server.test.ts).
      const late = streamsLateRecordsOf("app-events", "events", "counts")
      const before = (yield* Metric.value(late)).count
      const dropping = yield* driverOf(counting(TimeWindows.ofSizeAndGrace(1000, 600)))
      yield* dropping.pipeAll(Events, input)
      // 900 lands while stream time is 1500 (< end 1000 + grace 600): accepted; 400 too; 1600 closes [0, 1000).
      // A window accepts records while stream time < end + grace: at 1600 a record for [0, 1000) is late.
      assert.deepStrictEqual(results(yield* dropping.outputs(Counts)), [
        "a@0/1000=1@100",
        "a@1000/2000=1@1500",
        "a@0/1000=2@900",
        "a@0/1000=3@900",
        "a@1000/2000=2@1600"
      ])
      yield* dropping.pipe(Events, "a", { at: 999 })
      assert.strictEqual((yield* dropping.outputs(Counts)).length, 5, "the record at 999 came at stream time 1600: late, dropped")
      assert.strictEqual((yield* dropping.deadLetters).length, 0)
      assert.strictEqual((yield* Metric.value(late)).count - before, 1, "the late record is counted in skein_streams_late_records_total")

      const failing = yield* driverOf(counting(TimeWindows.ofSizeAndGrace(1000, 0), { late: "error" }), [
        ErrorRule.tagged("LateRecord", { then: "dlq" })
      ])
      yield* failing.pipeAll(Events, input)
      assert.deepStrictEqual(results(yield* failing.outputs(Counts)), ["a@0/1000=1@100", "a@1000/2000=1@1500", "a@1000/2000=2@1600"])
      const letters = yield* failing.deadLetters
      assert.deepStrictEqual(letters.map((l) => l.offset === undefined ? -1 : JSON.parse(l.value!.toString("utf8")).at), [900, 400])
      const error = letters[0]!.headers.find(([name]) => name === "skein.error")?.[1].toString("utf8") ?? ""
      assert.match(error, /late record: event time 900 is past the grace period \(0 ms\) of every window of counts it belongs to \(stream time 1500\)/)
    }))

  it.scoped("final results: once per window, when another key's record moves stream time past end + grace; the task's time is kept", () =>
    Effect.gen(function*() {
      const driver = yield* driverOf(counting(TimeWindows.ofSizeAndGrace(1000, 200), { emit: "onWindowClose" }))
      yield* driver.pipeAll(Events, [at("a", 100), at("a", 700), at("b", 900)])
      assert.deepStrictEqual(results(yield* driver.outputs(Counts)), [])
      // b at 1200 = a's end + grace: [0, 1000) closes for both keys, in one batch of its own.
      yield* driver.pipe(Events, "b", { at: 1200 })
      assert.deepStrictEqual(results(yield* driver.outputs(Counts)), ["a@0/1000=2@700", "b@0/1000=1@900"])
      yield* driver.pipeAll(Events, [at("c", 1300), at("a", 5000)])
      assert.deepStrictEqual(results(yield* driver.outputs(Counts)), [
        "a@0/1000=2@700",
        "b@0/1000=1@900",
        "b@1000/2000=1@1200",
        "c@1000/2000=1@1300"
      ])
      // The task's time: stream time, the aggregation's observed time, the slots (1,000 ms: the advance) of the close
      // times still waiting (a's [5000, 6000) closes at 6200), each slot's close times under s{slot}.
      const time = yield* driver.state("t")
      assert.deepStrictEqual(time, Option.some({ _tag: "Time", streamTime: 5000, observed: 5000, closes: [6], storeTime: -1, expiries: [] }))
      assert.deepStrictEqual(yield* driver.state("s6"), Option.some({ _tag: "Times", times: [6200] }))
      assert.deepStrictEqual(yield* driver.state("s2"), Option.none())
      // Closed windows are deleted (retention: size + grace); b's and c's keys have no open window left.
      assert.deepStrictEqual(yield* driver.state("kb"), Option.none())
      assert.deepStrictEqual(yield* driver.state("kc"), Option.none())
      assert.deepStrictEqual(yield* driver.state("c2200"), Option.none())
    }))

  it.scoped("a window end shared by 300 keys (index chunks of 128): every key's final result once, in the order the windows opened", () =>
    Effect.gen(function*() {
      const driver = yield* driverOf(counting(TimeWindows.ofSizeAndGrace(1000, 0), { emit: "onWindowClose" }))
      const keys = Array.from({ length: 300 }, (_, i) => `k${i}`)
      yield* driver.pipeAll(Events, keys.map((key, i) => at(key, i)))
      yield* driver.pipeAll(Events, keys.slice(0, 50).map((key) => at(key, 999)))
      // The index bucket of close time 1000: two full chunks and a head of 44 keys.
      const head = yield* driver.state("c1000")
      assert.deepStrictEqual(head, Option.some({ _tag: "Closing", keys: keys.slice(256).map((key) => `k${key}`), chunks: 2 }))
      yield* driver.pipe(Events, "late-comer", { at: 1000 })
      const finals = results(yield* driver.outputs(Counts))
      assert.deepStrictEqual(finals, keys.map((key, i) => `${key}@0/1000=${i < 50 ? 2 : 1}@${i < 50 ? 999 : i}`))
      assert.deepStrictEqual([yield* driver.state("c1000"), yield* driver.state("c1000.0"), yield* driver.state("c1000.1")], [
        Option.none(),
        Option.none(),
        Option.none()
      ])
    }))

  it.scoped("after a groupBy, the windows' keys come from the repartition topic's codec: a final result closed by another key", () =>
    Effect.gen(function*() {
      const Visits = Topic.make({ name: "visits", key: Schema.String, value: Topic.json(Schema.Struct({ user: Schema.Number, at: Schema.Number })) })
      const PerUser = Topic.make({ name: "per-user", key: Windowed.json(Schema.Number), value: Topic.json(Schema.Number) })
      const topology = Topology.make("per-user", [
        KStream.fromTopics([Visits], { timestamp: (record) => record.value.at }).pipe(
          KStream.groupBy((record) => record.value.user, {
            key: Topic.json(Schema.Number),
            value: Topic.json(Schema.Struct({ user: Schema.Number, at: Schema.Number })),
            name: "by-user"
          }),
          KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace(1000, 0)),
          TimeWindowedKStream.count({ name: "per-user", emit: "onWindowClose" }),
          KTable.toStream,
          KStream.to(PerUser)
        )
      ])
      const compiled = Topology.compile(topology, "app")
      if (Either.isLeft(compiled)) return yield* Effect.dieMessage(compiled.left.message)
      const [, windowed] = compiled.right.subTopologies
      assert.deepStrictEqual(windowed!.inputs, ["app-by-user-repartition"])
      // The repartition topic as the windowed sub-topology reads it (compile erased its types).
      const Repartition = windowed!.transformer.inputs[0] as Topic.Topic<number, { user: number; at: number }>
      const driver = yield* TestDriver.make(
        windowed!.transformer as Transformer.Transformer<readonly [typeof Repartition], unknown, unknown, never>
      )
      yield* driver.pipeAll(Repartition, [
        { key: 7, value: { user: 7, at: 100 }, timestamp: 100 },
        { key: 7, value: { user: 7, at: 900 }, timestamp: 900 },
        { key: 8, value: { user: 8, at: 2500 }, timestamp: 2500 }
      ])
      assert.deepStrictEqual(results2(yield* driver.outputs(PerUser)), ["7@0/1000=2@900"])
    }))
})

const results2 = (records: ReadonlyArray<TestDriver.OutputRecord<Windowed.Windowed<number>, number>>) =>
  records.map((r) => `${r.key?.key}@${r.key?.window.start}/${r.key?.window.end}=${r.value}@${r.timestamp}`)
