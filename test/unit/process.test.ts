/**
 * Process nodes (issue 31: `KStream.process`, stores and timers in the DSL),
 * in process through the batch code (TestDriver): a process node's stores
 * (read, write, scans) and timers on both clocks (TestClock, stream time by
 * event time), what `process` and `onTimer` forward running through the
 * operators after the node (mapValues, to, groupBy's repartition), two
 * process nodes' timers of one name apart, a process node in the
 * sub-topology of a windowed aggregation and of a table, a new driver
 * restoring a process node's stores and timers from another's changelog
 * (`restoreFrom`), and the startup checks.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, Effect, Either, Exit, Option, Schema } from "effect"
import {
  ErrorRule,
  KGroupedStream,
  KeyValueStore,
  KStream,
  KTable,
  TimeWindowedKStream,
  TimeWindows,
  Timer,
  Topic,
  Topology,
  type Transformer
} from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"

const Order = Schema.Struct({ id: Schema.String, amount: Schema.Number })
const Orders = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Order) })
const Out = Topic.make({ name: "out", key: Schema.String, value: Schema.String })
const Readings = Topic.make({ name: "readings", key: Schema.String, value: Topic.json(Schema.Number) })
const Alerts = Topic.make({ name: "alerts", key: Schema.String, value: Schema.String })
const Event = Schema.Struct({ at: Schema.Number })
const Events = Topic.make({ name: "events", key: Schema.String, value: Topic.json(Event) })

/** A driver of sub-topology `index` of `topology` (the inputs' types are the test's: compiled transformers are untyped). */
const driverOf = <E, I extends ReadonlyArray<Topic.Any>>(
  topology: Topology.Topology<E, never>,
  inputs: I,
  index = 0,
  rules: Topology.RunOptions<E>["rules"] = [],
  restoreFrom?: ReadonlyArray<TestDriver.RawRecord>
) =>
  Effect.gen(function*() {
    const compiled = Topology.compile(topology, "app", { rules })
    if (Either.isLeft(compiled)) return yield* Effect.dieMessage(compiled.left.message)
    const transformer = compiled.right.subTopologies[index]!.transformer
    assert.deepStrictEqual(transformer.inputs.map((t) => t.name), inputs.map((t) => t.name))
    return yield* TestDriver.make(transformer as Transformer.Transformer<I, unknown, unknown, never>, {
      applicationId: "app",
      deadLetterTopic: "dead-letters",
      restoreFrom
    })
  })

/** The message a topology fails to compile with. */
const compileError = (topology: Topology.Topology<unknown, never>): string =>
  Either.match(Topology.compile(topology, "app"), { onLeft: (error) => error.message, onRight: () => "compiled" })

const Seen = KeyValueStore.make({ name: "seen", key: Schema.String, value: Schema.Number })

/** Each order id once per customer, with the customer's orders so far (a prefix scan) and every order's total (a full scan). */
const dedup = () =>
  Topology.make("dedup", [
    KStream.from(Orders).pipe(
      KStream.process({
        name: "dedup",
        stores: [Seen],
        process: (order, context) =>
          Effect.gen(function*() {
            const id = `${order.key}/${order.value.id}`
            if (Option.isSome(yield* Seen.get(id))) return {}
            yield* Seen.put(id, order.value.amount)
            const mine = yield* Seen.prefix(`${order.key}/`)
            const all = yield* Seen.all
            const between = yield* Seen.range("a/", "a/~")
            return {
              outputs: [{
                key: order.key,
                value: `${order.value.id}@${context.offset}: ${mine.length} of ${order.key}, ` +
                  `${all.reduce((sum, e) => sum + e.value, 0)} in all, ${between.length} of a`
              }]
            }
          })
      }),
      KStream.mapValues((value) => value.toUpperCase()),
      KStream.to(Out)
    )
  ])

