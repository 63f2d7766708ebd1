/**
 * Windowed aggregations on a real broker against Kafka Streams'
 * TopologyTestDriver (test/oracle): tumbling count, hopping sum, sliding count and session count (merges), each
 * emitting updates and final results, and a tumbling count's final results after a groupBy (re-keyed
 * through a repartition topic: two sub-topologies), on 1,000 seeded records per seed
 * (out of order, late past grace, gaps), two seeds. One topology run holds
 * the ten cases (eleven sub-topologies, one input topic each); each seed has a
 * partition of its own (its own task, so its own stream time), keys prefixed
 * by the seed.
 *
 * The run stops halfway (every record so far committed) and starts again
 * with an empty state directory: the second half is processed on state
 * restored from the changelogs (stream time, open windows, the index of
 * windows by close time). Each key's results, read committed, equal Kafka
 * Streams' in order: nothing lost or repeated across the restart.
 *
 * The same run has a twelfth sub-topology whose source takes event time from
 * the value (a timestamp extractor): its record with a negative event time,
 * its record 30 days ahead (its update's timestamp, past the output topic's
 * message.timestamp.after.max.ms, which the broker would refuse) and one its
 * extractor throws on (OperatorFailed) go to the dead letter topic under the
 * topology's rules, in their transactions, without moving stream time, and
 * the others are counted.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, Schema } from "effect"
import {
  ErrorRule,
  KGroupedStream,
  KStream,
  KTable,
  SkeinConfig,
  TimeWindowedKStream,
  TimeWindows,
  Topic,
  Topology
} from "../../src/index.ts"
import { Partitioners } from "kafkajs"
import { brokers, caughtUp, createTopics, eventually, groupOffsets, offsets, produceRaw, readCommitted, unique } from "../helpers/kafka.ts"
import type { InputRecord } from "../oracle/kafkaStreams.ts"
import { runKafkaStreamsBatch } from "../oracle/kafkaStreams.ts"
import { actualPerKey, cases, outputTopic, expectedPerKey, inputsOf, inputTopic, type Line, parityKey, seeds, sortedEntries } from "./windowCases.ts"

const text = (value: string | number | null): string | null => value === null ? null : String(value)

/**
 * `caughtUp` for a topic written in transactions (a repartition topic): its last offset is its
 * writer's last commit marker, which a reader's committed offset stops short of.
 */
const caughtUpTransactional = (groupId: string, topic: string) =>
  eventually(
    Effect.gen(function*() {
      const ends = yield* offsets(topic)
      const committed = yield* groupOffsets(groupId, topic)
      return ends.every((e) => e.lastStable === 0 || (committed.get(e.partition) ?? -1) >= e.lastStable - 1)
    }),
    { timeout: 90_000, what: `group ${groupId} to commit up to the end of ${topic}` }
  )

