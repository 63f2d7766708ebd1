/**
 * A seeded corpus of 10,000 records, valid ones mixed with every kind of
 * malformed input (invalid JSON, deep nesting, huge values, empty and null
 * values, invalid UTF-8 in keys and values, binary and repeated headers),
 * through a stateful JSON transformer with a dead letter topic. Every record
 * ends in the output or the dead letter topic exactly once, dead letters byte
 * for byte, and the run never ends.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Option, Schema } from "effect"
import type { IHeaders, Message } from "kafkajs"
import { Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, produceRaw, readCommitted, startInstance, unique } from "../helpers/kafka.ts"
import { seeded } from "../helpers/seeded.ts"

const RECORDS = 10_000
const PARTITIONS = 2
const DLQ_LIMIT = 64 * 1024


type Kind =
  | "valid"
  | "schema"
  | "invalidJson"
  | "deep"
  | "huge"
  | "empty"
  | "null"
  | "badUtf8Value"
  | "badUtf8Key"
  | "bom"

const invalidUtf8: ReadonlyArray<ReadonlyArray<number>> = [
  [0xff],
  [0x80],
  [0xc0, 0x80], // overlong NUL
  [0xc3, 0x28], // bad continuation
  [0xed, 0xa0, 0x80], // an encoded surrogate
  [0xe2, 0x82], // truncated sequence
  [0xf4, 0x90, 0x80, 0x80], // above U+10FFFF
  [0xf8, 0x88, 0x80, 0x80, 0x80]
]

const corpus = (seed: number) => {
  const random = seeded(seed)
  const int = (n: number) => Math.floor(random() * n)
  const pick = <A>(list: ReadonlyArray<A>): A => list[int(list.length)]!
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => int(256)))
  const text = () => pick(["plain", "ünïcödé", "😀 emoji", "", "tab\tnew\nline", "\u0000nul", "中文"])
  const validValue = () => Buffer.from(JSON.stringify({ n: int(1000), tag: text() }))
  const key = (): Buffer | null => (random() < 0.05 ? null : Buffer.from(`k${int(64)}`))
  const headers = (): IHeaders | undefined => {
    if (random() < 0.6) return undefined
    const result: IHeaders = {}
    const count = 1 + int(4)
    for (let i = 0; i < count; i++) {
      const value = () => pick([bytes(int(40)), Buffer.alloc(0), Buffer.from(text()), Buffer.from(invalidUtf8[int(invalidUtf8.length)]!)])
      const name = pick(["h-bin", "h-text", "trace", "ключ", "h-rep", "skein.error"])
      result[name] = random() < 0.3 ? [value(), value(), value()] : value()
    }
    return result
  }
  // A few sizes around the dead letter topic's limit, then random ones.
  const hugeSizes = [DLQ_LIMIT - 400, DLQ_LIMIT - 100, DLQ_LIMIT, DLQ_LIMIT + 1000, 3 * DLQ_LIMIT]
  const messages: Array<Message & { readonly kind: Kind }> = []
  for (let i = 0; i < RECORDS; i++) {
    const roll = random()
    const kind: Kind = roll < 0.45 ? "valid" :
      roll < 0.53 ? "schema" :
      roll < 0.61 ? "invalidJson" :
      roll < 0.65 ? "deep" :
      roll < 0.66 ? "huge" :
      roll < 0.69 ? "empty" :
      roll < 0.72 ? "null" :
      roll < 0.84 ? "badUtf8Value" :
      roll < 0.99 ? "badUtf8Key" :
      "bom"
    let k = key()
    let value: Buffer | null
    switch (kind) {
      case "valid":
        value = validValue()
        break
      case "schema":
        value = Buffer.from(pick(['{"n":"x","tag":"t"}', '{"tag":1}', "[]", "42", "null", '"text"', '{"n":1}']))
        break
      case "invalidJson":
        value = Buffer.from(pick(["{not json", '{"n":1,', "}", "[1,2", "undefined", "{'n':1}", validValue().toString().slice(0, 5)]))
        break
      case "deep": {
        const depth = 1000 + int(30_000)
        value = Buffer.from(
          random() < 0.5 ? "[".repeat(depth) + "]".repeat(random() < 0.5 ? depth : 0) : '{"a":'.repeat(depth) + "1" + "}".repeat(depth)
        )
        break
      }
      case "huge": {
        const size = hugeSizes.shift() ?? DLQ_LIMIT / 2 + int(4 * DLQ_LIMIT)
        value = random() < 0.5 ? bytes(size) : Buffer.from("x".repeat(size))
        break
      }
      case "empty":
        value = Buffer.alloc(0)
        break
      case "null":
        value = null
        break
      case "badUtf8Value": {
        const json = JSON.stringify({ n: int(1000), tag: "@" })
        const at = json.indexOf("@")
        value = Buffer.concat([Buffer.from(json.slice(0, at)), Buffer.from(pick(invalidUtf8)), Buffer.from(json.slice(at + 1))])
        break
      }
      case "badUtf8Key":
        k = Buffer.concat([Buffer.from("k"), Buffer.from(pick(invalidUtf8))])
        value = validValue()
        break
      case "bom":
        value = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), validValue()])
        break
    }
    const h = headers()
    messages.push({ kind, key: k, value, partition: i % PARTITIONS, ...(h === undefined ? {} : { headers: h }) })
  }
  return messages
}

const same = (a: Buffer | string | null | undefined, b: Buffer | string | null | undefined): boolean =>
  a === null || a === undefined || b === null || b === undefined ? (a ?? null) === (b ?? null) : Buffer.from(a).equals(Buffer.from(b))

const values = (value: IHeaders[string]): ReadonlyArray<Buffer | string> =>
  value === undefined ? [] : Array.isArray(value) ? value : [value]

describe("a fuzz corpus of poison records", () => {
  it.scopedLive("every record ends in the output or the dead letter topic exactly once, byte for byte", () =>
    Effect.gen(function*() {
      const seed = Number(process.env["SKEIN_FUZZ_SEED"] ?? 20261201)
      const input = unique("fuzz-in")
      const output = unique("fuzz-out")
      const dlq = unique("fuzz-dlq")
      yield* createTopics([
        { name: input, partitions: PARTITIONS, config: { "max.message.bytes": String(16 * 1024 * 1024) } },
        { name: output, partitions: PARTITIONS },
        { name: dlq, partitions: 1, config: { "max.message.bytes": String(DLQ_LIMIT) } }
      ])
      const In = Topic.make({ name: input, key: Schema.String, value: Topic.json(Schema.Struct({ n: Schema.Number, tag: Schema.String })) })
      const Out = Topic.make({
        name: output,
        key: Schema.String,
        value: Topic.json(Schema.Struct({ source: Schema.String, count: Schema.Number, n: Schema.Number }))
      })
      const transformer = Transformer.make({
        name: "fuzz",
        inputs: [In],
        state: Schema.Struct({ count: Schema.Number }),
        transform: (record, state) =>
          Effect.sync(() => {
            const count = Option.match(state, { onNone: () => 1, onSome: (s) => s.count + 1 })
            return {
              emit: [Topic.record(Out, record.key, { source: `${record.partition}/${record.offset}`, count, n: record.value.n })],
              state: Transformer.set({ count })
            }
          })
      })
      const messages = corpus(seed)
      const kinds = new Map<Kind, number>()
      for (const message of messages) kinds.set(message.kind, (kinds.get(message.kind) ?? 0) + 1)
      for (const [kind, count] of kinds) assert.isAtLeast(count, 20, `records of kind ${kind}`)
      assert.strictEqual(kinds.size, 10, "every kind of record")
      assert.isAtLeast(messages.filter((m) => m.headers !== undefined).length, 2000, "records with headers")
      yield* produceRaw(input, messages.map(({ kind: _, ...message }) => message), 250)

      const applicationId = unique("fuzz-app")
      const instance = yield* startInstance(transformer, { applicationId, deadLetterTopic: dlq })
      // Fails at once if the run ends (a poison record must never end it).
      const ended = Effect.flatMap(
        Fiber.await(instance.fiber),
        (exit) => Effect.fail(new Error(`the run ended: ${Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "done"}`))
      )
      yield* Effect.raceFirst(caughtUp(applicationId, input, 90_000), ended)
      assert.isTrue(Option.isNone(yield* instance.exit), "the run never ended")

      // Where each sent message landed: partition i % PARTITIONS, offsets in send order.
      const sent = new Map<string, (typeof messages)[number]>()
      const next = new Map<number, number>()
      for (const message of messages) {
        const partition = message.partition ?? 0
        const offset = next.get(partition) ?? 0
        next.set(partition, offset + 1)
        sent.set(`${partition}/${offset}`, message)
      }
      const inputs = yield* readCommitted(input)
      assert.strictEqual(inputs.length, RECORDS)
      for (const record of inputs) {
        const message = sent.get(`${record.partition}/${record.offset}`)
        assert.ok(message !== undefined && same(message.value, record.raw.value), `input ${record.partition}/${record.offset}`)
      }

      const landed = new Map<string, "output" | "dlq">()
      const land = (source: string, where: "output" | "dlq") => {
        assert.isUndefined(landed.get(source), `${source} landed twice (${landed.get(source)} and ${where})`)
        landed.set(source, where)
      }
      for (const record of yield* readCommitted(output)) land(JSON.parse(record.value ?? "").source, "output")
      const dead = yield* readCommitted(dlq)
      let truncated = 0
      for (const record of dead) {
        const source = `${record.headers["skein.source.partition"]}/${record.headers["skein.source.offset"]}`
        land(source, "dlq")
        const message = sent.get(source)
        assert.ok(message !== undefined, source)
        assert.ok(same(record.raw.key, message.key), `key of ${source}`)
        const cut = record.raw.headers["skein.dead_letter.truncated"]
        if (cut === undefined) {
          assert.ok(same(record.raw.value, message.value), `value of ${source} (${message.kind})`)
        } else {
          truncated++
          assert.strictEqual(String(cut), String(message.value?.length), `truncated header of ${source}`)
          const copy = record.raw.value ?? Buffer.alloc(0)
          assert.ok(message.value !== null && copy.length < message.value.length, `a cut value of ${source}`)
          assert.ok(same(copy, Buffer.from(message.value).subarray(0, copy.length)), `the cut value of ${source} is a prefix`)
        }
        for (const [name, original] of Object.entries(message.headers ?? {})) {
          const copied = values(record.raw.headers[name])
          const expected = values(original)
          assert.ok(
            copied.length >= expected.length && expected.every((v, i) => same(v, copied[i])),
            `header ${name} of ${source}`
          )
        }
        assert.isAtMost(String(record.raw.headers["skein.error.part"] === undefined ? "" : record.headers["skein.error"]).length, 4096)
      }
      for (const [source, message] of sent) {
        const where = landed.get(source)
        assert.strictEqual(where, message.kind === "valid" ? "output" : "dlq", `${source} (${message.kind})`)
      }
      assert.isAbove(truncated, 0, "some dead letters were cut to the topic's limit")
      assert.strictEqual(instance.stats.deadLettered, dead.length)
    }), { timeout: 180_000 })
})