describe("KStream.process: stores", () => {
  it.scoped("reads, writes and scans its store; its outputs go through the operators after it, with the record's time and headers", () =>
    Effect.gen(function*() {
      const driver = yield* driverOf(dedup(), [Orders])
      yield* driver.pipe(Orders, "a", { id: "o1", amount: 10 }, { timestamp: 5, headers: { trace: "t1" } })
      yield* driver.pipe(Orders, "b", { id: "o1", amount: 7 }, { timestamp: 6 })
      yield* driver.pipe(Orders, "a", { id: "o1", amount: 10 }, { timestamp: 7 }) // a duplicate: nothing
      yield* driver.pipe(Orders, "a", { id: "o2", amount: 5 }, { timestamp: 8 })
      const out = yield* driver.outputs(Out)
      assert.deepStrictEqual(out.map((r) => [r.key, r.value, r.timestamp]), [
        ["a", "O1@0: 1 OF A, 10 IN ALL, 1 OF A", 5],
        ["b", "O1@1: 1 OF B, 17 IN ALL, 1 OF A", 6],
        ["a", "O2@3: 2 OF A, 22 IN ALL, 2 OF A", 8]
      ])
      assert.deepStrictEqual(out[0]!.headers.map(([name, value]) => [name, value.toString()]), [["trace", "t1"]])
      // The store is changelogged with the sub-topology's state (its entries under Skein's reserved keys).
      const changelog = yield* driver.records(driver.changelogTopic)
      assert.deepStrictEqual(
        changelog.map((r) => r.key?.toString()).filter((key) => key?.startsWith("\u0000skein.store.seen")),
        ["\u0000skein.store.seen\u0000a/o1", "\u0000skein.store.seen\u0000b/o1", "\u0000skein.store.seen\u0000a/o2"]
      )
    }))

  it.scoped("a store the process node does not list is a defect naming the node and the fix", () =>
    Effect.gen(function*() {
      const topology = Topology.make("unlisted", [
        KStream.from(Orders).pipe(
          KStream.process<string, typeof Order.Type, string, string, KeyValueStore.WriteError>({
            name: "p",
            process: (order) => Effect.as(Seen.put(order.value.id, 1), {}) // Seen is not in its stores
          }),
          KStream.to(Out)
        )
      ])
      const driver = yield* driverOf(topology, [Orders])
      const exit = yield* Effect.exit(driver.pipe(Orders, "a", { id: "o1", amount: 1 }))
      assert.isTrue(Exit.isFailure(exit))
      assert.include(
        Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "",
        `orders: process node "p": KeyValueStore "seen" is not one of its stores: add it to its stores ` +
          "(Transformer.make({ ..., stores: [...] }), or KStream.process({ ..., stores: [...] }) for a process node)"
      )
    }))

  it.scoped("a function that throws fails its record with OperatorFailed, for the rules", () =>
    Effect.gen(function*() {
      const topology = Topology.make("throws", [
        KStream.from(Orders).pipe(
          KStream.process({
            name: "thrower",
            process: (order): Effect.Effect<KStream.Processed<string, string>> => {
              if (order.value.amount < 0) throw new Error("negative amount")
              return Effect.succeed({ outputs: [{ key: order.key, value: order.value.id }] })
            }
          }),
          KStream.to(Out)
        )
      ])
      const driver = yield* driverOf(topology, [Orders], 0, [ErrorRule.tagged("OperatorFailed", { then: "dlq" })])
      yield* driver.pipe(Orders, "a", { id: "o1", amount: -1 })
      yield* driver.pipe(Orders, "a", { id: "o2", amount: 1 })
      assert.deepStrictEqual((yield* driver.outputs(Out)).map((r) => r.value), ["o2"])
      const letters = yield* driver.deadLetters
      assert.strictEqual(letters.length, 1)
      assert.include(
        letters[0]!.headers.find(([name]) => name === "skein.error")?.[1].toString() ?? "",
        "The process function of the operator thrower threw on orders/0@0: Error: negative amount"
      )
    }))
})

