/**
 * Named state stores (issue 31, item 2): the key order (UTF-8 bytes of the
 * encoded key) and prefix bounds as pure logic, then KeyValueStore,
 * WindowStore and SessionStore end to end through the batch code
 * (TestDriver): scans in key order with inclusive and exclusive bounds,
 * read-your-writes within a record and across a batch, a failed attempt's
 * writes never seen, one changelog record per key per transaction, and the
 * startup checks (a changed Schema, two stores with one name).
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Option, Schema } from "effect"
import { ErrorRule, KeyValueStore, SessionStore, Timer, Topic, Transformer, WindowStore } from "../../src/index.ts"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as MemoryStore from "../../src/internal/stores/memoryStore.ts"
import * as StateStore from "../../src/internal/stores/StateStore.ts"
import * as Keys from "../../src/internal/stores/keys.ts"
import * as StoreSchemas from "../../src/internal/stores/schemas.ts"
import { TestDriver } from "../../src/testing/index.ts"

const utf8Order = (a: string, b: string): number => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"))

describe("stores: key order", () => {
  it("compare is the order of the keys' UTF-8 bytes (not of UTF-16 code units)", () => {
    const samples = ["", "a", "ab", "a\u0000", "a\u0001", "b", "é", "\uffff", "\ufffd", "😀", "😀a", "\u{10ffff}", "z", "Z", "0", "9"]
    for (const a of samples) {
      for (const b of samples) assert.strictEqual(Math.sign(Keys.compare(a, b)), Math.sign(utf8Order(a, b)), `${a} vs ${b}`)
    }
    // The case that differs: JavaScript's < puts the emoji (a surrogate pair) before U+FFFD.
    assert.isTrue("😀" < "\ufffd")
    assert.isTrue(Keys.compare("😀", "\ufffd") > 0)
  })

  it("prefixEnd is the least string past every string with the prefix", () => {
    assert.strictEqual(Keys.prefixEnd("ab"), "ac")
    assert.strictEqual(Keys.prefixEnd("a\u{10ffff}"), "b")
    assert.strictEqual(Keys.prefixEnd("\ud7ff"), "\ue000")
    assert.strictEqual(Keys.prefixEnd(""), undefined)
    assert.strictEqual(Keys.prefixEnd("\u{10ffff}"), undefined)
    for (const key of ["a", "a\uffff", "a😀", "a\u{10ffff}\u{10ffff}"]) assert.isTrue(Keys.compare(key, Keys.prefixEnd("a") ?? "") < 0)
  })

  it.scoped("a range scan of the LevelDB store and of the in-memory one agree, in UTF-8 order, bounds included as asked", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "skein-stores-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      const disk = yield* StateStore.open(path.join(dir, "0"))
      const memory = MemoryStore.make("memory:range")
      const keys = ["b", "a", "ab", "a\uffff", "a😀", "é", "\ufffd", "😀", "\u{10ffff}", "a\u0000", "c"]
      const writes = keys.map((key, i) => ({ key, value: String(i) }))
      yield* disk.replay(writes)
      yield* memory.replay(writes)
      const ranges: ReadonlyArray<StateStore.Range> = [
        { gte: "" },
        { gte: "a", lt: "b" },
        { gte: "a", lte: "b" },
        { gte: "a\u0000", lt: Keys.prefixEnd("a") ?? "" },
        { gte: "\ufffd", lte: "😀" },
        { gte: "d" }
      ]
      for (const range of ranges) {
        const fromDisk = yield* disk.range(range)
        assert.deepStrictEqual(yield* memory.range(range), fromDisk, JSON.stringify(range))
        const expected = keys.filter((key) =>
          utf8Order(key, range.gte) >= 0 &&
          (range.lte !== undefined ? utf8Order(key, range.lte) <= 0 : range.lt === undefined || utf8Order(key, range.lt) < 0)
        ).sort(utf8Order)
        assert.deepStrictEqual(fromDisk.map(([key]) => key), expected, JSON.stringify(range))
      }
      assert.deepStrictEqual((yield* disk.range({ gte: "\ufffd", lte: "😀" })).map(([key]) => key), ["\ufffd", "😀"])
    }))

  it("times encode to fixed-width text that sorts as the numbers do", () => {
    const times = [0, 1, 15, 16, 255, 60_000, 1_700_000_000_000, Number.MAX_SAFE_INTEGER]
    const encoded = times.map(Keys.encodeTime)
    assert.deepStrictEqual([...encoded].sort(), encoded)
    assert.deepStrictEqual(encoded.map((text) => Keys.decodeTime(text, 0)), times)
    assert.isString(Keys.invalidTime("t", -1))
    assert.isString(Keys.invalidTime("t", 1.5))
  })
})

const Command = Schema.Union(
  Schema.Struct({ op: Schema.Literal("put"), key: Schema.String, value: Schema.Number }),
  Schema.Struct({ op: Schema.Literal("delete"), key: Schema.String }),
  Schema.Struct({ op: Schema.Literal("get"), key: Schema.String }),
  Schema.Struct({ op: Schema.Literal("range"), from: Schema.String, to: Schema.String }),
  Schema.Struct({ op: Schema.Literal("prefix"), prefix: Schema.String }),
  Schema.Struct({ op: Schema.Literal("all") }),
  /** Puts, reads it back in the same transform, then fails (a rule decides). */
  Schema.Struct({ op: Schema.Literal("putThenFail"), key: Schema.String, value: Schema.Number })
)
type Command = typeof Command.Type
const Commands = Topic.make({ name: "commands", key: Schema.String, value: Topic.json(Command) })
const Results = Topic.make({ name: "results", key: Schema.String, value: Schema.String })

