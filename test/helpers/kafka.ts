/**
 * Test helpers that talk to the real broker with kafkajs directly, so that
 * what a test checks does not go through the runtime's own code paths.
 */
import { Effect, Exit, Fiber, Layer, Option, Schedule } from "effect"
import type { Scope } from "effect"
import kafkajs from "kafkajs"
import type { Admin, IHeaders, Kafka, Message } from "kafkajs"
import { randomUUID } from "node:crypto"
import { inject } from "vitest"
import { Runner, SkeinConfig } from "../../src/index.ts"
import type { SkeinError, Topic, Transformer } from "../../src/index.ts"

declare module "vitest" {
  export interface ProvidedContext {
    kafkaBrokers: string
  }
}

export const brokers = (): ReadonlyArray<string> =>
  (process.env["KAFKA_BROKERS"] ?? inject("kafkaBrokers")).split(",")

export const kafka = (): Kafka =>
  new kafkajs.Kafka({ clientId: "skein-test", brokers: [...brokers()], logLevel: kafkajs.logLevel.NOTHING })

/**
 * Runs a kafkajs call, retrying transient broker answers (a coordinator still
 * loading or moving on a freshly started broker) for up to ~15 s.
 */
const retrying = <A>(f: () => Promise<A>): Effect.Effect<A> =>
  Effect.tryPromise(f).pipe(
    Effect.retry(Schedule.intersect(Schedule.spaced("500 millis"), Schedule.recurs(30))),
    Effect.orDie
  )

/** Runs `f` with a connected admin client (retrying transient answers), then disconnects it. */
const withAdmin = <A>(f: (admin: Admin) => Promise<A>): Effect.Effect<A> =>
  retrying(async () => {
    const admin = kafka().admin()
    await admin.connect()
    try {
      return await f(admin)
    } finally {
      await admin.disconnect()
    }
  })

export const unique = (prefix: string): string => `${prefix}-${randomUUID().slice(0, 8)}`

export const createTopics = (
  topics: ReadonlyArray<{
    readonly name: string
    readonly partitions: number
    /** Topic-level configs, e.g. `{ "cleanup.policy": "compact" }`. */
    readonly config?: Readonly<Record<string, string>>
  }>
) =>
  withAdmin(async (admin) => {
    await admin.createTopics({
      waitForLeaders: true,
      topics: topics.map((t) => ({
        topic: t.name,
        numPartitions: t.partitions,
        configEntries: Object.entries(t.config ?? {}).map(([name, value]) => ({ name, value }))
      }))
    })
  })

/** Changes topic-level configs of an existing topic. */
export const alterTopicConfig = (topic: string, config: Readonly<Record<string, string>>) =>
  withAdmin(async (admin) => {
    await admin.alterConfigs({
      validateOnly: false,
      resources: [{
        type: kafkajs.ConfigResourceTypes.TOPIC,
        name: topic,
        configEntries: Object.entries(config).map(([name, value]) => ({ name, value }))
      }]
    })
  })

/** Commits offsets for a group that has no active member (the next offset to read per partition). */
export const setGroupOffsets = (
  groupId: string,
  topic: string,
  partitions: ReadonlyArray<{ readonly partition: number; readonly offset: number }>
) =>
  withAdmin(async (admin) => {
    await admin.setOffsets({
      groupId,
      topic,
      partitions: partitions.map((p) => ({ partition: p.partition, offset: String(p.offset) }))
    })
  })

/** Deletes the records of each partition before `offset` (raises its low watermark), as retention would. */
export const deleteRecordsBefore = (
  topic: string,
  partitions: ReadonlyArray<{ readonly partition: number; readonly offset: number }>
) =>
  withAdmin(async (admin) => {
    // kafkajs finds the partitions' leaders in its metadata cache only.
    await admin.fetchTopicMetadata({ topics: [topic] })
    await admin.deleteTopicRecords({
      topic,
      partitions: partitions.map((p) => ({ partition: p.partition, offset: String(p.offset) }))
    })
  })