/** A device silent for 5 minutes of wall-clock time raises an alert, through mapValues; a second node times "silent" too. */
const watchdog = (name = "watchdog") => {
  const Last = KeyValueStore.make({ name: "last-reading", key: Schema.String, value: Schema.Number })
  const readings = KStream.from(Readings)
  const alerts = readings.pipe(
    KStream.process({
      name,
      stores: [Last],
      process: (reading) =>
        Effect.gen(function*() {
          yield* Last.put(reading.key ?? "", reading.value)
          const now = yield* Clock.currentTimeMillis
          return { timers: [Timer.wallClock("silent", now + 5 * 60_000)] }
        }),
      onTimer: (timer) =>
        Effect.map(Last.get(timer.key), (last) => ({
          outputs: [{ key: timer.key, value: `${timer.name} since ${timer.at - 5 * 60_000}, last ${Option.getOrElse(last, () => 0)}` }]
        }))
    }),
    KStream.mapValues((text) => `alert: ${text}`),
    KStream.to(Alerts)
  )
  // Another node of the sub-topology: its "silent" timer is its own.
  const pings = readings.pipe(
    KStream.process({
      name: "pinger",
      process: () => Effect.map(Clock.currentTimeMillis, (now) => ({ timers: [Timer.wallClock("silent", now + 60_000)] })),
      onTimer: (timer) => Effect.succeed({ outputs: [{ key: timer.key, value: `ping ${timer.time}` }] })
    }),
    KStream.to(Out)
  )
  return Topology.make("watchdog", [alerts, pings])
}

