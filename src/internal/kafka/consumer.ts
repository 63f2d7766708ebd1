/**
 * The fetch bridge: turns kafkajs's push-style `eachBatch` into a queue of
 * events the runner's main loop pulls from.
 *
 * Every partition batch kafkajs hands over is offered to the queue and its
 * `eachBatch` call waits until the main loop completes it, heartbeating
 * meanwhile: at once once its records are buffered (kafkajs's fetcher waits
 * for every batch of a fetch, so a batch held while it is processed would
 * hold every partition of the broker), or dropped, or "rejoin". The runner
 * pauses a partition whose buffer is full, and a rebalance waits for the
 * tasks' transactions in the runner (the batch lock), not here: correctness
 * rests on fencing.
 *
 * @internal
 */
import { Deferred, Duration, Effect, FiberId, Queue } from "effect"
import type { Scope } from "effect"
import type { Consumer, EachBatchPayload } from "kafkajs"
import { KafkaError } from "../../SkeinError.ts"
import { strictTextOf } from "../codec/utf8.ts"
import type { TopicPartition } from "../../TopicPartition.ts"
import * as QueryRoutes from "../query/QueryRoutes.ts"
import * as Assignor from "./assignor.ts"
import { connectOrDisconnect } from "./client.ts"
import type { Kafka } from "./client.ts"
import { isRebalancing, toKafkaError, unreachableAfterRetries } from "./errors.ts"
import * as FetchSizes from "./fetchSizes.ts"
import * as PatchedKafkajs from "./patchedKafkajs.ts"


/**
 * Header values exactly as fetched: the bytes of each value, a list of them
 * for a name repeated in the record (in record order), `null` for a header
 * without a value.
 */
export type FetchedHeaders = Readonly<Record<string, Buffer | null | ReadonlyArray<Buffer | null>>>

/** A record as fetched, before decoding. */
export interface FetchedRecord {
  readonly topic: string
  readonly partition: number
  readonly offset: number
  readonly key: Buffer | null
  readonly value: Buffer | null
  /** The transform's view: the first value of each header as text, decoded leniently (never throws). */
  readonly headers: Readonly<Record<string, string>>
  /** The headers as fetched, for a dead letter to copy byte for byte. */
  readonly rawHeaders: FetchedHeaders
  readonly timestamp: number
  /**
   * The key as strict UTF-8 text (`null`: none, `undefined`: not UTF-8), read from the fetched
   * bytes without a view of them; unset: decode `key`.
   */
  readonly keyText?: () => string | null | undefined
  /** The value as `keyText` reads the key. */
  readonly valueText?: () => string | null | undefined
}

// Shared by the records without headers (most of them): one object fewer per record in flight.
const noHeaders: FetchedHeaders = Object.freeze({})
const noTextHeaders: Readonly<Record<string, string>> = Object.freeze({})

const headerBytes = (value: Buffer | string | null): Buffer | null =>
  typeof value === "string" ? Buffer.from(value, "utf8") : value

const headerText = (value: Buffer | string | null | undefined): string =>
  value === null || value === undefined ? "" : typeof value === "string" ? value : value.toString("utf8")

/**
 * How the main loop finished with a partition batch: `"Buffered"` (its
 * records are in the runner's buffer: kafkajs moves past them and fetches
 * on, the runner pauses a partition whose buffer is full), `"Committed"`,
 * `"Dropped"` (fetched again from kafkajs's position, or after a seek) or
 * `"Rejoin"` (kafkajs rejoins the group).
 */
export type BatchOutcome = "Buffered" | "Committed" | "Dropped" | "Rejoin"

/** The records kafkajs fetched for one partition. */
export interface PartitionBatch {
  readonly topic: string
  readonly partition: number
  readonly generation: number
  /** The offset kafkajs fetched from: where the batch starts (records may begin later, past gaps). */
  readonly fetchedOffset: number
  /** True when the partition was seeked after this batch was fetched. */
  readonly isStale: () => boolean
  readonly records: ReadonlyArray<FetchedRecord>
  /** The offset after this batch, past any filtered control records. */
  readonly nextOffset: number
  /** The partition's high watermark when fetched (for lag). */
  readonly highWatermark: number
  readonly complete: (outcome: BatchOutcome) => void
}

