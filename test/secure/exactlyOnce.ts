/**
 * The exactly-once cases a secured broker must pass, shared by the default
 * run's secured tests and the compatibility run's (test/compat/secure.test.ts,
 * Kafka 3.9.2): a stateless copy and a stateful count, each connected with
 * one mechanism, granted exactly the ACLs of docs/security.md, run until its group has
 * committed every input record, and read back read_committed to the output's
 * last stable offsets by the ordinary user: every record once, nothing more.
 */
import { assert } from "@effect/vitest"
import { Effect, Schema } from "effect"
import type { Scope } from "effect"
import kafkajs from "kafkajs"
import * as fs from "node:fs"
import { Topic, Transformer } from "../../src/index.ts"
import { KafkaBroker } from "../../src/testing/index.ts"
import { countOf } from "../helpers/counter.ts"
import type { LocalKafka } from "../../src/testing/index.ts"
import { adminKafka, applicationAcls, createAcls, createTopics, produce, startInstance, unique } from "./helpers.ts"

type Security = LocalKafka.SecurityInfo

/** How the application connects: a SASL mechanism as the ordinary user, or mutual TLS. */
export type Mechanism = "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512" | "mTLS"

export const copyOf = (input: string, output: string) => {
  const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
  const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
  return Transformer.stateless({
    name: "copy",
    inputs: [In],
    transform: (record) => Effect.succeed({ emit: [Topic.record(Out, record.key, record.value)] })
  })
}

/** `n` input records over two partitions, ten keys. */
export const records = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ key: `k${i % 10}`, value: `v${i}`, partition: i % 2 }))

const withAdmin = <A>(security: Security, f: (admin: kafkajs.Admin) => Promise<A>): Effect.Effect<A> =>
  Effect.promise(async () => {
    const admin = adminKafka(security).admin()
    await admin.connect()
    try {
      return await f(admin)
    } finally {
      await admin.disconnect()
    }
  })

/**
 * Waits until `groupId` has committed every record of `topic` (a generous
 * guard against a hang). A failed look-up (the group's coordinator still
 * loading, say) is asked again; the last one is in the timeout's message.
 */
const caughtUp = (security: Security, groupId: string, topic: string) =>
  withAdmin(security, async (admin) => {
    const deadline = Date.now() + 90_000
    let failure = "none"
    for (;;) {
      try {
        const ends = await admin.fetchTopicOffsets(topic)
        const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] })
        const at = new Map((committed?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]))
        if (ends.every((e) => (at.get(e.partition) ?? -1) >= Number(e.high))) return
      } catch (error) {
        failure = String(error)
      }
      if (Date.now() > deadline) {
        throw new Error(`group ${groupId} did not commit up to the end of ${topic} (last failed look-up: ${failure})`)
      }
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  })

/** Every record of `topic` up to each partition's last stable offset now, read read_committed by the ordinary user. */
const readToStable = (security: Security, topic: string) =>
  Effect.flatMap(
    withAdmin(security, (admin) => admin.fetchTopicOffsets(topic)),
    (ends) =>
      Effect.promise(async () => {
        const targets = new Map(ends.map((e) => [e.partition, Number(e.high)]))
        const positions = new Map(ends.map((e) => [e.partition, Number(e.low)]))
        const read: Array<{ key: string; value: string; partition: number; offset: number }> = []
        const done = () => [...targets].every(([p, end]) => (positions.get(p) ?? 0) >= end)
        if (done()) return read
        const consumer = new kafkajs.Kafka({
          clientId: "skein-secure-reader",
          brokers: [...security.saslSslBrokers],
          ssl: { ca: [fs.readFileSync(security.caFile, "utf8")] },
          sasl: { mechanism: "scram-sha-512", username: security.user.username, password: security.user.password },
          logLevel: kafkajs.logLevel.NOTHING
        }).consumer({ groupId: unique("reader"), readUncommitted: false, maxWaitTimeInMs: 200 })
        await consumer.connect()
        try {
          const finished = new Promise<void>((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error(`read ${read.length} records of ${topic}, not to its end`)), 60_000)
            consumer.on(consumer.events.END_BATCH_PROCESS, (event) => {
              const p = event.payload.partition
              positions.set(p, Math.max(positions.get(p) ?? 0, Number(event.payload.lastOffset) + 1))
              if (done()) {
                clearTimeout(timer)
                resolve()
              }
            })
          })
          await consumer.subscribe({ topic, fromBeginning: true })
          await consumer.run({
            eachBatch: async ({ batch }) => {
              for (const m of batch.messages) {
                if (Number(m.offset) < (targets.get(batch.partition) ?? 0)) {
                  read.push({
                    key: m.key?.toString() ?? "",
                    value: m.value?.toString() ?? "",
                    partition: batch.partition,
                    offset: Number(m.offset)
                  })
                }
              }
            }
          })
          await finished
        } finally {
          await consumer.disconnect()
        }
        return read
      })
  )