describe("KStream.process: timers", () => {
  it.scoped("wall-clock timers (TestClock): each node's own, namespaced; onTimer's records go through mapValues and to, stamped with its time", () =>
    Effect.gen(function*() {
      const driver = yield* driverOf(watchdog(), [Readings])
      yield* driver.pipe(Readings, "d1", 20)
      assert.deepStrictEqual(yield* driver.timers("d1"), [
        { name: JSON.stringify(["pinger", "silent"]), domain: "wall-clock", at: 60_000 },
        { name: JSON.stringify(["watchdog", "silent"]), domain: "wall-clock", at: 300_000 }
      ])
      yield* driver.advanceWallClock("4 minutes")
      assert.deepStrictEqual((yield* driver.outputs(Out)).map((r) => [r.key, r.value, r.timestamp]), [["d1", "ping 240000", 240_000]])
      yield* driver.pipe(Readings, "d1", 21) // moves the watchdog's timer to 4 + 5 minutes
      yield* driver.pipe(Readings, "d2", 30)
      yield* driver.advanceWallClock("5 minutes")
      assert.deepStrictEqual((yield* driver.outputs(Alerts)).map((r) => [r.key, r.value, r.timestamp]), [
        ["d1", "alert: silent since 240000, last 21", 540_000],
        ["d2", "alert: silent since 240000, last 30", 540_000]
      ])
      assert.deepStrictEqual(yield* driver.timers("d1"), [])
      // The timers were changelogged with the state, and their deletions too.
      const changelog = yield* driver.records(driver.changelogTopic)
      const timerKey = `\u0000skein.timer.${JSON.stringify(["d1", JSON.stringify(["watchdog", "silent"])])}`
      assert.deepStrictEqual(changelog.filter((r) => r.key?.toString() === timerKey).map((r) => r.value === null), [false, false, true])
    }))

  it.scoped("stream time moves by event time (the source's extractor): a stream-time timer fires after the record that reaches it", () =>
    Effect.gen(function*() {
      const Expired = Topic.make({ name: "expired", key: Schema.String, value: Schema.String })
      const topology = Topology.make("expiry", [
        KStream.fromTopics([Events], { timestamp: (record) => record.value.at }).pipe(
          KStream.process({
            name: "expiry",
            process: (event) => Effect.succeed({ timers: [Timer.streamTime("expire", event.timestamp + 100)] }),
            onTimer: (timer) => Effect.succeed({ outputs: [{ key: timer.key, value: `${timer.at}/${timer.time}` }] })
          }),
          KStream.to(Expired)
        )
      ])
      const driver = yield* driverOf(topology, [Events])
      // Every record's Kafka timestamp is 0 (TestClock): only event time moves stream time.
      yield* driver.pipe(Events, "a", { at: 1_000 })
      yield* driver.pipe(Events, "b", { at: 1_050 })
      yield* driver.pipe(Events, "c", { at: 1_120 }) // stream time 1,120: a's timer (1,100) fires
      assert.deepStrictEqual((yield* driver.outputs(Expired)).map((r) => [r.key, r.value, r.timestamp]), [["a", "1100/1120", 1_120]])
      assert.strictEqual(yield* driver.streamTime(), 1_120)
      yield* driver.advanceStreamTime(1_300)
      assert.deepStrictEqual((yield* driver.outputs(Expired)).map((r) => r.value), ["1100/1120", "1150/1300", "1220/1300"])
    }))

  it.scoped("what a timer forwards goes through groupBy's repartition topic, as a record's outputs do", () =>
    Effect.gen(function*() {
      const Counts = Topic.make({ name: "counts", key: Schema.String, value: Topic.json(Schema.Number) })
      const topology = Topology.make("expiry", [
        KStream.from(Events).pipe(
          KStream.process({
            name: "expiry",
            process: (event) => Effect.succeed({ timers: [Timer.streamTime("expire", event.value.at + 100)] }),
            onTimer: (timer) => Effect.succeed({ outputs: [{ key: timer.key, value: timer.at }] })
          }),
          KStream.groupBy((expired) => expired.key === "a" ? "a" : "other", {
            key: Schema.String,
            value: Topic.json(Schema.Number),
            name: "by-group"
          }),
          KGroupedStream.count({ name: "expired-counts" }),
          KTable.toStream,
          KStream.to(Counts)
        )
      ])
      const driver = yield* driverOf(topology, [Events])
      yield* driver.pipeAll(Events, [
        { key: "a", value: { at: 0 }, timestamp: 0 },
        { key: "b", value: { at: 10 }, timestamp: 10 },
        { key: "c", value: { at: 200 }, timestamp: 200 }
      ])
      const repartitioned = yield* driver.records("app-by-group-repartition")
      assert.deepStrictEqual(repartitioned.map((r) => [r.key?.toString(), r.value?.toString(), r.timestamp]), [
        ["a", "100", 200],
        ["other", "110", 200]
      ])
      // The downstream sub-topology counts them.
      const counting = yield* driverOf(topology, [Topic.make({ name: "app-by-group-repartition", key: Schema.String, value: Schema.String })], 1)
      for (const r of repartitioned) yield* counting.pipeRaw("app-by-group-repartition", { key: r.key, value: r.value, timestamp: r.timestamp })
      assert.deepStrictEqual((yield* counting.outputs(Counts)).map((r) => [r.key, r.value]), [["a", 1], ["other", 1]])
    }))

  it.scoped("timers scheduled by a node without onTimer are a defect naming the fix", () =>
    Effect.gen(function*() {
      const topology = Topology.make("untimed", [
        KStream.from(Events).pipe(
          KStream.process<string, typeof Event.Type, string, string>({
            name: "p",
            process: () => Effect.succeed({ timers: [Timer.streamTime("t", 5)] })
          }),
          KStream.to(Out)
        )
      ])
      const driver = yield* driverOf(topology, [Events])
      const exit = yield* Effect.exit(driver.pipe(Events, "a", { at: 1 }))
      assert.include(
        Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "",
        `events: the process node "p" schedules timers but has no onTimer to run them: give it one (KStream.process({ ..., onTimer }))`
      )
    }))
})

