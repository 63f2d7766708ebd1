/**
 * The Kafka Streams oracle itself (test/oracle/kafkaStreams.ts): it runs topologies in Kafka
 * Streams 4.4's TopologyTestDriver and reports what they wrote. Broker-free, but it needs Java 17+
 * and Maven (to build the oracle once), so it runs in the main config, not the unit config.
 * All scenarios below run in one JVM (one `runKafkaStreamsBatch`).
 */
import { assert, describe, it, layer } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { ConfigProvider, Context, Effect, Layer } from "effect"
import { generateInputs } from "./inputs.ts"
import { type InputRecord, oracleJar, type OutputRecord, runKafkaStreams, runKafkaStreamsBatch, type Scenario } from "./kafkaStreams.ts"

const record = (key: string, timestamp: number): InputRecord => ({ topic: "input", key, value: "x", timestamp })
const out = (key: string, value: number, timestamp: number): OutputRecord => ({ topic: "output", key, value, timestamp })

/**
 * Tumbling windows of 10 ms with 5 ms grace: a window [s, s + 10) accepts records while stream
 * time < s + 10 + 5 (streams-semantics.md, "Windows"); each update is emitted (cache off) with the
 * largest timestamp seen for the window.
 */
const tumblingInput: ReadonlyArray<InputRecord> = [
  record("a", 1), //  stream time 1:  a@0 = 1
  record("b", 3), //  3:  b@0 = 1
  record("a", 12), // 12: a@10 = 1
  record("a", 8), //  12 < 0 + 15: a@0 = 2 (out of order, within grace), timestamp 8
  record("b", 14), // 14: b@10 = 1
  record("a", 9), //  14 < 15: a@0 = 3, timestamp 9
  record("b", 15), // 15: b@10 = 2
  record("a", 2), //  15 is not < 15: [0, 10) is closed, dropped (late past grace)
  record("b", 7), //  dropped too
  record("a", 20), // 20: a@20 = 1
  record("a", 11), // 20 < 10 + 15: a@10 = 2, timestamp stays 12 (the largest seen)
  record("c", 30) //  30: c@30 = 1; closes [10, 20) (25 <= 30), not [20, 30) (35 > 30)
]

const tumblingUpdates: ReadonlyArray<OutputRecord> = [
  out("a@0", 1, 1),
  out("b@0", 1, 3),
  out("a@10", 1, 12),
  out("a@0", 2, 8),
  out("b@10", 1, 14),
  out("a@0", 3, 9),
  out("b@10", 2, 15),
  out("a@20", 1, 20),
  out("a@10", 2, 12),
  out("c@30", 1, 30)
]

/** Final results (suppress untilWindowCloses): each window once, when stream time reaches end + grace. */
const tumblingFinals: ReadonlyArray<OutputRecord> = [
  out("a@0", 3, 9), //  at stream time 15 (b@15)
  out("b@0", 1, 3),
  out("a@10", 2, 12), // at stream time 30 (c@30)
  out("b@10", 2, 15)
]

const side = (topic: "left" | "right", key: string | null, value: string | null, timestamp: number): InputRecord => ({
  topic,
  key,
  value,
  timestamp
})
const joined = (key: string | null, value: string, timestamp: number): OutputRecord => ({ topic: "output", key, value, timestamp })

/**
 * A stream-table left join (streams-semantics.md, "Tables and joins"): only stream records
 * trigger output, each with the table's current value or null; a table tombstone deletes; a
 * null-value stream record is dropped. A null-key stream record is joined with null (KIP-962,
 * Kafka Streams 3.7+; the notes' "dropped" holds for inner joins).
 */
const streamTableInput: ReadonlyArray<InputRecord> = [
  side("left", "a", "o1", 1), //   no table value yet: o1+null
  side("right", "a", "c1", 2),
  side("left", "a", "o2", 3), //   o2+c1
  side("right", "a", null, 4), //  deletes a
  side("left", "a", "o3", 5), //   o3+null
  side("left", null, "o4", 6), //  null key: o4+null
  side("left", "a", null, 7) //    null value: dropped
]
const streamTableOutput: ReadonlyArray<OutputRecord> = [
  joined("a", "o1+null", 1),
  joined("a", "o2+c1", 3),
  joined("a", "o3+null", 5),
  joined(null, "o4+null", 6)
]

/** With a versioned table (KIP-889), a stream record joins the table as of its own timestamp. */
const versionedInput: ReadonlyArray<InputRecord> = [
  side("right", "a", "c1", 10),
  side("right", "a", "c2", 20),
  side("left", "a", "o1", 15), // as of 15: c1
  side("left", "a", "o2", 5), //  as of 5: no value yet
  side("left", "a", "o3", 25) //  as of 25: c2
]
const versionedOutput: ReadonlyArray<OutputRecord> = [
  joined("a", "o1+c1", 15),
  joined("a", "o2+null", 5),
  joined("a", "o3+c2", 25)
]

const generated = generateInputs({
  seed: 7,
  count: 300,
  nullKeyRate: 0.05,
  tombstoneRate: 0.05,
  headers: { source: "generator" }
})

const scenarios: ReadonlyArray<Scenario> = [
  { topology: "passthrough", inputs: generated },
  { topology: "tumbling-count", params: { sizeMs: 10, graceMs: 5 }, inputs: tumblingInput },
  { topology: "tumbling-count-suppressed", params: { sizeMs: 10, graceMs: 5 }, inputs: tumblingInput },
  { topology: "stream-table-left-join", inputs: streamTableInput },
  { topology: "stream-versioned-table-left-join", params: { historyRetentionMs: 100 }, inputs: versionedInput }
]