export interface Produced {
  readonly key: string | null
  readonly value: string
  readonly partition?: number
}

/** Produces records (idempotent, non-transactional). */
export const produce = (topic: string, records: ReadonlyArray<Produced>) =>
  Effect.promise(async () => {
    const producer = kafka().producer({ idempotent: true, maxInFlightRequests: 1 })
    await producer.connect()
    try {
      await producer.send({
        topic,
        acks: -1,
        messages: records.map((r) => ({
          key: r.key,
          value: r.value,
          ...(r.partition === undefined ? {} : { partition: r.partition })
        }))
      })
    } finally {
      await producer.disconnect()
    }
  })

/** Produces raw kafkajs messages (Buffers, repeated and binary headers), in sends of `chunk` messages. */
export const produceRaw = (topic: string, messages: ReadonlyArray<Message>, chunk = 1000) =>
  Effect.promise(async () => {
    const producer = kafka().producer({ idempotent: true, maxInFlightRequests: 1 })
    await producer.connect()
    try {
      for (let i = 0; i < messages.length; i += chunk) {
        await producer.send({ topic, acks: -1, messages: messages.slice(i, i + chunk) })
      }
    } finally {
      await producer.disconnect()
    }
  })

export interface ReadRecord {
  readonly partition: number
  readonly offset: number
  readonly key: string | null
  readonly value: string | null
  readonly headers: Readonly<Record<string, string>>
  /** The record's timestamp (milliseconds since the epoch). */
  readonly timestamp: number
  /** The record as fetched: key and value bytes, headers as kafkajs decodes them (repeated names: arrays). */
  readonly raw: { readonly key: Buffer | null; readonly value: Buffer | null; readonly headers: IHeaders }
}

/** End offsets (high watermarks) and last stable offsets of each partition. */
export const offsets = (topic: string) =>
  withAdmin(async (admin) => {
    const committed = await admin.fetchTopicOffsets(topic)
    return committed.map((o) => ({ partition: o.partition, low: Number(o.low), lastStable: Number(o.high) }))
  })

/** Committed offsets of a group for a topic. */
export const groupOffsets = (groupId: string, topic: string) =>
  withAdmin(async (admin) => {
    const [entry] = await admin.fetchOffsets({ groupId, topics: [topic] })
    return new Map((entry?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]))
  })

/**
 * Reads a topic read_committed from the beginning up to the last stable
 * offset of every partition (so it waits for nothing that is still open).
 */
export const readCommitted = (topic: string) =>
  Effect.gen(function*() {
    const ends = yield* offsets(topic)
    const targets = new Map(ends.map((e) => [e.partition, e.lastStable]))
    return yield* Effect.promise(async () => {
      const records: Array<ReadRecord> = []
      const positions = new Map(ends.map((e) => [e.partition, e.low]))
      const done = () => [...targets].every(([p, end]) => (positions.get(p) ?? 0) >= end)
      if (done()) return records
      const consumer = kafka().consumer({ groupId: unique("reader"), readUncommitted: false, maxWaitTimeInMs: 200 })
      await consumer.connect()
      await consumer.subscribe({ topic, fromBeginning: true })
      let resolve: () => void = () => undefined
      const finished = new Promise<void>((r) => {
        resolve = r
      })
      consumer.on(consumer.events.END_BATCH_PROCESS, (event) => {
        const p = event.payload.partition
        positions.set(p, Math.max(positions.get(p) ?? 0, Number(event.payload.lastOffset) + 1))
        if (done()) resolve()
      })
      await consumer.run({
        eachBatch: async ({ batch }) => {
          for (const m of batch.messages) {
            const end = targets.get(batch.partition) ?? 0
            if (Number(m.offset) < end) {
              records.push({
                partition: batch.partition,
                offset: Number(m.offset),
                key: m.key?.toString("utf8") ?? null,
                value: m.value?.toString("utf8") ?? null,
                headers: Object.fromEntries(Object.entries(m.headers ?? {}).map(([k, v]) => [k, String(v)])),
                timestamp: Number(m.timestamp),
                raw: { key: m.key, value: m.value, headers: m.headers ?? {} }
              })
            }
          }
        }
      })
      await Promise.race([finished, new Promise((r) => setTimeout(r, 60_000))])
      await consumer.disconnect()
      if (!done()) throw new Error(`readCommitted(${topic}) timed out at ${JSON.stringify([...positions])}`)
      return records
    })
  })