describe("KStream.process: restored from the changelog", () => {
  it.scoped("a new driver restores the stores and timers from the first's changelog: dedup remembers, the timers fire", () =>
    Effect.gen(function*() {
      const first = yield* driverOf(watchdog(), [Readings])
      yield* first.pipe(Readings, "d1", 20)
      yield* first.pipe(Readings, "d2", 30)
      const second = yield* driverOf(watchdog(), [Readings], 0, [], yield* first.records(first.changelogTopic))
      yield* second.advanceWallClock("5 minutes")
      assert.deepStrictEqual((yield* second.outputs(Alerts)).map((r) => `${r.key} ${r.value}`), [
        "d1 alert: silent since 0, last 20",
        "d2 alert: silent since 0, last 30"
      ])
      assert.deepStrictEqual((yield* second.outputs(Out)).map((r) => `${r.key} ${r.value}`), ["d1 ping 300000", "d2 ping 300000"])
      assert.deepStrictEqual(yield* first.outputs(Alerts), [])

      const dedupFirst = yield* driverOf(dedup(), [Orders])
      yield* dedupFirst.pipe(Orders, "a", { id: "o1", amount: 10 })
      const dedupSecond = yield* driverOf(dedup(), [Orders], 0, [], yield* dedupFirst.records(dedupFirst.changelogTopic))
      yield* dedupSecond.pipe(Orders, "a", { id: "o1", amount: 10 }) // seen before the restore: nothing
      yield* dedupSecond.pipe(Orders, "a", { id: "o2", amount: 5 })
      assert.deepStrictEqual((yield* dedupSecond.outputs(Out)).map((r) => r.value), ["O2@1: 2 OF A, 15 IN ALL, 2 OF A"])
    }))

  it.scoped("a timer of a process node renamed since it was scheduled is dropped (with a warning), the others fire", () =>
    Effect.gen(function*() {
      const first = yield* driverOf(watchdog(), [Readings])
      yield* first.pipe(Readings, "d1", 20)
      const renamed = yield* driverOf(watchdog("silence-watch"), [Readings], 0, [], yield* first.records(first.changelogTopic))
      yield* renamed.advanceWallClock("5 minutes")
      assert.deepStrictEqual(yield* renamed.outputs(Alerts), [])
      assert.deepStrictEqual((yield* renamed.outputs(Out)).map((r) => `${r.key} ${r.value}`), ["d1 ping 300000"])
      assert.deepStrictEqual(yield* renamed.timers("d1"), [])
    }))
})

describe("KStream.process: beside other operators' state", () => {
  it.scoped("a process node's store in a windowed aggregation's sub-topology: both work", () =>
    Effect.gen(function*() {
      const Max = KeyValueStore.make({ name: "max-reading", key: Schema.String, value: Schema.Number })
      const readings = KStream.from(Readings)
      const topology = Topology.make("beside-windows", [
        readings.pipe(
          KStream.groupByKey(),
          KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace(1_000, 0)),
          TimeWindowedKStream.count({ name: "per-second" }),
          KTable.toStream,
          KStream.map((r) => ({ key: `${r.key?.key}@${r.key?.window.start}`, value: `${r.value}` })),
          KStream.to(Out)
        ),
        readings.pipe(
          KStream.process({
            name: "max",
            stores: [Max],
            process: (reading) =>
              Effect.gen(function*() {
                const key = reading.key ?? ""
                const max = Math.max(reading.value, Option.getOrElse(yield* Max.get(key), () => -Infinity))
                yield* Max.put(key, max)
                return { outputs: [{ key, value: `max ${max}` }] }
              })
          }),
          KStream.to(Alerts)
        )
      ])
      const driver = yield* driverOf(topology, [Readings])
      yield* driver.pipe(Readings, "d1", 5, { timestamp: 100 })
      yield* driver.pipe(Readings, "d1", 7, { timestamp: 200 })
      yield* driver.pipe(Readings, "d1", 3, { timestamp: 1_500 })
      assert.deepStrictEqual((yield* driver.outputs(Out)).map((r) => `${r.key} ${r.value}`), ["d1@0 1", "d1@0 2", "d1@1000 1"])
      assert.deepStrictEqual((yield* driver.outputs(Alerts)).map((r) => r.value), ["max 5", "max 7", "max 7"])
    }))

  it.scoped("a process node with onTimer after a table's toStream (a sub-topology keeping a table): its timers fire", () =>
    Effect.gen(function*() {
      const Prices = Topic.make({ name: "prices", key: Schema.String, value: Schema.String })
      const topology = Topology.make("beside-table", [
        KTable.from(Prices, { name: "prices-table" }).pipe(
          KTable.toStream,
          KStream.process({
            name: "stale",
            process: (price) => Effect.succeed({ timers: [Timer.streamTime("stale", price.timestamp + 100)] }),
            onTimer: (timer) => Effect.succeed({ outputs: [{ key: timer.key, value: `stale since ${timer.at - 100}` }] })
          }),
          KStream.to(Out)
        )
      ])
      const driver = yield* driverOf(topology, [Prices])
      yield* driver.pipe(Prices, "a", "1", { timestamp: 0 })
      yield* driver.pipe(Prices, "b", "2", { timestamp: 50 })
      yield* driver.pipe(Prices, "a", "3", { timestamp: 80 }) // a's timer moves to 180
      yield* driver.pipe(Prices, "c", "4", { timestamp: 200 })
      assert.deepStrictEqual((yield* driver.outputs(Out)).map((r) => [r.key, r.value, r.timestamp]), [
        ["b", "stale since 50", 200],
        ["a", "stale since 80", 200]
      ])
    }))
})