export type ConsumerEvent =
  | { readonly _tag: "Batch"; readonly batch: PartitionBatch }
  | {
    readonly _tag: "Assigned"
    readonly generation: number
    readonly partitions: ReadonlyArray<TopicPartition>
    /** The partitions this member keeps a standby copy of in this generation (empty: none). */
    readonly standbys: ReadonlyArray<number>
  }
  | { readonly _tag: "Rebalancing" }
  /**
   * kafkajs moved past records it does not hand over (only aborted
   * transactions' records or transaction markers): the partition's position
   * is now `nextOffset`.
   */
  | { readonly _tag: "Filtered"; readonly topic: string; readonly partition: number; readonly nextOffset: number }
  | { readonly _tag: "Crashed"; readonly error: KafkaError }

export interface GroupConsumer {
  readonly events: Queue.Dequeue<ConsumerEvent>
  readonly pause: (partitions: ReadonlyArray<TopicPartition>) => Effect.Effect<void>
  readonly resume: (partitions: ReadonlyArray<TopicPartition>) => Effect.Effect<void>
  readonly seek: (partition: TopicPartition, offset: number) => Effect.Effect<void>
  /** Completes every batch still waiting (as dropped), e.g. before leaving the group. */
  readonly dropInFlight: Effect.Effect<void>
  /**
   * The signal of the next rebalance: completes when the group starts
   * rebalancing (a revocation is coming). A new signal follows each assignment.
   */
  readonly nextRebalance: Effect.Effect<Deferred.Deferred<void>>
  /**
   * The runner tore its tasks down after a `Rebalancing` event: kafkajs, which
   * waits for this before it rejoins (its `beforeRejoin` hook), goes on.
   */
  readonly revoked: Effect.Effect<void>
  /**
   * kafkajs rejoins the group at its next fetch (a task migrated: this
   * member's assignment is stale), whether or not a batch is in flight;
   * every fetch asks again until the join.
   */
  readonly requestRejoin: Effect.Effect<void>
  /** The runner has stopped processing: kafkajs no longer waits for a revocation to rejoin. */
  readonly stopped: Effect.Effect<void>
  /**
   * The query routes of the latest generation this member joined (every
   * partition's owner's query endpoint, its standbys'), as the group leader
   * planned them; empty before the first join or when no member announces an
   * endpoint.
   */
  readonly routes: () => QueryRoutes.QueryRoutes
  /** Commits offsets for the group (at-least-once mode; exactly-once commits them in transactions). */
  readonly commitOffsets: (
    offsets: ReadonlyArray<{ readonly topic: string; readonly partition: number; readonly offset: number }>
  ) => Effect.Effect<void, KafkaError>
}

export interface Options {
  readonly groupId: string
  /**
   * kafkajs rejoins only once the runner says its tasks were revoked
   * (`revoked`), at most `rebalanceTimeout` later. Unset: it rejoins at once.
   */
  readonly awaitRevocation?: boolean | undefined
  readonly topics: ReadonlyArray<string>
  readonly sessionTimeout: Duration.Duration
  readonly rebalanceTimeout: Duration.Duration
  readonly heartbeatInterval: Duration.Duration
  readonly maxBytesPerPartition?: number
  /**
   * The most records the member processes at once (`maxPollRecords`): each
   * fetch is sized to bring a share of them whatever their size
   * (`fetchSizes.ts`). Unset: kafkajs's fixed sizes (`maxBytesPerPartition`).
   */
  readonly maxPollRecords?: number | undefined
  /**
   * What this member runs (a transformer's name), announced to the group: the
   * group's leader gives partitions only to the owner that joined first, and a
   * member of another owner fails with a `ConfigurationError` (as the cause
   * of a `KafkaError`). Unset: announces nothing and is accepted by any owner.
   */
  readonly owner?: string | undefined
  /**
   * The local stores to announce at each join (partition to the changelog
   * offset each reflects), read synchronously: the leader prefers members
   * with a warm copy. Unset: none.
   */
  readonly stores?: (() => ReadonlyMap<number, number>) | undefined
  /** Standbys per partition this member places when it leads the group (default 0). */
  readonly standbyReplicas?: number | undefined
  /**
   * This member's query endpoint (`host:port`) to announce at each join, read
   * synchronously: the leader sends every member each partition's owner's
   * endpoint (`routes`). Unset: none.
   */
  readonly endpoint?: (() => string | undefined) | undefined
}

