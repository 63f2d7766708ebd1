/**
 * The driver: a continuous keyed stream into the input topic at a controlled
 * rate. Keys are `k00000`..`k19999` (uniformly random, seeded); every value
 * carries a unique `id` (0, 1, 2, ...), the key's sequence number `seq`
 * (1-based) and a number `v` in [-1000, 1000] to aggregate (with `poison`, a few
 * records carry `"poison"` instead: they do not decode). Key `kN` always
 * goes to partition `N % partitions`. With `eventTime`, each record's timestamp
 * is `eventTime(id)` (the windowed app's event time), else the producer's clock.
 *
 * The input topic itself is the record of truth: the verifier reads it back.
 * The driver's idempotent producer (acks=all) rides out broker restarts; if a
 * send still fails it is retried, which may write a record twice, and the
 * verifier counts the input as it is.
 *
 * Every send holds one partition's records only: kafkajs 2.2.4 loses or
 * duplicates records of a send spanning several brokers when one broker's
 * request fails (see FINDINGS.md), and the driver must be trustworthy.
 *
 *   tsx test/chaos/driver.ts --brokers host:port --topic T --records N [--rate R] [--keys K] [--seed S]
 */
import { Duration, Effect, Ref, Schedule } from "effect"
import type { Scope } from "effect"
import kafkajs from "kafkajs"
import type { Message, Producer } from "kafkajs"
import { seeded } from "../helpers/seeded.ts"

export interface DriverOptions {
  readonly brokers: ReadonlyArray<string>
  readonly topic: string
  readonly partitions: number
  readonly records: number
  /** Records per second. */
  readonly rate: number
  readonly keys?: number
  readonly seed?: number
  /** The timestamp of record `id` (ms since the epoch); the producer's clock when absent. */
  readonly eventTime?: (id: number) => number
  /**
   * The ids written as poison records: valid JSON with the record's `id` and `seq`, but a `v`
   * that is not a number (`"poison"`), so an app decoding `InputValue` dead-letters them. None
   * when absent.
   */
  readonly poison?: (id: number) => boolean
}

export interface DriverProgress {
  /** Records acknowledged by the broker. */
  readonly acked: number
  /** Send attempts that failed and were retried. */
  readonly retries: number
}

/** Deterministic PRNG (mulberry32): the harness's faults and drivers follow `--seed` with it. */
export const prng = seeded

export const keyName = (index: number): string => `k${String(index).padStart(5, "0")}`

/** How often a driver looks whether records are due (ms). */
export const TICK_MS = 50
/** The most records a driver writes in one round of sends. */
export const MAX_SEND = 1000

/**
 * An idempotent producer of `kafka`, released with the scope. A freshly started cluster may
 * answer InitProducerId with COORDINATOR_LOAD_IN_PROGRESS for longer than kafkajs retries it (15
 * instances starting at once on a 3-node cluster): connect again, for up to a minute.
 */
export const connectProducer = (kafka: kafkajs.Kafka): Effect.Effect<Producer, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise(async () => {
      const p = kafka.producer({ idempotent: true, maxInFlightRequests: 1, retry: { retries: Number.MAX_SAFE_INTEGER, maxRetryTime: 2000 } })
      try {
        await p.connect()
      } catch (error) {
        await p.disconnect().catch(() => undefined)
        throw error
      }
      return p
    }).pipe(
      Effect.retry(Schedule.spaced(Duration.seconds(1)).pipe(Schedule.intersect(Schedule.recurs(60)))),
      Effect.orDie
    ),
    (p) => Effect.promise(() => p.disconnect().catch(() => undefined))
  )

/**
 * Writes `messages` to `topic` with one send per partition (kafkajs 2.2.4 loses or duplicates
 * records of a send spanning several brokers when one broker's request fails: FINDINGS.md #2),
 * concurrently; each send is retried a second after a failure until the broker takes it
 * (`onRetry` counts them), which may write its records twice.
 */