describe("KStream.process: startup checks and describe", () => {
  const processWith = (name: string, stores: ReadonlyArray<KeyValueStore.KeyValueStore<string, number>>) =>
    KStream.process<string, { readonly id: string; readonly amount: number }, string, string>({
      name,
      stores,
      process: () => Effect.succeed({})
    })

  it("a store named as another operator's state fails with the fix", () => {
    const orders = KStream.from(Orders)
    const topology = Topology.make("clash", [
      orders.pipe(processWith("p", [KeyValueStore.make({ name: "order-counts", key: Schema.String, value: Schema.Number })]), KStream.to(Out)),
      orders.pipe(
        KStream.groupByKey(),
        KGroupedStream.count({ name: "order-counts" }),
        KTable.toStream,
        KStream.to(Topic.make({ name: "counts", key: Schema.String, value: Topic.json(Schema.Number) }))
      )
    ])
    assert.strictEqual(
      compileError(topology),
      `The KeyValueStore "order-counts" of the process node "p" has the name of the aggregation "order-counts" of topology "clash", ` +
        "whose state it names. Give the store a name of its own: store names share one namespace with the topology's tables, " +
        "aggregations and joins"
    )
  })

  it("two different stores of one name, a store of two sub-topologies, an empty name: each fails with the fix", () => {
    const orders = KStream.from(Orders)
    const other = KeyValueStore.make({ name: "seen", key: Schema.String, value: Schema.String })
    const twoKinds = Topology.make("two", [
      orders.pipe(processWith("p1", [Seen]), KStream.to(Out)),
      orders.pipe(
        KStream.process({ name: "p2", stores: [other], process: () => Effect.succeed({ outputs: [{ key: "k", value: "v" }] }) }),
        KStream.to(Out)
      )
    ])
    assert.include(compileError(twoKinds), `The process nodes "p1" and "p2" of topology "two" list two different stores named "seen"`)
    const shared = Topology.make("shared", [
      orders.pipe(
        processWith("p1", [Seen]),
        KStream.repartition({ key: Schema.String, value: Schema.String, name: "again" }),
        KStream.process({ name: "p2", stores: [Seen], process: () => Effect.succeed({ outputs: [{ key: "k", value: "v" }] }) }),
        KStream.to(Out)
      )
    ])
    assert.strictEqual(
      compileError(shared),
      `The process nodes "p1" and "p2" of topology "shared" share the store "seen" from two sub-topologies, and a store belongs ` +
        "to the tasks of one sub-topology. Use a shared store from process nodes with no repartition between them, or give each " +
        "its own store with its own name"
    )
    // One store value in two process nodes of one sub-topology is one store.
    const oneStore = Topology.make("one", [
      orders.pipe(
        processWith("p1", [Seen]),
        KStream.process<string, string, string, string>({ name: "p2", stores: [Seen], process: () => Effect.succeed({}) }),
        KStream.to(Out)
      )
    ])
    assert.strictEqual(compileError(oneStore), "compiled")
    const empty = Topology.make("empty", [
      orders.pipe(processWith("p", [KeyValueStore.make({ name: "", key: Schema.String, value: Schema.Number })]), KStream.to(Out))
    ])
    // A table whose topic is its changelog restores only itself: a process node's store beside it would be lost.
    const Customers = Topic.make({ name: "customers", key: Schema.String, value: Schema.String })
    const joined = Topology.make("joined", [
      orders.pipe(
        KStream.join(KTable.from(Customers, { name: "customers", sourceChangelog: true }), (order, customer) => ({ ...order, id: customer })),
        processWith("p", [Seen]),
        KStream.to(Out)
      )
    ])
    assert.include(compileError(joined), "a foreign-key join's or a process node's stores or timers), which its source topic cannot restore")
    assert.strictEqual(
      compileError(empty),
      `The process node "p" lists an invalid store: a store's name must not be empty. Give the store a name (KeyValueStore.make({ name, ... }))`
    )
  })

  it("onTimer after a key change, or beside a windowed aggregation, fails with the fix", () => {
    const timed = KStream.process<string, number, string, string>({
      name: "timed",
      process: () => Effect.succeed({ timers: [Timer.cancel("t")] }),
      onTimer: () => Effect.succeed({})
    })
    const rekeyed = Topology.make("rekeyed", [
      KStream.from(Readings).pipe(KStream.selectKey((r) => `${r.value}`), timed, KStream.to(Out))
    ])
    assert.strictEqual(
      compileError(rekeyed),
      `The process node "timed" has onTimer and follows an operator that may change the key (selectKey, map, flatMap, process), ` +
        "and a timer belongs to the key its sub-topology read the record with. Repartition the stream by its new key before the " +
        "process node: KStream.repartition({ key, value })"
    )
    const readings = KStream.from(Readings)
    const windowed = Topology.make("windowed", [
      readings.pipe(timed, KStream.to(Out)),
      readings.pipe(
        KStream.groupByKey(),
        KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace(1_000, 0)),
        TimeWindowedKStream.count({ name: "per-second" }),
        KTable.toStream,
        KStream.mapValues((count) => `${count}`),
        KStream.selectKey((r) => r.key?.key ?? ""),
        KStream.to(Out)
      )
    ])
    assert.include(compileError(windowed), `The process node "timed" has onTimer and is in one sub-topology with the windowed aggregation "per-second"`)
    // Repartitioned first, it runs.
    const repartitioned = Topology.make("repartitioned", [
      KStream.from(Readings).pipe(
        KStream.selectKey((r) => `${r.value}`),
        KStream.repartition({ key: Schema.String, value: Topic.json(Schema.Number), name: "by-value" }),
        timed,
        KStream.to(Out)
      )
    ])
    assert.strictEqual(compileError(repartitioned), "compiled")
  })

  it("describe shows the processor, its stores and its timers; a topology without one compiles as before", () => {
    const text = Topology.describe(watchdog(), "app")
    assert.include(text, "    Processor watchdog (process; stores: last-reading (KeyValueStore); timers)\n      --> KSTREAM-MAPVALUES-")
    assert.include(text, "    Processor pinger (process; timers)\n      --> KSTREAM-SINK-")
    assert.include(Topology.describe(dedup(), "app"), "    Processor dedup (process; stores: seen (KeyValueStore))")
    const plain = Either.getOrThrow(Topology.compile(Topology.make("plain", [KStream.from(Orders).pipe(KStream.mapValues((o) => o.id), KStream.to(Out))]), "app"))
    const transformer = plain.subTopologies[0]!.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>
    assert.isTrue(Option.isNone(transformer.state))
    assert.isUndefined(transformer.onTimer)
    assert.isUndefined(transformer.stores)
  })
})
