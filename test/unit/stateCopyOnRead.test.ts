/**
 * Who gets a private copy of a state (`src/internal/stores/stateCopy.ts`), through
 * the batch code (TestDriver): a user's transformer does, so mutating the
 * state it was given (its record's, or another key's through `TaskState.get`)
 * never reaches the next record; the stream DSL's compiled transformers are
 * given the states themselves (their operators never mutate one: the copy
 * through JSON text was a fifth of the windowed job's CPU, issue 31), and
 * hand user functions (an aggregator, the operators after an aggregation, a
 * joiner) private copies of the aggregates and table values instead, so a
 * skipped record's mutation of one never counts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Option, Schema } from "effect"
import * as StateCopy from "../../src/internal/stores/stateCopy.ts"
import {
  ErrorRule,
  KGroupedStream,
  KStream,
  KTable,
  TimeWindowedKStream,
  TimeWindows,
  Topic,
  Topology,
  Transformer,
  Windowed
} from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"

const Pokes = Topic.make({ name: "pokes", key: Schema.String, value: Schema.String })
const Seen = Topic.make({ name: "seen", key: Schema.String, value: Topic.json(Schema.Number) })
const Box = Schema.mutable(Schema.Struct({ n: Schema.Number }))
type Box = typeof Box.Type

/**
 * "set" stores `{ n: 1 }` as its key's state and as the task's `other`; "poke" emits the `n` of
 * both as it was given them, then sets both to 99 in place and changes no state.
 */
const poking = (): Transformer.Transformer<readonly [typeof Pokes], Box, never, never> => ({
  name: "poking",
  inputs: [Pokes],
  state: Option.some(Topic.json(Box)),
  stateKey: (record) => `own-${record.key}`,
  sharedState: true,
  rules: [],
  transform: (record, own, task) =>
    Effect.gen(function*() {
      if (task === undefined) return yield* Effect.dieMessage("no task state")
      if (record.value === "set") {
        return { state: Transformer.set({ n: 1 }), others: [{ key: "other", state: Transformer.set({ n: 1 }) }] }
      }
      const other = yield* task.get("other")
      const boxes = [own, other].map((box) => Option.getOrElse(box, (): Box => ({ n: -1 })))
      const emit = boxes.map((box) => Topic.record(Seen, record.key, box.n))
      for (const box of boxes) box.n = 99
      return { emit }
    })
})

/** What the pokes saw: one batch of a set and two pokes, then a poke in a batch of its own. */
const pokesSeen = (transformer: Transformer.Transformer<readonly [typeof Pokes], Box, never, never>) =>
  Effect.gen(function*() {
    const driver = yield* TestDriver.make(transformer)
    yield* driver.pipeAll(Pokes, [{ key: "a", value: "set" }, { key: "a", value: "poke" }, { key: "a", value: "poke" }])
    yield* driver.pipe(Pokes, "a", "poke")
    return (yield* driver.outputs(Seen)).map((r) => r.value)
  })

/** Sub-topology `index` of `topology` in a TestDriver (compile erases its types). */
const compiled = <E>(topology: Topology.Topology<E, never>, options: Topology.RunOptions<E> = {}, index = 0) => {
  const result = Topology.compile(topology, "copies", options)
  if (Either.isLeft(result)) throw new Error(result.left.message)
  return result.right.subTopologies[index]!.transformer as Transformer.Transformer<ReadonlyArray<Topic.Any>, unknown, unknown, never>
}

const Amounts = Topic.make({ name: "amounts", key: Schema.String, value: Schema.String })
const Counts = Topic.make({ name: "counts", key: Schema.String, value: Topic.json(Schema.Number) })
const WindowCounts = Topic.make({ name: "window-counts", key: Windowed.json(Schema.String), value: Topic.json(Schema.Number) })
const Tally = Schema.mutable(Schema.Struct({ count: Schema.Number }))
type Tally = typeof Tally.Type

/** A user's aggregator that mutates the aggregate it is given (allowed: it is the user's copy). */
const bump = (tally: Tally): Tally => {
  tally.count += 1
  return tally
}

/** A user's function that fails the record of a "boom" (skipped by the rules), called after `bump` changed the aggregate. */
const failOnBoom = (tally: Tally, record: { readonly value: string }) => {
  if (record.value === "boom") throw new Error("boom")
  return tally.count
}

const skip = [ErrorRule.tagged("OperatorFailed", { then: "skip" })] as const