/** Polls `check` until it returns true. */
export const eventually = <E, R>(
  check: Effect.Effect<boolean, E, R>,
  options: { readonly timeout?: number; readonly what?: string } = {}
): Effect.Effect<void, E | Error, R> =>
  Effect.gen(function*() {
    const deadline = Date.now() + (options.timeout ?? 60_000)
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.fail(new Error(`timed out waiting for ${options.what ?? "condition"}`))
      yield* Effect.sleep("200 millis")
    }
  })

/** Waits until the group committed every input record (offsets == end offsets). */
export const caughtUp = (groupId: string, topic: string, timeout = 60_000) =>
  eventually(
    Effect.gen(function*() {
      const ends = yield* offsets(topic)
      const committed = yield* groupOffsets(groupId, topic)
      return ends.every((e) => (committed.get(e.partition) ?? -1) >= e.lastStable)
    }),
    { timeout, what: `group ${groupId} to commit up to the end of ${topic}` }
  )

export interface RunningInstance<E> {
  readonly stats: Runner.Stats
  readonly fiber: Fiber.RuntimeFiber<never, E>
  readonly stop: Effect.Effect<void>
  readonly exit: Effect.Effect<Option.Option<Exit.Exit<never, E>>>
}

/**
 * Starts a runner instance in this process; `layer` is provided to it besides
 * its config (e.g. `Layer.setTracer(tracer)`).
 */
export const startInstance = <Inputs extends ReadonlyArray<Topic.Any>, S, E>(
  transformer: Transformer.Transformer<Inputs, S, E, never>,
  options: Omit<SkeinConfig.Options, "brokers">,
  layer: Layer.Layer<never> = Layer.empty
): Effect.Effect<RunningInstance<E | SkeinError.RunnerError>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const stats = Runner.makeStats()
    const fiber = yield* Effect.forkDaemon(
      Runner.runWithStats(transformer, stats).pipe(
        Effect.provide(Layer.merge(Layer.succeed(SkeinConfig.SkeinConfig, SkeinConfig.make({ brokers: brokers(), ...options })), layer))
      )
    )
    yield* Effect.addFinalizer(() => Fiber.interrupt(fiber))
    return { stats, fiber, stop: Effect.asVoid(Fiber.interrupt(fiber)), exit: Fiber.poll(fiber) }
  })

export const sleep = (ms: number) => Effect.sleep(`${ms} millis`)

/** The topics of the cluster. */
export const listTopics = withAdmin((admin) => admin.listTopics())

/** A consumer group's state (e.g. "Stable", "PreparingRebalance", "Empty") and members, as its coordinator sees them now. */
export const describeGroup = (groupId: string) =>
  withAdmin(async (admin) => {
    const { groups: [group] } = await admin.describeGroups([groupId])
    return { state: group?.state ?? "Dead", members: (group?.members ?? []).map((m) => m.memberId) }
  })

/** The consumer groups of the cluster whose id starts with `prefix`. */
export const groupsWithPrefix = (prefix: string) =>
  withAdmin(async (admin) => (await admin.listGroups()).groups.map((g) => g.groupId).filter((id) => id.startsWith(prefix)))

/** The members of a consumer group, as the group coordinator sees them now. */
export const groupMembers = (groupId: string) => Effect.map(describeGroup(groupId), (group) => group.members)
