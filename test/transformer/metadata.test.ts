import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Option, Schema } from "effect"
import type { IHeaders, Message } from "kafkajs"
import { ErrorRule, SkeinError, Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, groupOffsets, produce, produceRaw, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

/** Header values per name as hex, in order (kafkajs gives a Buffer, or an array for a repeated name). */
const headerHex = (headers: IHeaders): Record<string, Array<string>> =>
  Object.fromEntries(
    Object.entries(headers).map((
      [name, value]
    ) => [name, (Array.isArray(value) ? value : [value]).map((v) => Buffer.from(v ?? "").toString("hex"))])
  )

const hex = (bytes: Buffer | null): string | null => bytes?.toString("hex") ?? null

describe("record metadata through a transformer", () => {
  it.scopedLive("binary and repeated header values round-trip byte for byte; timestamps propagate; partitions are set", () =>
    Effect.gen(function*() {
      const input = unique("meta-in")
      const output = unique("meta-out")
      const dlq = unique("meta-dlq")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 3 }, { name: dlq, partitions: 1 }])
      const In = Topic.make({ name: input, key: Topic.bytes, value: Topic.bytes })
      const Out = Topic.make({ name: output, key: Topic.bytes, value: Topic.bytes })
      const seen: Array<{ readonly first: string | undefined; readonly all: ReadonlyArray<string>; readonly timestamp: number }> = []
      const later = Date.now() - 30_000
      const copy = Transformer.stateless({
        name: "meta-copy",
        inputs: [In],
        rules: [ErrorRule.tagged("PartitionOutOfRange", { then: "dlq" })],
        transform: (record) =>
          Effect.sync(() => {
            seen.push({
              first: record.headers["rep"],
              all: Transformer.headerValues(record, "rep").map((v) => v.toString("hex")),
              timestamp: record.timestamp
            })
            const route = Transformer.headerValues(record, "route")[0]?.toString()
            // A plain copy keeps the input's timestamp; a routed one sets its partition and timestamp.
            const options = route === undefined ? undefined : { partition: Number(route), timestamp: later }
            return { emit: [Topic.record(Out, record.key, record.value, record.rawHeaders, options)] }
          })
      })

      const base = Date.now() - 60_000
      const binary = Buffer.from([0x00, 0xff, 0xfe, 0x80, 0x0a])
      const messages: ReadonlyArray<Message> = [
        {
          key: Buffer.from([0xc0, 0x80]), // not UTF-8: fine for a binary codec
          value: Buffer.from([0xed, 0xa0, 0x80, 0x00]),
          timestamp: String(base),
          headers: { bin: binary, rep: [Buffer.from("one"), Buffer.from([0xc3, 0x28]), Buffer.alloc(0)], txt: "plain" }
        },
        { key: Buffer.from("k1"), value: binary, timestamp: String(base + 1), headers: { rep: ["a", "b"], route: "2" } },
        { key: null, value: Buffer.alloc(0), timestamp: String(base + 2) },
        // Partition 7 of a topic with 3: PartitionOutOfRange, dead-lettered by the rule.
        { key: Buffer.from("k3"), value: Buffer.from("v"), timestamp: String(base + 3), headers: { route: "7" } }
      ]
      yield* produceRaw(input, messages)
      const applicationId = unique("meta-app")
      const instance = yield* startInstance(copy, { applicationId, deadLetterTopic: dlq })
      yield* caughtUp(applicationId, input).pipe(
        Effect.tapError(() => Effect.flatMap(instance.exit, (exit) => Effect.logError("run ended", exit)))
      )

      assert.deepStrictEqual(seen.map((s) => s.timestamp), [base, base + 1, base + 2, base + 3], "input timestamps")
      assert.deepStrictEqual(seen[0]?.all, ["6f6e65", "c328", ""], "every value of a repeated header, in order")
      assert.strictEqual(seen[0]?.first, "one", "headers: the first value, as text")
      assert.deepStrictEqual(seen[2]?.all, [])

      const out = yield* readCommitted(output)
      assert.strictEqual(out.length, 3, "exactly once: one output per kept record")
      const byKey = new Map(out.map((r) => [hex(r.raw.key), r]))
      for (const [offset, sent] of messages.slice(0, 3).entries()) {
        const got = byKey.get(hex(sent.key === null || sent.key === undefined ? null : Buffer.from(sent.key)))
        assert.ok(got !== undefined, `output of ${offset}`)
        assert.deepStrictEqual(got.raw.key, sent.key ?? null, `key of ${offset}`)
        assert.deepStrictEqual(got.raw.value, sent.value, `value of ${offset}`)
        assert.deepStrictEqual(headerHex(got.raw.headers), headerHex(sent.headers ?? {}), `headers of ${offset}`)
      }
      const plain = byKey.get(hex(Buffer.from([0xc0, 0x80])))
      assert.strictEqual(plain?.timestamp, base, "an output gets its input's timestamp")
      const routed = byKey.get(hex(Buffer.from("k1")))
      assert.strictEqual(routed?.partition, 2, "an output's own partition")
      assert.strictEqual(routed?.timestamp, later, "an output's own timestamp")
      assert.strictEqual(byKey.get(null)?.timestamp, base + 2)

      const dead = yield* readCommitted(dlq)
      assert.strictEqual(dead.length, 1)
      assert.strictEqual(dead[0]?.headers["skein.source.offset"], "3")
      assert.include(dead[0]?.headers["skein.error"] ?? "", "names partition 7, but the topic has 3")
      assert.deepStrictEqual(dead[0]?.raw.value, Buffer.from("v"))
      assert.isTrue(Option.isNone(yield* instance.exit))
    }), 120_000)

  it.scopedLive("without a rule, a partition out of range ends the run with PartitionOutOfRange; the records before it commit", () =>
    Effect.gen(function*() {
      const input = unique("part-in")
      const output = unique("part-out")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 2 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.NumberFromString })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.NumberFromString })
      const route = Transformer.stateless({
        name: "route",
        inputs: [In],
        transform: (record) =>
          Effect.succeed({ emit: [Topic.record(Out, record.key, record.value, undefined, { partition: record.value })] })
      })
      yield* produce(input, ["1", "0", "2", "1"].map((value, i) => ({ key: `k${i}`, value })))
      const applicationId = unique("part-app")
      const instance = yield* startInstance(route, { applicationId })
      const exit = yield* Fiber.await(instance.fiber).pipe(Effect.timeout("60 seconds"))
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      assert.ok(error instanceof SkeinError.PartitionOutOfRange, String(error))
      assert.deepStrictEqual([error.topic, error.partition, error.partitions], [output, 2, 2])
      assert.deepStrictEqual(error.source, { topic: input, partition: 0, offset: 2 })
      assert.strictEqual(instance.stats.aborts, 0, "no transaction was aborted")
      const out = yield* readCommitted(output)
      assert.deepStrictEqual(out.map((r) => [r.key, r.partition]).sort(), [["k0", 1], ["k1", 0]])
      assert.strictEqual((yield* groupOffsets(applicationId, input)).get(0), 2, "nothing past the record")
    }), 120_000)
})