class Refused extends Schema.TaggedError<Refused>()("Refused", { seen: Schema.Number }) {}

const Entries = KeyValueStore.make({ name: "entries", key: Schema.String, value: Schema.Number })

const show = (entries: ReadonlyArray<KeyValueStore.Entry<string, number>>) => entries.map((e) => `${e.key}=${e.value}`).join(",")

const run = (command: Command) =>
  Effect.gen(function*() {
    switch (command.op) {
      case "put":
        yield* Entries.put(command.key, command.value)
        // Read-your-writes inside the transform.
        return Option.getOrElse(Option.map(yield* Entries.get(command.key), String), () => "missing")
      case "delete":
        yield* Entries.delete(command.key)
        return Option.isNone(yield* Entries.get(command.key)) ? "deleted" : "still there"
      case "get":
        return Option.getOrElse(Option.map(yield* Entries.get(command.key), String), () => "none")
      case "range":
        return show(yield* Entries.range(command.from, command.to))
      case "prefix":
        return show(yield* Entries.prefix(command.prefix))
      case "all":
        return show(yield* Entries.all)
      case "putThenFail": {
        yield* Entries.put(command.key, command.value)
        const seen = Option.getOrElse(yield* Entries.get(command.key), () => -1)
        return yield* Effect.fail(new Refused({ seen }))
      }
    }
  })

/** What the kv transform fails with: `Refused`, or a store's own errors. */
type KvError = Effect.Effect.Error<ReturnType<typeof run>>

const kvTransformer = (rules: ReadonlyArray<Transformer.Rule<KvError>>) =>
  Transformer.make({
    name: "kv",
    inputs: [Commands],
    state: Schema.Null,
    stores: [Entries],
    transform: (record) => Effect.map(run(record.value), (answer) => ({ emit: [Topic.record(Results, record.key, answer)] })),
    rules
  })

const put = (key: string, value: number) => ({ key: "c", value: { op: "put" as const, key, value } })

const answers = (driver: { readonly outputs: (topic: typeof Results) => Effect.Effect<ReadonlyArray<{ readonly value: string | null }>, unknown> }) =>
  Effect.map(Effect.orDie(driver.outputs(Results)), (records) => records.map((r) => r.value))