/**
 * Every committed record of `topic`, once at least `count` are visible: read
 * up to the last stable offsets, again until `count` records are there (a
 * commit's markers can reach the output a moment after its offsets). Called
 * once the writer's group has committed all its input, so no later
 * transaction can add to what is read.
 */
export const readToEnd = (security: Security, topic: string, count: number) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 60_000
    for (;;) {
      const read = yield* readToStable(security, topic)
      if (read.length >= count) return read
      if (Date.now() > deadline) return assert.fail(`${read.length} of at least ${count} records of ${topic} became visible`)
      yield* Effect.sleep("200 millis")
    }
  })

/**
 * While the scope is open, kafkajs logs at debug level (`SKEIN_KAFKAJS_LOG`,
 * read when a client is made) and the mechanism of each of its successful
 * SASL authentications ("SCRAM SHA256", "PLAIN", ...) is pushed to
 * `mechanisms`; its other lines are dropped. Only Skein's clients log: the
 * tests' own clients are made with `logLevel.NOTHING`.
 */
export const saslMechanismsUsed = (mechanisms: Array<string>): Effect.Effect<void, never, Scope.Scope> =>
  Effect.asVoid(Effect.acquireRelease(
    Effect.sync(() => {
      const previous = { level: process.env["SKEIN_KAFKAJS_LOG"], error: console.error }
      process.env["SKEIN_KAFKAJS_LOG"] = "debug"
      console.error = (...args: Array<unknown>) => {
        const text = args.map(String).join(" ")
        if (!text.startsWith("[kafkajs")) return previous.error(...args)
        const success = /SASL (.+?) authentication successful/.exec(text)
        if (success?.[1] !== undefined) mechanisms.push(success[1])
      }
      return previous
    }),
    (previous) =>
      Effect.sync(() => {
        console.error = previous.error
        if (previous.level === undefined) delete process.env["SKEIN_KAFKAJS_LOG"]
        else process.env["SKEIN_KAFKAJS_LOG"] = previous.level
      })
  ))

/**
 * Runs `kind` ("copy" or "count") of `n` records with the application
 * connected by `mechanism`, granted the ACLs of docs/security.md, and checks the output
 * read back: the copy's values each once, the count's `key=1..n` each once.
 */
export const exactlyOnce = (
  security: Security,
  options: { readonly kind: "copy" | "count"; readonly mechanism: Mechanism; readonly n: number }
) =>
  Effect.gen(function*() {
    const { kind, mechanism, n } = options
    const input = unique("sec-in")
    const output = unique("sec-out")
    const applicationId = unique(`sec-${kind}`)
    yield* createTopics(security, [{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
    const reader = `User:${security.user.username}`
    yield* createAcls(security, [
      ...applicationAcls({
        principal: mechanism === "mTLS" ? security.clientPrincipal : reader,
        applicationId,
        inputs: [input],
        outputs: [output]
      }),
      { principal: reader, resource: "topic", name: output, operation: "READ" },
      { principal: reader, resource: "group", name: "reader-", prefixed: true, operation: "READ" }
    ])
    yield* produce(security, input, records(n))
    const lines: Array<string> = []
    const config = { applicationId, ...KafkaBroker.connection(security, { mechanism }) }
    const instance = kind === "copy"
      ? yield* startInstance(copyOf(input, output), config, lines)
      : yield* startInstance(countOf(input, output), config, lines)
    yield* caughtUp(security, applicationId, input)
    const read = yield* readToEnd(security, output, n)
    const seen = read.map((r) => `${r.key}=${r.value}`).sort()
    const expected = kind === "copy"
      ? records(n).map((r) => `${r.key}=${r.value}`).sort()
      : Array.from({ length: 10 }, (_, k) =>
        Array.from({ length: Math.ceil((n - k) / 10) }, (_, c) => `k${k}=${c + 1}`)).flat().sort()
    assert.deepStrictEqual(seen, expected, `${kind} over ${mechanism}: every record exactly once`)
    assert.strictEqual(instance.stats.commits > 0, true, "the run committed")
    return { lines, observed: yield* instance.observed }
  })