describe("state copies on read", () => {
  it.scoped("a user's transformer gets private copies: its in-place changes reach no later record, in or across batches", () =>
    Effect.gen(function*() {
      const user = poking()
      assert.isTrue(StateCopy.copiesOnRead(user))
      // Each poke sees { n: 1 } for its own key and for `other`, though the one before set both to 99.
      assert.deepStrictEqual(yield* pokesSeen(user), [1, 1, 1, 1, 1, 1])
    }))

  it.scoped("a transformer marked readsWithoutCopy gets the states themselves: its own key's and TaskState.get's", () =>
    Effect.gen(function*() {
      const marked = StateCopy.readsWithoutCopy(poking())
      assert.isFalse(StateCopy.copiesOnRead(marked))
      // No copy: the first poke's 99s are what the next pokes are given (the same objects,
      // from the batch's states and then from the task's cache).
      assert.deepStrictEqual(yield* pokesSeen(marked), [1, 1, 99, 99, 99, 99])
    }))

  it.scoped("the DSL's compiled transformers are marked: windowed, not windowed, a table and stateless", () =>
    Effect.gen(function*() {
      const windowed = compiled(Topology.make("windowed", [
        KStream.from(Amounts).pipe(
          KStream.groupByKey(),
          KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace(1000, 0)),
          TimeWindowedKStream.count({ name: "per-second" }),
          KTable.toStream,
          KStream.to(WindowCounts)
        )
      ]))
      const counted = compiled(Topology.make("counted", [
        KStream.from(Amounts).pipe(KStream.groupByKey(), KGroupedStream.count({ name: "counts" }), KTable.toStream, KStream.to(Counts))
      ]))
      const table = compiled(Topology.make("table", [KTable.from(Amounts).pipe(KTable.toStream, KStream.to(Pokes))]))
      const stateless = compiled(Topology.make("stateless", [KStream.from(Amounts).pipe(KStream.to(Pokes))]))
      for (const transformer of [windowed, counted, table, stateless]) assert.isFalse(StateCopy.copiesOnRead(transformer), transformer.name)
      const user = Transformer.make({ name: "user", inputs: [Amounts], state: Schema.Number, transform: () => Effect.succeed({}) })
      assert.isTrue(StateCopy.copiesOnRead(user))
    }))

  it.scoped("a windowed aggregator that mutates its aggregate, on a record then skipped: the window's count leaves it out", () =>
    Effect.gen(function*() {
      const failing = Topology.make("tallies", [
        KStream.from(Amounts).pipe(
          KStream.groupByKey(),
          KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace(1000, 0)),
          TimeWindowedKStream.aggregate((): Tally => ({ count: 0 }), (tally: Tally, record: { readonly value: string }) => {
            const bumped = bump(tally)
            // The aggregate is already changed in place when the record fails.
            failOnBoom(bumped, record)
            return bumped
          }, { state: Tally, name: "tallies" }),
          KTable.toStream,
          KStream.mapValues((tally: Tally) => tally.count),
          KStream.to(WindowCounts)
        )
      ])
      const driver = yield* TestDriver.make(compiled(failing, { rules: skip }))
      yield* driver.pipeAll(Amounts, ["x", "boom", "y", "boom", "z"].map((value, i) => ({ key: "k", value, timestamp: 100 + i })))
      yield* driver.pipe(Amounts, "k", "boom", { timestamp: 200 })
      yield* driver.pipe(Amounts, "k", "w", { timestamp: 300 })
      const counts = (yield* driver.outputs(WindowCounts)).map((r) => r.value)
      assert.deepStrictEqual(counts, [1, 2, 3, 4])
    }))

  it.scoped("an aggregator (not windowed) that mutates its aggregate, on a record then skipped: the count leaves it out", () =>
    Effect.gen(function*() {
      const topology = Topology.make("tallies", [
        KStream.from(Amounts).pipe(
          KStream.groupByKey(),
          KGroupedStream.aggregate((): Tally => ({ count: 0 }), (tally: Tally, record: { readonly value: string }) => {
            const bumped = bump(tally)
            failOnBoom(bumped, record)
            return bumped
          }, { state: Tally, name: "tallies" }),
          KTable.toStream,
          KStream.mapValues((tally: Tally) => tally.count),
          KStream.to(Counts)
        )
      ])
      const driver = yield* TestDriver.make(compiled(topology, { rules: skip }))
      yield* driver.pipeAll(Amounts, ["x", "boom", "y"].map((value) => ({ key: "k", value })))
      yield* driver.pipe(Amounts, "k", "boom")
      yield* driver.pipe(Amounts, "k", "z")
      assert.deepStrictEqual((yield* driver.outputs(Counts)).map((r) => r.value), [1, 2, 3])
    }))

  it.scoped("a joiner that mutates the table value it is given: the next lookup sees the table's value", () =>
    Effect.gen(function*() {
      const Tallies = Topic.make({ name: "tallies", key: Schema.String, value: Topic.json(Tally) })
      const Joined = Topic.make({ name: "joined", key: Schema.String, value: Topic.json(Schema.Number) })
      const topology = Topology.make("joined", [
        KStream.from(Amounts).pipe(
          KStream.join(KTable.from(Tallies), (_value: string, tally: Tally) => bump(tally).count, { name: "bumped" }),
          KStream.to(Joined)
        )
      ])
      const driver = yield* TestDriver.make(compiled(topology))
      yield* driver.pipe(Tallies, "k", { count: 10 })
      yield* driver.pipeAll(Amounts, [{ key: "k", value: "x" }, { key: "k", value: "y" }])
      yield* driver.pipe(Amounts, "k", "z")
      assert.deepStrictEqual((yield* driver.outputs(Joined)).map((r) => r.value), [11, 11, 11])
    }))
})

describe("states that cannot be mutated", () => {
  it("a number, a string, a boolean, a literal union, a refined number: no copy is needed; an object or an Option is copied", () => {
    const immutable = {
      number: StateCopy.immutable(Topic.json(Schema.Number)),
      string: StateCopy.immutable(Topic.json(Schema.String)),
      boolean: StateCopy.immutable(Topic.json(Schema.Boolean)),
      literals: StateCopy.immutable(Topic.json(Schema.Literal("a", "b"))),
      int: StateCopy.immutable(Topic.json(Schema.Int)),
      numberFromString: StateCopy.immutable(Topic.json(Schema.NumberFromString)),
      union: StateCopy.immutable(Topic.json(Schema.Union(Schema.Number, Schema.String)))
    }
    for (const [name, is] of Object.entries(immutable)) assert.isTrue(is, name)
    const mutable = {
      struct: StateCopy.immutable(Topic.json(Box)),
      array: StateCopy.immutable(Topic.json(Schema.Array(Schema.Number))),
      option: StateCopy.immutable(Topic.json(Schema.Option(Schema.Number))),
      unionWithStruct: StateCopy.immutable(Topic.json(Schema.Union(Schema.Number, Box)))
    }
    for (const [name, is] of Object.entries(mutable)) assert.isFalse(is, name)
  })
})