const byTopic = (partitions: ReadonlyArray<TopicPartition>) => {
  const topics = new Map<string, Array<number>>()
  for (const tp of partitions) topics.set(tp.topic, [...(topics.get(tp.topic) ?? []), tp.partition])
  return [...topics].map(([topic, list]) => ({ topic, partitions: list }))
}

const toRecord = (
  topic: string,
  partition: number,
  message: EachBatchPayload["batch"]["messages"][number]
): FetchedRecord => {
  let headers: Record<string, string> | undefined
  let raw: Record<string, Buffer | null | ReadonlyArray<Buffer | null>> | undefined
  // kafkajs decodes a header value as bytes, or null for none (its types say `undefined`).
  const fetched = (message.headers ?? {}) as Record<string, Buffer | string | null | Array<Buffer | string | null> | undefined>
  for (const name in fetched) {
    const value = fetched[name]
    if (value === undefined) continue
    headers ??= {}
    raw ??= {}
    if (Array.isArray(value)) {
      headers[name] = headerText(value[0])
      raw[name] = value.map(headerBytes)
    } else {
      headers[name] = headerText(value)
      raw[name] = headerBytes(value)
    }
  }
  return new KafkaRecord(
    topic,
    partition,
    offsetOf(message),
    headers ?? noTextHeaders,
    raw ?? noHeaders,
    Number(message.timestamp),
    spansOf(message)
  )
}

/**
 * A fetched message's offset as a number: the patched record decoder keeps it as one
 * (`offsetNumber`), where kafkajs's field is a string to print and parse back.
 */
export const offsetOf = (message: { readonly offset: string }): number =>
  "offsetNumber" in message && typeof message.offsetNumber === "number" ? message.offsetNumber : Number(message.offset)

/** The message kafkajs fetched: its key and value as Buffers. */
type KafkaMessage = EachBatchPayload["batch"]["messages"][number]

/** Where a fetched message's key and value lie in its batch's buffer (-1: none), as the patched record decoder tells. */
interface Spans {
  readonly batchBuffer: Buffer
  readonly keyStart: number
  readonly keyLength: number
  readonly valueStart: number
  readonly valueLength: number
}

const hasSpans = (message: KafkaMessage): message is KafkaMessage & Spans =>
  "batchBuffer" in message && Buffer.isBuffer(message.batchBuffer) &&
  "keyStart" in message && typeof message.keyStart === "number" &&
  "keyLength" in message && typeof message.keyLength === "number" &&
  "valueStart" in message && typeof message.valueStart === "number" &&
  "valueLength" in message && typeof message.valueLength === "number"

const noBytes = Buffer.alloc(0)

/**
 * A message's spans: as the patched record decoder tells them, else (a message kafkajs's own
 * decoder made) its key and value copied into one buffer.
 */
const spansOf = (message: KafkaMessage): Spans => {
  if (hasSpans(message)) return message
  const { key, value } = message
  return {
    batchBuffer: Buffer.concat([key ?? noBytes, value ?? noBytes]),
    keyStart: 0,
    keyLength: key === null ? -1 : key.length,
    valueStart: key?.length ?? 0,
    valueLength: value === null ? -1 : value.length
  }
}

/**
 * A fetched record that keeps where its key and value lie in its batch's buffer, not kafkajs's
 * message nor a Buffer view of each: a record held until it is processed is one object (every one
 * held is copied by the young generation's collections, then promoted), and the message dies as
 * soon as its batch is buffered. Each read of `key` or `value` returns a new view of the same
 * bytes; `keyText` and `valueText` decode them without one.
 */
