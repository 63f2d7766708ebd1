import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import type { IHeaders } from "kafkajs"
import { Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, produceRaw, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

const Order = Schema.Struct({ id: Schema.String, amount: Schema.Number })

/** Header values as lists of Buffers (kafkajs gives a Buffer, or an array for a repeated name). */
const headerBytes = (headers: IHeaders): Record<string, Array<string>> =>
  Object.fromEntries(
    Object.entries(headers).map((
      [name, value]
    ) => [name, (Array.isArray(value) ? value : [value]).map((v) => Buffer.from(v ?? "").toString("hex"))])
  )

describe("poison records, byte for byte", () => {
  it.scopedLive("invalid UTF-8 keys and values are poison; dead letters keep key, value and headers exactly", () =>
    Effect.gen(function*() {
      const input = unique("bytes-in")
      const output = unique("bytes-out")
      const dlq = unique("bytes-dlq")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }, { name: dlq, partitions: 1 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Topic.json(Order) })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const seen: Array<string> = []
      const transformer = Transformer.stateless({
        name: "bytes",
        inputs: [In],
        transform: (record) =>
          Effect.sync(() => {
            seen.push(record.value.id)
            return { emit: [Topic.record(Out, record.key, record.value.id)] }
          })
      })
      const binary = Buffer.from([0x00, 0xff, 0xfe, 0x80, 0x0a])
      const headers: IHeaders = { bin: binary, rep: [Buffer.from("one"), Buffer.from([0xc3, 0x28])], txt: "plain" }
      const messages = [
        // 0: valid
        { key: Buffer.from("a"), value: Buffer.from(JSON.stringify({ id: "ok", amount: 1 })), headers },
        // 1: a value whose JSON string holds an invalid UTF-8 byte
        { key: Buffer.from("b"), value: Buffer.concat([Buffer.from('{"id":"'), Buffer.from([0xff]), Buffer.from('","amount":2}')]), headers },
        // 2: an invalid UTF-8 key (an overlong encoding) with a valid value
        { key: Buffer.from([0xc0, 0x80, 0x41]), value: Buffer.from(JSON.stringify({ id: "c", amount: 3 })), headers },
        // 3: an encoded surrogate (not UTF-8) in the value; invalid JSON anyway
        { key: Buffer.from("d"), value: Buffer.from([0x7b, 0xed, 0xa0, 0x80]), headers },
        // 4: valid JSON behind a byte order mark: a BOM is text, not JSON
        { key: Buffer.from("e"), value: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify({ id: "e", amount: 5 }))]) }
      ]
      yield* produceRaw(input, messages)
      const applicationId = unique("bytes-app")
      const instance = yield* startInstance(transformer, { applicationId, deadLetterTopic: dlq })
      yield* caughtUp(applicationId, input).pipe(
        Effect.tapError(() => Effect.flatMap(instance.exit, (exit) => Effect.logError("run ended", exit)))
      )
      assert.deepStrictEqual(seen, ["ok"], "the transform never sees bytes that are not UTF-8")
      assert.deepStrictEqual((yield* readCommitted(output)).map((r) => r.value), ["ok"])
      const dead = yield* readCommitted(dlq)
      assert.deepStrictEqual(dead.map((r) => r.headers["skein.source.offset"]), ["1", "2", "3", "4"])
      for (const record of dead) {
        const offset = Number(record.headers["skein.source.offset"])
        const sent = messages[offset]!
        assert.deepStrictEqual(record.raw.key, sent.key, `key of ${offset}`)
        assert.deepStrictEqual(record.raw.value, sent.value, `value of ${offset}`)
        const copied = headerBytes(record.raw.headers)
        for (const [name, values] of Object.entries(headerBytes(sent.headers ?? {}))) {
          assert.deepStrictEqual(copied[name], values, `header ${name} of ${offset}`)
        }
        assert.strictEqual(record.headers["skein.error.part"], offset === 2 ? "key" : "value")
        assert.isAtMost(record.headers["skein.error"]?.length ?? 0, 1100)
      }
      assert.include(dead[0]?.headers["skein.error"] ?? "", "UTF-8")
      assert.include(dead[1]?.headers["skein.error"] ?? "", "UTF-8")
      assert.isTrue(Option.isNone(yield* instance.exit))
    }))
})