describe("stores: KeyValueStore through the TestDriver", () => {
  it.scoped("scans come in UTF-8 key order; range includes both ends; prefix stops at the prefix's end", () =>
    Effect.gen(function*() {
      const driver = yield* TestDriver.make(kvTransformer([]))
      const keys = ["b", "a", "ab", "a\uffff", "a😀", "é", "aa", "ac", "\ufffd", "😀", "a0", "c"]
      // Half committed in a first batch, half written in the batch that scans: the scans merge both.
      yield* driver.pipeAll(Commands, keys.slice(0, 6).map((key, i) => put(key, i)))
      yield* driver.pipeAll(Commands, [
        ...keys.slice(6).map((key, i) => put(key, i + 6)),
        { key: "c", value: { op: "all" } },
        { key: "c", value: { op: "range", from: "a", to: "ac" } },
        { key: "c", value: { op: "range", from: "a0", to: "ab" } },
        { key: "c", value: { op: "range", from: "b", to: "a" } },
        { key: "c", value: { op: "prefix", prefix: "a" } },
        { key: "c", value: { op: "prefix", prefix: "" } },
        { key: "c", value: { op: "prefix", prefix: "ä" } }
      ])
      const sorted = [...keys].sort(utf8Order)
      const [all, range, inner, backwards, prefixA, prefixAll, none] = (yield* answers(driver)).slice(keys.length)
      const index = new Map(keys.map((key, i) => [key, i]))
      const expect = (selected: ReadonlyArray<string>) => selected.map((key) => `${key}=${index.get(key)}`).join(",")
      assert.strictEqual(all, expect(sorted))
      assert.strictEqual(range, expect(["a", "a0", "aa", "ab", "ac"]))
      assert.strictEqual(inner, expect(["a0", "aa", "ab"]))
      assert.strictEqual(backwards, "")
      assert.strictEqual(prefixA, expect(["a", "a0", "aa", "ab", "ac", "a\uffff", "a😀"]))
      assert.strictEqual(prefixAll, expect(sorted))
      assert.strictEqual(none, "")
    }))

  it.scoped("read-your-writes across a batch; a delete hides a committed value; one changelog record per key per transaction", () =>
    Effect.gen(function*() {
      const driver = yield* TestDriver.make(kvTransformer([]))
      yield* driver.pipe(Commands, "c", { op: "put", key: "k", value: 1 })
      yield* driver.pipeAll(Commands, [
        put("k", 2),
        { key: "c", value: { op: "get", key: "k" } },
        put("k", 3),
        { key: "c", value: { op: "delete", key: "k" } },
        { key: "c", value: { op: "get", key: "k" } },
        { key: "c", value: { op: "all" } },
        put("k", 4),
        put("j", 5)
      ])
      yield* driver.pipe(Commands, "c", { op: "all" })
      assert.deepStrictEqual(yield* answers(driver), ["1", "2", "2", "3", "deleted", "none", "", "4", "5", "j=5,k=4"])
      const changelog = yield* driver.records(driver.changelogTopic)
      const entries = changelog.filter((r) => r.key?.toString().startsWith(Keys.namespace("entries")) === true)
      // First batch: k=1. Second batch: k's last write (4) and j, one record each.
      assert.deepStrictEqual(entries.map((r) => [r.key?.toString().slice(Keys.namespace("entries").length), r.value?.toString()]), [
        ["k", "1"],
        ["k", "4"],
        ["j", "5"]
      ])
      // The store's declaration is changelogged with its first commit.
      assert.strictEqual(changelog.filter((r) => r.key?.toString() === Keys.schemaKey("entries")).length, 1)
    }))

  it.scoped("a failed attempt's writes are never seen: not by its retry, not after a skip, not after a fatal failure", () =>
    Effect.gen(function*() {
      const skipping = yield* TestDriver.make(kvTransformer([ErrorRule.tagged("Refused", { then: "skip" })]))
      yield* skipping.pipeAll(Commands, [
        put("k", 1),
        { key: "c", value: { op: "putThenFail", key: "k", value: 99 } },
        { key: "c", value: { op: "get", key: "k" } }
      ])
      assert.deepStrictEqual(yield* answers(skipping), ["1", "1"])

      const failing = yield* TestDriver.make(kvTransformer([]))
      yield* failing.pipe(Commands, "c", { op: "put", key: "k", value: 1 })
      const error = yield* Effect.flip(failing.pipeAll(Commands, [put("k", 2), { key: "c", value: { op: "putThenFail", key: "k", value: 99 } }]))
      // The failing attempt read its own write; the record before it (k=2) is kept, the failed one is not.
      assert.deepStrictEqual(error, new Refused({ seen: 99 }))
      yield* failing.pipe(Commands, "c", { op: "get", key: "k" })
      assert.deepStrictEqual((yield* answers(failing)).slice(-1), ["2"])
    }))

  it.scoped("a store used outside a transform that declares it is a defect naming the fix", () =>
    Effect.gen(function*() {
      const Other = KeyValueStore.make({ name: "other", key: Schema.String, value: Schema.Number })
      const Undeclared = Transformer.make({
        name: "undeclared",
        inputs: [Commands],
        state: Schema.Null,
        stores: [Entries],
        transform: () => Effect.as(Other.put("k", 1), {})
      })
      const driver = yield* TestDriver.make(Undeclared)
      const exit = yield* Effect.exit(driver.pipe(Commands, "c", { op: "all" }))
      assert.include(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "", `KeyValueStore "other" is not one of its stores`)
      const outside = yield* Effect.exit(Entries.get("k"))
      assert.include(Exit.isFailure(outside) ? Cause.pretty(outside.cause) : "", "was used outside a transform")
    }))
})