class KafkaRecord implements FetchedRecord {
  readonly #buffer: Buffer
  readonly #keyStart: number
  readonly #keyLength: number
  readonly #valueStart: number
  readonly #valueLength: number
  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly offset: number,
    readonly headers: Readonly<Record<string, string>>,
    readonly rawHeaders: FetchedHeaders,
    readonly timestamp: number,
    spans: Spans
  ) {
    this.#buffer = spans.batchBuffer
    this.#keyStart = spans.keyStart
    this.#keyLength = spans.keyLength
    this.#valueStart = spans.valueStart
    this.#valueLength = spans.valueLength
  }
  get key(): Buffer | null {
    return this.#keyLength === -1 ? null : this.#buffer.subarray(this.#keyStart, this.#keyStart + this.#keyLength)
  }
  get value(): Buffer | null {
    return this.#valueLength === -1 ? null : this.#buffer.subarray(this.#valueStart, this.#valueStart + this.#valueLength)
  }
  keyText(): string | null | undefined {
    return this.#keyLength === -1 ? null : strictTextOf(this.#buffer, this.#keyStart, this.#keyStart + this.#keyLength)
  }
  valueText(): string | null | undefined {
    return this.#valueLength === -1 ? null : strictTextOf(this.#buffer, this.#valueStart, this.#valueStart + this.#valueLength)
  }
}

/**
 * A batch's records as Skein's. Made here, not in a closure of `eachBatch`: a closure there that
 * used the batch would share its scope with `finish`, which the buffer keeps with the records
 * until they are processed, and keep kafkajs's whole batch (its arrays of every message) alive
 * until the last of its records is processed.
 */
const recordsOf = (batch: EachBatchPayload["batch"]): ReadonlyArray<FetchedRecord> => {
  const { partition, topic } = batch
  return batch.messages.map((message) => toRecord(topic, partition, message))
}

/**
 * Lets kafkajs's batch go of its messages once Skein's records are made from them (Skein's patch
 * of `consumer/batch.js`, a method its type declarations omit): they die young, instead of being
 * held until every batch of their fetch is buffered.
 */
const releaseMessages = (batch: EachBatchPayload["batch"]): void => {
  const release: unknown = Reflect.get(batch, "releaseMessages")
  if (typeof release === "function") Reflect.apply(release, batch, [])
}

/** Where kafkajs fetched the batch from (a field its type declarations omit). */
const fetchedOffsetOf = (batch: EachBatchPayload["batch"]): number => {
  const value: unknown = Reflect.get(batch, "fetchedOffset")
  return typeof value === "string" || typeof value === "number" ? Number(value) : Number(batch.firstOffset() ?? batch.lastOffset())
}

const rejoinError = ({ KafkaJSProtocolError }: PatchedKafkajs.KafkaJS) =>
  new KafkaJSProtocolError(
    Object.assign(new Error("Skein requested a rejoin (a task migrated, or a rebalance was signalled)"), {
      type: "REBALANCE_IN_PROGRESS",
      code: 27,
      retriable: false
    })
  )

/**
 * kafkajs restarts a crashed consumer (a rejoin) only for retriable answers,
 * such as a group coordinator still loading on a busy broker; anything else
 * crashes the run as a typed KafkaError. A rejoin tears every task down, and
 * fencing keeps it safe.
 */
const restartIfRetriable = async (error: Error): Promise<boolean> =>
  "retriable" in error && error.retriable === true

/**
 * Retries of Skein's consumers: generous for transient answers (a group
 * coordinator loading or moving); a crash after that is reported as a typed
 * KafkaError unless it is retriable.
 */
export const consumerRetry = {
  initialRetryTime: 300,
  maxRetryTime: 5000,
  retries: 12,
  restartOnFailure: restartIfRetriable
}

/**
 * The longest the consumer's retries back off in all before it gives up
 * (about 49 s: kafkajs waits up to 20% more than twice its last wait, capped
 * at `maxRetryTime`). A broker that crashes does not use it up: its
 * partitions' leaders and the group's coordinator move to the other brokers,
 * which the consumer follows (Skein's kafkajs patch looks a lost coordinator
 * up again). Brokers unreachable for longer end the run with a `KafkaError`
 * caused by `ClusterUnreachable`.
 */