class Outputs extends Context.Tag("test/oracle/Outputs")<Outputs, ReadonlyArray<ReadonlyArray<OutputRecord>>>() {}

const timed = Effect.gen(function*() {
  const build = yield* oracleJar
  const started = Date.now()
  const outputs = yield* runKafkaStreamsBatch(scenarios)
  const built = build.built._tag === "Some" ? `built in ${build.built.value.millis} ms (${build.built.value.offline ? "offline" : "online"})` : "cached"
  yield* Effect.sync(() => console.log(`oracle: jar ${built}; ${scenarios.length} scenarios in one JVM in ${Date.now() - started} ms`))
  return outputs
})

layer(Layer.effect(Outputs, timed), { timeout: "10 minutes" })("Kafka Streams oracle", (it) => {
  it.effect("passthrough writes its input unchanged, in order", () =>
    Effect.gen(function*() {
      const [passthrough] = yield* Outputs
      assert.deepStrictEqual(passthrough, generated.map(({ key, value, timestamp }) => ({ topic: "output", key, value, timestamp })))
    }))

  it.effect("a tumbling count emits each update and drops the record past grace", () =>
    Effect.gen(function*() {
      const outputs = yield* Outputs
      assert.deepStrictEqual(outputs[1], tumblingUpdates)
    }))

  it.effect("a suppressed tumbling count emits each window's final count once it closes", () =>
    Effect.gen(function*() {
      const outputs = yield* Outputs
      assert.deepStrictEqual(outputs[2], tumblingFinals)
    }))

  it.effect("a stream-table left join sees the table's current value", () =>
    Effect.gen(function*() {
      const outputs = yield* Outputs
      assert.deepStrictEqual(outputs[3], streamTableOutput)
    }))

  it.effect("a versioned table joins each stream record with the table as of its timestamp", () =>
    Effect.gen(function*() {
      const outputs = yield* Outputs
      assert.deepStrictEqual(outputs[4], versionedOutput)
    }))
})

describe("Kafka Streams oracle errors", () => {
  it.effect("no Maven and no cached build is a MavenMissing error saying what to install", () =>
    Effect.gen(function*() {
      const emptyCache = yield* Effect.acquireRelease(
        Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-oracle-cache-"))),
        (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
      )
      const error = yield* Effect.flip(runKafkaStreams({ topology: "passthrough", inputs: [] })).pipe(
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["PATH", ""], ["SKEIN_CACHE_DIR", emptyCache]])))
      )
      assert.strictEqual(error.reason, "MavenMissing")
      assert.include(error.detail, "apt-get install -y openjdk-17-jdk-headless maven")
    }).pipe(Effect.scoped))

  it.effect("no Java is a JavaMissing error saying what to install", () =>
    Effect.gen(function*() {
      const { jar } = yield* oracleJar // cached: the run below needs only java
      const cacheDir = Path.dirname(Path.dirname(Path.dirname(jar)))
      const error = yield* Effect.flip(runKafkaStreams({ topology: "passthrough", inputs: [] })).pipe(
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["PATH", ""], ["SKEIN_CACHE_DIR", cacheDir]])))
      )
      assert.strictEqual(error.reason, "JavaMissing")
      assert.include(error.detail, "needs Java 17+")
    }), 600_000)

  it.effect("a missing param is a RunFailed error naming it", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(runKafkaStreams({ topology: "tumbling-count", params: { sizeMs: 10 }, inputs: [] }))
      assert.strictEqual(error.reason, "RunFailed")
      assert.include(error.detail, `tumbling-count needs the integer param "graceMs"`)
    }), 600_000)
})

describe("generateInputs", () => {
  it("is deterministic per seed and differs across seeds", () => {
    const options = { count: 500, tombstoneRate: 0.1, nullKeyRate: 0.1 }
    const a = generateInputs({ seed: 1, ...options })
    assert.deepStrictEqual(generateInputs({ seed: 1, ...options }), a)
    assert.notDeepEqual(generateInputs({ seed: 2, ...options }), a)
    assert.strictEqual(a.length, 500)
  })

  it("makes out-of-order, late, null-key and tombstone records", () => {
    const records = generateInputs({ seed: 3, count: 2_000, tombstoneRate: 0.05, nullKeyRate: 0.05, lateByMs: 5_000 })
    let max = -1
    let outOfOrder = 0
    let late = 0
    for (const r of records) {
      if (r.timestamp < max) outOfOrder++
      if (r.timestamp <= max - 5_000) late++
      max = Math.max(max, r.timestamp)
    }
    const nullKeys = records.filter((r) => r.key === null).length
    const tombstones = records.filter((r) => r.value === null).length
    console.log(`generateInputs seed 3: ${outOfOrder} out of order, ${late} late, ${nullKeys} null keys, ${tombstones} tombstones of ${records.length}`)
    assert.isAbove(outOfOrder, 0)
    assert.isAbove(late, 0)
    assert.isAbove(nullKeys, 0)
    assert.isAbove(tombstones, 0)
    assert.isTrue(records.every((r) => Number.isInteger(r.timestamp) && r.timestamp >= 0))
  })
})