describe("streams: windowed aggregations on a broker against Kafka Streams, across a restart", () => {
  it.scopedLive("tumbling count, hopping sum, sliding count, session count, groupBy count, updates and final results, equal Kafka Streams' per key", () =>
    Effect.gen(function*() {
      const scenarios = cases.flatMap((c) => seeds.map((seed) => ({ case: c, seed, inputs: inputsOf(c, seed) })))
      const oracle = yield* runKafkaStreamsBatch(scenarios.map((s) => ({ topology: s.case.topology, params: s.case.params, inputs: s.inputs })))
      const applicationId = unique("windows")
      const repartitionTopic = (name: string) => `${applicationId}-${name}-repartition`
      const topics = cases.map((c, i) => ({ case: c, input: unique(`win-in-${i}`), output: unique(`win-out-${i}`) }))
      const stamped = { input: unique("win-stamped-in"), output: unique("win-stamped-out"), deadLetters: unique("win-dlq") }
      // Event times (the records' timestamps) are in 1970: with the broker's default time retention a
      // retention check during the run would delete them, so the topics keep everything. A re-keyed
      // case's repartition topic is created here for that reason, with the count Topology.run wants:
      // Skein creates it with the broker's default retention (docs/streams.md, limits).
      const keep = { "retention.ms": "-1" }
      yield* createTopics([
        ...topics.flatMap((t) => [
          { name: t.input, partitions: seeds.length, config: keep },
          { name: t.output, partitions: 1, config: keep },
          ...(t.case.repartition === undefined ? [] : [{ name: repartitionTopic(t.case.repartition), partitions: seeds.length, config: keep }])
        ]),
        { name: stamped.input, partitions: 1, config: keep },
        { name: stamped.output, partitions: 1, config: keep },
        { name: stamped.deadLetters, partitions: 1, config: keep }
      ])
      // A re-keyed case: each seed's new keys hash to the seed's own partition of the repartition topic (the
      // producer's partitioner, Kafka's murmur2), so each seed keeps a stream time of its own downstream, as each
      // oracle run has.
      const partitionOf = Partitioners.DefaultPartitioner()
      const partitionMetadata = seeds.map((_, partitionId) => ({ partitionErrorCode: 0, partitionId, leader: 0, replicas: [0], isr: [0] }))
      for (const [index, seed] of seeds.entries()) {
        for (const key of [parityKey(`s${seed}-k0`, "v0"), parityKey(`s${seed}-k0`, "v1")]) {
          assert.strictEqual(partitionOf({ topic: "repartition", partitionMetadata, message: { key, value: null } }), index, `${key}'s partition`)
        }
      }
      const Stamped = Topic.make({ name: stamped.input, key: Schema.String, value: Topic.json(Schema.Struct({ at: Schema.Number })) })
      const future = Date.now() + 30 * 24 * 3_600_000
      // 13: the extractor throws on it (the user's bug), an OperatorFailed record error.
      yield* produceRaw(stamped.input, [100, -5, 13, future, 200].map((at) => ({ key: "a", value: JSON.stringify({ at }) })))

      const produceHalf = (half: 0 | 1) =>
        Effect.forEach(topics, (t) =>
          produceRaw(t.input, seeds.flatMap((seed, partition) => {
            const inputs: ReadonlyArray<InputRecord> = inputsOf(t.case, seed)
            const middle = inputs.length / 2
            return (half === 0 ? inputs.slice(0, middle) : inputs.slice(middle)).map((r) => ({
              key: text(r.key),
              value: text(r.value),
              timestamp: String(r.timestamp),
              partition
            }))
          })), { discard: true })

      /** Runs the topology with a fresh state directory until every input record is committed. */
      const runUntilCaughtUp = (label: string) =>
        Effect.scoped(Effect.gen(function*() {
          const stateDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-windows-"))
          const started = Date.now()
          // One topology: a sub-topology per case (two for the re-keyed one) and the stamped one, each its own transformer and consumer group.
          const topology = Topology.make("windows", [
            ...topics.map((t) => t.case.stream(inputTopic(t.case, t.input), t.output)),
            KStream.fromTopics([Stamped], {
              timestamp: (record) => {
                if (record.value.at === 13) throw new Error("13 is not a time")
                return record.value.at
              }
            }).pipe(
              KStream.groupByKey(),
              KGroupedStream.windowedBy(TimeWindows.ofSizeAndGrace(1000, 0)),
              TimeWindowedKStream.count({ name: "stamped-counts" }),
              KTable.toStream,
              KStream.to(outputTopic(stamped.output))
            )
          ])
          const fiber = yield* Effect.forkScoped(
            Topology.run(topology, {
              rules: [
                ErrorRule.tagged("InvalidTimestamp", { then: "dlq" }),
                ErrorRule.tagged("TimestampOutOfRange", { then: "dlq" }),
                ErrorRule.tagged("OperatorFailed", { then: "dlq" })
              ]
            }).pipe(
              Effect.provide(SkeinConfig.layer({ applicationId, brokers: brokers(), stateDir, deadLetterTopic: stamped.deadLetters }))
            )
          )
          const failed = Effect.flatMap(Fiber.await(fiber), (exit) => Effect.dieMessage(`the topology ended: ${String(exit)}`))
          // Every source sub-topology, then each re-keyed case's second one (its repartition topic is complete by then).
          const caughtUpAll = Effect.zipRight(
            Effect.forEach([...topics.map((t) => t.input), stamped.input], (input) => caughtUp(`${applicationId}-${input}`, input, 90_000), {
              discard: true
            }),
            Effect.forEach(topics, (t) =>
              t.case.repartition === undefined
                ? Effect.void
                : caughtUpTransactional(`${applicationId}-${t.case.repartition}`, repartitionTopic(t.case.repartition)), { discard: true })
          )
          yield* Effect.raceFirst(caughtUpAll, failed)
          assert.ok(Option.isNone(yield* Fiber.poll(fiber)), "the topology is still running")
          console.log(`${label}: every input record committed in ${Date.now() - started} ms`)
          Fs.rmSync(stateDir, { recursive: true, force: true })
        }))

      const began = Date.now()
      yield* produceHalf(0)
      yield* runUntilCaughtUp("first half")
      yield* produceHalf(1)
      yield* runUntilCaughtUp("second half, state restored from the changelogs")

      let compared = 0
      for (const [i, t] of topics.entries()) {
        const records = yield* readCommitted(t.output)
        const actual = actualPerKey(records)
        const expected = new Map<string, Array<Line>>()
        for (const [s, scenario] of scenarios.entries()) {
          if (scenario.case !== t.case) continue
          const updates = scenarios.findIndex((u) => u.case.topology === t.case.updatesTopology && u.seed === scenario.seed)
          for (const [key, lines] of expectedPerKey(t.case, oracle[s]!, { inputs: scenario.inputs, updates: oracle[updates] })) {
            expected.set(key, lines)
          }
        }
        const want = [...expected.values()].reduce((n, lines) => n + lines.length, 0)
        const raw = scenarios.reduce((n, scenario, s) => scenario.case === t.case ? n + oracle[s]!.length : n, 0)
        assert.isAbove(want, 200, `${t.case.topology}: Kafka Streams emitted results`)
        assert.deepStrictEqual(sortedEntries(actual), sortedEntries(expected), `${t.case.topology} (case ${i})`)
        compared += want
        console.log(
          `${t.case.topology}: ${records.length} results equal Kafka Streams' (${seeds.length} seeds)` +
            (raw === want ? "" : `; the deviation removed ${raw - want} of its ${raw}`)
        )
      }
      console.log(`compared ${compared} results; produce, two runs and reads in ${Date.now() - began} ms`)

      // The extractor's event times: 100 and 200 counted in [0, 1000) (the future record did not move stream
      // time, or 200 would be late), -5, 13 (the extractor threw) and the one 30 days ahead dead-lettered
      // with the reason.
      const counted = actualPerKey(yield* readCommitted(stamped.output))
      assert.deepStrictEqual([...counted], [["a", ["a@0/1000=1@100", "a@0/1000=2@200"]]])
      const letters = yield* readCommitted(stamped.deadLetters)
      assert.deepStrictEqual(letters.map((l) => l.value), [-5, 13, future].map((at) => JSON.stringify({ at })))
      const reasons = new Map(letters.map((l) => [JSON.parse(l.value ?? "{}").at as number, l.headers["skein.error"] ?? ""]))
      assert.match(reasons.get(-5) ?? "", /has the event time -5, which is negative/)
      assert.include(
        reasons.get(13) ?? "",
        "OperatorFailed: The timestamp extractor function of the operator KSTREAM-SOURCE-"
      )
      assert.include(reasons.get(13) ?? "", "Error: 13 is not a time")
      assert.include(
        reasons.get(future) ?? "",
        `An output for ${stamped.output} has the timestamp ${future} (${new Date(future).toISOString()})`
      )
      assert.include(reasons.get(future) ?? "", "past the topic's message.timestamp.after.max.ms of 3600000 ms")
    }), 600_000)
})