describe("stores: with timers and state keys", () => {
  it.scoped("onTimer reads and writes stores, in the transaction of the unit that fired it", () =>
    Effect.gen(function*() {
      const Seen = KeyValueStore.make({ name: "seen", key: Schema.String, value: Schema.Number })
      const Expiring = Transformer.make({
        name: "expiring",
        inputs: [Clicks],
        state: Schema.Null,
        stores: [Seen],
        // Its errors are both kinds of a store's: `onTimer` reads too.
        transform: (record): Effect.Effect<Transformer.Result<null>, KeyValueStore.ReadError | KeyValueStore.WriteError> =>
          Effect.as(Seen.put(record.key ?? "", record.value), { timers: [Timer.streamTime("expire", record.timestamp + 100)] }),
        onTimer: (timer) =>
          Effect.gen(function*() {
            const before = yield* Seen.all
            yield* Seen.delete(timer.key)
            const after = yield* Seen.all
            return { emit: [Topic.record(Results, timer.key, `${before.length}->${after.map((e) => e.key).join("")}`)] }
          })
      })
      const driver = yield* TestDriver.make(Expiring)
      yield* driver.pipeAll(Clicks, [{ key: "a", value: 1, timestamp: 0 }, { key: "b", value: 2, timestamp: 50 }])
      yield* driver.pipe(Clicks, "c", 3, { timestamp: 120 }) // a's timer fires after c's record: a, b, c seen, a deleted
      assert.deepStrictEqual(yield* answers(driver), ["3->bc"])
      yield* driver.advanceStreamTime(1_000)
      assert.deepStrictEqual(yield* answers(driver), ["3->bc", "2->c", "1->"])
    }))

  it.scoped("a state key in the stores' reserved key space fails its record, naming the fix", () =>
    Effect.gen(function*() {
      const Sneaky = Transformer.make({
        name: "sneaky",
        inputs: [Commands],
        state: Schema.Null,
        stores: [Entries],
        stateKey: () => `${Keys.namespace("entries")}k`,
        transform: () => Effect.succeed({ state: Transformer.set(null) })
      })
      const driver = yield* TestDriver.make(Sneaky)
      const exit = yield* Effect.exit(driver.pipe(Commands, "c", { op: "all" }))
      assert.include(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "", "reserves for a task's timers and stores")
    }))
})

describe("stores: startup checks", () => {
  const where = { transformer: "t", partition: 0 }

  it.effect("a store declared with another Schema than it was written with fails with the fix; the same one passes", () =>
    Effect.gen(function*() {
      const store = MemoryStore.make<0>("memory:t/0")
      const first = yield* StoreSchemas.check(store, [Entries], where)
      assert.strictEqual(first.length, 1)
      yield* store.replay(first)
      assert.deepStrictEqual(yield* StoreSchemas.check(store, [Entries], where), [])
      const changed = KeyValueStore.make({ name: "entries", key: Schema.String, value: Schema.String })
      // A new store holds no declaration yet: any passes, and its declaration is written.
      assert.strictEqual((yield* StoreSchemas.check(MemoryStore.make<0>("memory:t/0b"), [changed], where)).length, 1)
      const fresh = MemoryStore.make<0>("memory:t/0c")
      yield* fresh.replay(first)
      const mismatch = yield* Effect.exit(StoreSchemas.check(fresh, [changed], where))
      const text = Exit.isFailure(mismatch) ? Cause.pretty(mismatch.cause) : ""
      assert.include(text, `store "entries"`)
      assert.include(text, "KeyValueStore key string, value number")
      assert.include(text, "KeyValueStore key string, value string")
      assert.include(text, "give the changed store a new name")
    }))

  it.effect("two stores with one name, or an invalid name, fail with the fix", () =>
    Effect.gen(function*() {
      const Twin = WindowStore.make({ name: "entries", key: Schema.String, value: Schema.Number })
      assert.include(StoreSchemas.invalidDeclarations("t", [Entries, Twin]) ?? "", `two stores named "entries"`)
      assert.include(StoreSchemas.invalidDeclarations("t", [KeyValueStore.make({ name: "", key: Schema.String, value: Schema.Number })]) ?? "", "empty")
      assert.include(
        StoreSchemas.invalidDeclarations("t", [KeyValueStore.make({ name: "a\u0000b", key: Schema.String, value: Schema.Number })]) ?? "",
        "NUL"
      )
      assert.strictEqual(StoreSchemas.invalidDeclarations("t", [Entries]), undefined)
      const exit = yield* Effect.exit(StoreSchemas.check(MemoryStore.make<0>("memory:t/0"), [Entries, Twin], where))
      assert.include(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "", "give each store its own name")
    }))
})