export const sendByPartition = (
  producer: Producer,
  topic: string,
  messages: ReadonlyArray<Message>,
  onRetry: Effect.Effect<void>
): Effect.Effect<void> => {
  const byPartition = new Map<number, Array<Message>>()
  for (const m of messages) {
    const p = m.partition ?? 0
    const list = byPartition.get(p)
    if (list === undefined) byPartition.set(p, [m])
    else list.push(m)
  }
  return Effect.forEach([...byPartition.values()], (batch) =>
    Effect.gen(function*() {
      for (;;) {
        const sent = yield* Effect.tryPromise(() => producer.send({ topic, acks: -1, messages: batch })).pipe(
          Effect.as(true),
          Effect.catchAll(() => Effect.succeed(false))
        )
        if (sent) return
        yield* onRetry
        yield* Effect.sleep(Duration.seconds(1))
      }
    }), { concurrency: "unbounded", discard: true })
}

/** Writes `records` records at `rate` per second; `progress` follows the acknowledged count. */
export const drive = (options: DriverOptions, progress: Ref.Ref<DriverProgress>): Effect.Effect<DriverProgress> =>
  Effect.gen(function*() {
    const keys = options.keys ?? 20_000
    const random = prng(options.seed ?? 42)
    const seqs = new Int32Array(keys)
    let next = 0
    const make = (): Message => {
      const keyIndex = Math.floor(random() * keys)
      const seq = ++seqs[keyIndex]
      const v = Math.floor(random() * 2001) - 1000
      const id = next++
      return {
        key: keyName(keyIndex),
        value: JSON.stringify({ id, seq, v: options.poison?.(id) === true ? "poison" : v }),
        partition: keyIndex % options.partitions,
        ...(options.eventTime === undefined ? {} : { timestamp: String(options.eventTime(id)) })
      }
    }
    const kafka = new kafkajs.Kafka({
      clientId: "skein-chaos-driver",
      brokers: [...options.brokers],
      logLevel: kafkajs.logLevel.NOTHING,
      retry: { initialRetryTime: 200, retries: 10 }
    })
    const producer = yield* connectProducer(kafka)
    const retried = Ref.update(progress, (p) => ({ ...p, retries: p.retries + 1 }))
    const started = Date.now()
    while (next < options.records) {
      const due = Math.min(options.records, Math.floor(((Date.now() - started) / 1000) * options.rate) + 1)
      if (due <= next) {
        yield* Effect.sleep(Duration.millis(TICK_MS))
        continue
      }
      const messages: Array<Message> = []
      while (next < due && messages.length < MAX_SEND) messages.push(make())
      yield* sendByPartition(producer, options.topic, messages, retried)
      yield* Ref.update(progress, (p) => ({ ...p, acked: p.acked + messages.length }))
    }
    return yield* Ref.get(progress)
  }).pipe(Effect.scoped)

const flag = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : undefined
}

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/\\/g, "/"))

if (isMain) {
  const brokers = (flag("brokers") ?? process.env["KAFKA_BROKERS"] ?? "").split(",").filter((b) => b !== "")
  const topic = flag("topic")
  if (brokers.length === 0 || topic === undefined) {
    process.stderr.write("usage: driver.ts --brokers host:port --topic T --records N [--rate R] [--keys K] [--seed S]\n")
    process.exit(2)
  }
  const program = Effect.gen(function*() {
    const admin = new kafkajs.Kafka({ brokers, logLevel: kafkajs.logLevel.NOTHING }).admin()
    const partitions = yield* Effect.promise(async () => {
      await admin.connect()
      const meta = await admin.fetchTopicMetadata({ topics: [topic] })
      await admin.disconnect()
      return meta.topics[0]?.partitions.length ?? 1
    })
    const progress = yield* Ref.make<DriverProgress>({ acked: 0, retries: 0 })
    const result = yield* drive({
      brokers,
      topic,
      partitions,
      records: Number(flag("records") ?? "10000"),
      rate: Number(flag("rate") ?? "1000"),
      ...(flag("keys") === undefined ? {} : { keys: Number(flag("keys")) }),
      ...(flag("seed") === undefined ? {} : { seed: Number(flag("seed")) })
    }, progress)
    process.stdout.write(`${JSON.stringify(result)}\n`)
  })
  Effect.runPromise(program).then(() => process.exit(0), (error: unknown) => {
    process.stderr.write(`${String(error)}\n`)
    process.exit(1)
  })
}