export const consumerRetryBudget: Duration.Duration = Duration.millis(
  Array.from({ length: consumerRetry.retries }).reduce<{ readonly wait: number; readonly total: number }>(
    ({ total, wait }) => ({ wait: Math.min(wait * 2.4, consumerRetry.maxRetryTime), total: total + wait }),
    { wait: consumerRetry.initialRetryTime * 1.2, total: 0 }
  ).total
)

const sleep = (ms: number) => new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms))

/** Joins the group and starts fetching; leaves the group when the scope closes. */
export const make = (kafka: Kafka, options: Options): Effect.Effect<GroupConsumer, KafkaError, Scope.Scope> =>
  Effect.gen(function*() {
    const kafkajs = yield* PatchedKafkajs.ofExistingClient
    const events = yield* Queue.unbounded<ConsumerEvent>()
    const access = { topics: options.topics, topicOperation: "READ", group: options.groupId, groupOperation: "READ" } as const
    const inFlight = new Set<(outcome: BatchOutcome) => void>()
    let generation = 0
    const heartbeatMs = Duration.toMillis(options.heartbeatInterval)
    let rebalance = Deferred.unsafeMake<void>(FiberId.none)
    /** True once this generation's rebalance was signalled (the deferred, the `Rebalancing` event). */
    let rebalanceSignalled = false
    const rebalancing = () => {
      rebalanceSignalled = true
      Deferred.unsafeDone(rebalance, Effect.void)
    }
    /**
     * Before kafkajs rejoins, the runner's tasks commit what finished (within
     * `revocationGrace`) and are torn down: kafkajs's `beforeRejoin` hook
     * (Skein's patch of its runner) waits for `revoked`, at most
     * `rebalanceTimeout` (past it the group has moved on without this member).
     */
    let revokedSinceJoin = false
    /**
     * Set by `requestRejoin`, and when this bridge signals a rebalance itself (a heartbeat
     * from `eachBatch`): kafkajs's fetches throw a rebalance (Skein's patch of its runner)
     * until its next join. Until then, not once: kafkajs's fetch manager drops a fetcher's
     * error when another fetcher sees the brokers change first (it restarts its fetchers),
     * and a member whose tasks were torn down would keep its partitions with none running.
     */
    let rejoinPending = false
    const rejoinRequested = (): unknown => rejoinPending ? rejoinError(kafkajs) : undefined
    let revokeWaiters: Array<() => void> = []
    /** Set once the runner stopped processing: no batch is in flight, so nothing to wait for. */
    let processingStopped = false
    const releaseWaiters = () => {
      for (const resolve of revokeWaiters) resolve()
      revokeWaiters = []
    }
    const beforeRejoin = async (): Promise<void> => {
      if (revokedSinceJoin || processingStopped) return
      // A rejoin kafkajs starts without a REBALANCING event (an unknown member) still revokes.
      if (!rebalanceSignalled) {
        rebalancing()
        Queue.unsafeOffer(events, { _tag: "Rebalancing" })
      }
      await Promise.race([
        new Promise<void>((resolve) => {
          revokeWaiters.push(resolve)
        }),
        sleep(Duration.toMillis(options.rebalanceTimeout))
      ])
    }

    /**
     * The standby partitions of the join in progress: cleared when kafkajs
     * asks for this member's subscription (each join), set by the standby
     * marker that arrives during the group sync, delivered with the
     * assignment (`GROUP_JOIN` follows the sync).
     */
    let standbys: ReadonlyArray<number> = []
    /** The query routes of the join in progress (its routes marker), and those of the last join. */
    let joiningRoutes: QueryRoutes.QueryRoutes = QueryRoutes.empty
    let routes: QueryRoutes.QueryRoutes = QueryRoutes.empty
    const announcedStores = (): ReadonlyMap<number, number> => {
      standbys = []
      joiningRoutes = QueryRoutes.empty
      return options.stores?.() ?? new Map()
    }
    const sizes = options.maxPollRecords === undefined ? undefined : FetchSizes.make(options.maxPollRecords)
    const consumer: Consumer = kafka.consumer({
      groupId: options.groupId,
      sessionTimeout: Duration.toMillis(options.sessionTimeout),
      rebalanceTimeout: Duration.toMillis(options.rebalanceTimeout),
      heartbeatInterval: heartbeatMs,
      partitionAssigners: [
        Assignor.make(kafkajs.AssignerProtocol, options.owner, Date.now(), {
          stores: announcedStores,
          standbyReplicas: options.standbyReplicas ?? 0,
          endpoint: () => options.endpoint?.()
        })
      ],
      readUncommitted: false,
      maxWaitTimeInMs: 500,
      ...(options.maxBytesPerPartition === undefined ? {} : { maxBytesPerPartition: options.maxBytesPerPartition }),
      retry: consumerRetry
    })

    consumer.on(consumer.events.GROUP_JOIN, (event) => {
      generation++
      rejoinPending = false
      rebalancing()
      rebalance = Deferred.unsafeMake<void>(FiberId.none)
      rebalanceSignalled = false
      revokedSinceJoin = false
      const partitions: Array<TopicPartition> = []
      for (const [topic, list] of Object.entries(event.payload.memberAssignment)) {
        for (const partition of list) partitions.push({ topic, partition })
      }
      sizes?.assigned(new Set(partitions.map((tp) => tp.partition)).size)
      // Bookkeeping only: pause everything; the main loop resumes each task's
      // partitions once the task is fenced and restored.
      if (partitions.length > 0) consumer.pause(byTopic(partitions))
      routes = joiningRoutes
      Queue.unsafeOffer(events, { _tag: "Assigned", generation, partitions, standbys })
      standbys = []
    })
    consumer.on(consumer.events.RECEIVED_UNSUBSCRIBED_TOPICS, (event) => {
      // Markers, not topics: kafkajs leaves them out of the assignment it fetches.
      standbys = Assignor.standbysOf(event.payload.topicsNotSubscribed)
      joiningRoutes = Assignor.queryRoutesOf(event.payload.topicsNotSubscribed) ?? QueryRoutes.empty
      // The leader rejected this member: the group belongs to another transformer.
      const incumbent = Assignor.rejectionOf(event.payload.topicsNotSubscribed)
      if (incumbent === undefined) return
      const conflict = Assignor.ownerConflict(options.groupId, incumbent, options.owner ?? "(unnamed)")
      Queue.unsafeOffer(events, { _tag: "Crashed", error: new KafkaError({ reason: "Protocol", operation: "group join", cause: conflict }) })
    })
    consumer.on(consumer.events.REBALANCING, () => {
      // Signalled already this generation (a heartbeat from eachBatch): one rebalance, one revocation.
      if (rebalanceSignalled) return
      rebalancing()
      Queue.unsafeOffer(events, { _tag: "Rebalancing" })
    })
    // A crash without restart leaves kafkajs without a consumer group: pausing, resuming or
    // seeking would throw ("Consumer group was not initialized"), and there is nothing to fetch.
    let crashed = false
    consumer.on(consumer.events.CRASH, (event) => {
      // A retriable crash is followed by kafkajs's own restart (a rejoin): not fatal.
      if (event.payload.restart) return
      crashed = true
      Queue.unsafeOffer(events, {
        _tag: "Crashed",
        error: toKafkaError("consumer", access)(unreachableAfterRetries("consumer", consumerRetryBudget)(event.payload.error))
      })
    })

    consumer.on(consumer.events.END_BATCH_PROCESS, (event) => {
      // A batch of only filtered records is resolved by kafkajs itself; every other batch went through eachBatch.
      if (event.payload.batchSize === 0) {
        Queue.unsafeOffer(events, {
          _tag: "Filtered",
          topic: event.payload.topic,
          partition: event.payload.partition,
          nextOffset: Number(event.payload.lastOffset) + 1
        })
      }
    })

    const eachBatch = async ({ batch, heartbeat, isRunning, isStale, resolveOffset }: EachBatchPayload): Promise<void> => {
      if (!isRunning()) return
      let complete: (outcome: BatchOutcome) => void = () => undefined
      const done = new Promise<BatchOutcome>((resolve) => {
        complete = resolve
      })
      const finish = (outcome: BatchOutcome) => {
        inFlight.delete(finish)
        complete(outcome)
      }
      inFlight.add(finish)
      sizes?.observe(batch.topic, batch.messages)
      Queue.unsafeOffer(events, {
        _tag: "Batch",
        batch: {
          topic: batch.topic,
          partition: batch.partition,
          generation,
          fetchedOffset: fetchedOffsetOf(batch),
          isStale,
          records: recordsOf(batch),
          nextOffset: Number(batch.lastOffset()) + 1,
          highWatermark: Number(batch.highWatermark),
          complete: finish
        }
      })
      releaseMessages(batch)
      let pendingError: unknown = undefined
      for (;;) {
        // The heartbeat's timer is cleared once the batch is done: most batches are done within
        // milliseconds (buffered), and a timer left for each would pile up by the thousand.
        let timer: ReturnType<typeof setTimeout> | undefined
        const outcome = await Promise.race([
          done,
          new Promise<undefined>((resolve) => {
            timer = setTimeout(() => resolve(undefined), heartbeatMs)
          })
        ])
        clearTimeout(timer)
        if (outcome !== undefined) {
          if (outcome === "Committed" || outcome === "Buffered") resolveOffset(batch.lastOffset())
          if (pendingError !== undefined) throw pendingError
          if (outcome === "Rejoin") throw rejoinError(kafkajs)
          return
        }
        if (pendingError === undefined) {
          try {
            await heartbeat()
          } catch (error) {
            // Keep waiting for the batch to commit before kafkajs rejoins.
            pendingError = error
            if (isRebalancing(error) && !rebalanceSignalled) {
              // The runner tears its tasks down for this: kafkajs must rejoin, whether or not
              // the error thrown below reaches its runner.
              rebalancing()
              rejoinPending = true
              Queue.unsafeOffer(events, { _tag: "Rebalancing" })
            }
          }
        }
      }
    }

    yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          await connectOrDisconnect(consumer, async () => {
            await consumer.subscribe({ topics: [...options.topics], fromBeginning: true })
            await consumer.run({
              autoCommit: false,
              eachBatchAutoResolve: false,
              partitionsConsumedConcurrently: 256,
              // Skein's patch of kafkajs's runner reads these from the handler.
              eachBatch: Object.assign(
                eachBatch,
                options.awaitRevocation === true ? { beforeRejoin, rejoinRequested } : { rejoinRequested },
                sizes === undefined ? {} : { fetchSizes: sizes }
              )
            })
          })
        },
        catch: toKafkaError("consumer.run", access)
      }),
      () =>
        Effect.promise(async () => {
          for (const finish of [...inFlight]) finish("Dropped")
          // Leaving: a rejoin in progress waits for no revocation.
          processingStopped = true
          releaseWaiters()
          await consumer.disconnect().catch(() => undefined)
        })
    )

    return {
      events,
      pause: (partitions) => Effect.sync(() => !crashed && partitions.length > 0 && consumer.pause(byTopic(partitions))),
      resume: (partitions) =>
        Effect.sync(() => !crashed && partitions.length > 0 && consumer.resume(byTopic(partitions))),
      seek: (tp, offset) =>
        Effect.sync(() => {
          if (!crashed) consumer.seek({ topic: tp.topic, partition: tp.partition, offset: String(offset) })
        }),
      dropInFlight: Effect.sync(() => {
        for (const finish of [...inFlight]) finish("Dropped")
      }),
      nextRebalance: Effect.sync(() => rebalance),
      routes: () => routes,
      requestRejoin: Effect.sync(() => {
        rejoinPending = true
      }),
      revoked: Effect.sync(() => {
        revokedSinceJoin = true
        releaseWaiters()
      }),
      stopped: Effect.sync(() => {
        processingStopped = true
        releaseWaiters()
      }),
      commitOffsets: (offsets) =>
        offsets.length === 0 ? Effect.void : Effect.tryPromise({
          try: () =>
            consumer.commitOffsets(offsets.map((o) => ({ topic: o.topic, partition: o.partition, offset: String(o.offset) }))),
          catch: toKafkaError("commitOffsets")
        })
    }
  })