const Clicks = Topic.make({ name: "clicks", key: Schema.String, value: Topic.json(Schema.Number) })
const PerWindow = WindowStore.make({ name: "per-window", key: Schema.String, value: Schema.Number })
const Visits = SessionStore.make({ name: "visits", key: Schema.String, value: Schema.Number })

describe("stores: WindowStore and SessionStore through the TestDriver", () => {
  it.scoped("fetch reads one key's windows from..to (both included) in start order; another key that extends it is not read", () =>
    Effect.gen(function*() {
      const Windows = Transformer.make({
        name: "windows",
        inputs: [Clicks],
        state: Schema.Null,
        stores: [PerWindow],
        transform: (record) =>
          Effect.gen(function*() {
            const key = record.key ?? ""
            const start = record.timestamp - (record.timestamp % 1000)
            yield* PerWindow.put(key, start, Option.getOrElse(yield* PerWindow.get(key, start), () => 0) + record.value)
            const windows = yield* PerWindow.fetch(key, start - 2000, start)
            // Bounds are any numbers: clamped, and none when from is after to.
            assert.deepStrictEqual(yield* PerWindow.fetch(key, -5, -1), [])
            assert.deepStrictEqual(yield* PerWindow.fetch(key, start + 1, start), [])
            assert.deepStrictEqual(
              (yield* PerWindow.fetch(key, Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY)).map((w) => w.start),
              (yield* PerWindow.fetch(key, 0, Number.MAX_SAFE_INTEGER)).map((w) => w.start)
            )
            assert.deepStrictEqual((yield* PerWindow.fetch(key, start - 0.5, start + 0.5)).map((w) => w.start), [start])
            return { emit: [Topic.record(Results, key, windows.map((w) => `${w.start}:${w.value}`).join(","))] }
          })
      })
      const driver = yield* TestDriver.make(Windows)
      yield* driver.pipeAll(Clicks, [
        { key: "u", value: 1, timestamp: 5_500 },
        { key: "u\u0000", value: 100, timestamp: 4_100 },
        { key: "u", value: 2, timestamp: 3_200 },
        { key: "u", value: 3, timestamp: 5_900 },
        { key: "u", value: 4, timestamp: 2_100 },
        { key: "u", value: 5, timestamp: 7_000 }
      ])
      assert.deepStrictEqual(yield* answers(driver), [
        "5000:1",
        "4000:100",
        "3000:2",
        "3000:2,5000:4",
        "2000:4", // 0..2000: the window at 3000 starts after `to`
        "5000:4,7000:5"
      ])
    }))

  it.scoped("findSessions reads the sessions that end at or after earliestEnd and start at or before latestStart; merging", () =>
    Effect.gen(function*() {
      const gap = 100
      const Sessions = Transformer.make({
        name: "sessions",
        inputs: [Clicks],
        state: Schema.Null,
        stores: [Visits],
        transform: (record) =>
          Effect.gen(function*() {
            const key = record.key ?? ""
            const near = yield* Visits.findSessions(key, record.timestamp - gap, record.timestamp + gap)
            let session = { start: record.timestamp, end: record.timestamp }
            let count = record.value
            for (const found of near) {
              yield* Visits.remove(key, found)
              session = { start: Math.min(session.start, found.start), end: Math.max(session.end, found.end) }
              count += found.value
            }
            yield* Visits.put(key, session, count)
            const all = yield* Visits.findSessions(key, 0, Number.MAX_SAFE_INTEGER)
            return { emit: [Topic.record(Results, key, all.map((s) => `${s.start}-${s.end}:${s.value}`).join(","))] }
          })
      })
      const driver = yield* TestDriver.make(Sessions)
      yield* driver.pipeAll(Clicks, [
        { key: "u", value: 1, timestamp: 1000 },
        { key: "u", value: 1, timestamp: 1500 },
        { key: "u", value: 1, timestamp: 1050 },
        { key: "v", value: 1, timestamp: 1300 }
      ])
      yield* driver.pipe(Clicks, "u", 1, { timestamp: 1300 }) // 1300 is 200 from both: a session of its own
      yield* driver.pipe(Clicks, "u", 1, { timestamp: 1400 }) // joins 1300 and 1500 into one
      assert.deepStrictEqual(yield* answers(driver), [
        "1000-1000:1",
        "1000-1000:1,1500-1500:1",
        "1000-1050:2,1500-1500:1",
        "1300-1300:1",
        "1000-1050:2,1300-1300:1,1500-1500:1",
        "1000-1050:2,1300-1500:3"
      ])
    }))
})
