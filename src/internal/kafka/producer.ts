/**
 * Transactional producers with a static transactional id, and the fencing
 * proof that orders a task's startup.
 *
 * A `TransactionalProducer` can only `fence`. Fencing (the producer's first
 * InitProducerId) bumps the epoch of its transactional id, aborts any open
 * transaction of a previous owner, and yields a `FencedProducer`: the only
 * value that can run transactions, and the value that restoring state and
 * reading committed offsets require.
 *
 * @internal
 */
import { Duration, Effect } from "effect"
import type { Scope } from "effect"
import type { IHeaders, Message, Producer, RecordMetadata, Transaction } from "kafkajs"
import { KafkaError, TaskMigrated } from "../../SkeinError.ts"
import * as CommitReceipt from "../runtime/CommitReceipt.ts"
import type { EncodedRecord, HeaderValue } from "../../Topic.ts"
import { connectOrDisconnect, probeTransactionalId } from "./client.ts"
import type { Kafka } from "./client.ts"
import { recordBytes, recordSizeBound } from "./recordSize.ts"
import { isFenced, toKafkaError } from "./errors.ts"
import * as Faults from "../runtime/faults.ts"


/**
 * The lifetime of a producer, as its permits' type names it: `S` is the type
 * of the `use` call that lent the producer (invariant: a permit of one `use`
 * is no permit of another, nor of a lifetime the type does not name), and
 * `unknown` for a producer of a `Scope` (`make`, `atLeastOnce`), whose
 * closing only the run-time check sees. Never set: a phantom.
 */
declare const lifetime: unique symbol

/** A producer of task `P` that has not fenced its transactional id `T` yet; `S`: its lifetime (`use`). */
export interface TransactionalProducer<P extends number = number, T extends string = string, S = unknown> {
  readonly transactionalId: T
  /** Fences every previous owner of the transactional id. */
  readonly fence: Effect.Effect<FencedProducer<P, T, S>, KafkaError>
}

/** Where the broker appended a send's records of one partition: the first offset of the last batch it took. */
export interface Appended {
  readonly topic: string
  readonly partition: number
  readonly baseOffset: number
  /**
   * The records of that batch (a send call makes one batch per partition),
   * known for records sent to an explicit partition (changelog records are);
   * `undefined` otherwise.
   */
  readonly records: number | undefined
}

/**
 * Records per explicit `topic/partition` of one send call, counted by runs of one partition (a
 * task's changelog records are one run): a key a run, not a key a record.
 */
const explicitCounts = (topicMessages: ReadonlyArray<OutgoingTopicMessages>) => {
  const counts = new Map<string, number>()
  for (const { messages, topic } of topicMessages) {
    let partition: number | undefined = undefined
    let run = 0
    const count = () => {
      if (partition === undefined) return
      const key = `${topic}/${partition}`
      counts.set(key, (counts.get(key) ?? 0) + run)
    }
    for (const message of messages) {
      if (message.partition === partition) {
        run++
        continue
      }
      count()
      partition = message.partition
      run = 1
    }
    count()
  }
  return counts
}

/** What each send of a delivery appended, per partition: the highest base offset, with its batch's record count. */
const appendedOf = (
  acks: ReadonlyArray<RecordMetadata>,
  topicMessages: ReadonlyArray<OutgoingTopicMessages>,
  into: Map<string, Appended>
): void => {
  const counts = explicitCounts(topicMessages)
  for (const ack of acks) {
    const baseOffset = Number(ack.baseOffset ?? -1)
    if (!Number.isSafeInteger(baseOffset) || baseOffset < 0) continue
    const key = `${ack.topicName}/${ack.partition}`
    const known = into.get(key)
    if (known === undefined || known.baseOffset < baseOffset) {
      into.set(key, { topic: ack.topicName, partition: ack.partition, baseOffset, records: counts.get(key) })
    }
  }
}

/** Offsets to commit in a transaction: the next offset to read per partition. */
export interface TransactionOffsets {
  readonly groupId: string
  readonly offsets: ReadonlyArray<{ readonly topic: string; readonly partition: number; readonly offset: number }>
}

/** The key only this module can write: no object literal elsewhere has the shape of a permit. */
const issuedBy: unique symbol = Symbol("skein/RestorePermit")

/**
 * A producer that owns transactional id `T`, for task `P`, within lifetime
 * `S` (a `use` call's: it does not leave that call). Only `fence` creates
 * one (`isPermit` rejects any other value, a cast included, and any permit
 * whose producer closed).
 */
export interface FencedProducer<P extends number = number, T extends string = string, S = unknown> {
  readonly [issuedBy]: "exactly-once"
  readonly [lifetime]?: (lifetime: S) => S
  readonly _tag: "FencedProducer"
  readonly partition: P
  readonly transactionalId: T
  /**
   * Runs one transaction: sends the records, adds the offsets, commits.
   * Fails with `TaskMigrated` when a newer owner fenced this producer, with
   * `KafkaError` otherwise; either way the transaction is aborted and the
   * producer must be discarded.
   */
  readonly commit: (
    records: ReadonlyArray<EncodedRecord>,
    offsets: TransactionOffsets
  ) => Effect.Effect<CommitReceipt.CommitReceipt<P>, KafkaError | TaskMigrated>
}

/**
 * A message as kafkajs sends it, as its code reads one: its declarations type the timestamp as text
 * and a repeated header's values as a mutable array, while its code (and the patch's record batch
 * encoder) reads a number of milliseconds the same way, to the same bytes
 * (`test/unit/recordBatchEncoder.test.ts`, "current ms as numbers"), and never writes to a message.
 * So an output is sent as it is: a copy of each lived until its send was acknowledged, long enough
 * for the young generation's collections to copy and promote it.
 */
type OutgoingMessage = Omit<Message, "timestamp" | "headers"> & {
  readonly timestamp?: string | number | undefined
  readonly headers?: IHeaders | Readonly<Record<string, HeaderValue>> | undefined
}

/** A send call's messages to one topic. */
interface OutgoingTopicMessages {
  readonly topic: string
  readonly messages: ReadonlyArray<OutgoingMessage>
}

/**
 * A kafkajs sender (a producer, a transaction), as it takes messages. kafkajs declares `sendBatch`
 * a method, whose parameter TypeScript compares both ways: its `ProducerBatch` reads as this one.
 */
interface Sender {
  sendBatch(batch: {
    readonly topicMessages?: ReadonlyArray<OutgoingTopicMessages>
    readonly acks?: number
  }): Promise<Array<RecordMetadata>>
}

/**
 * An output as the message kafkajs sends: the record itself, unless its timestamp is a number kafkajs
 * reads as none (0: its delta takes the current time for a falsy timestamp), sent as text ("0"), as
 * every timestamp was before.
 */
export const toMessage = (record: EncodedRecord): OutgoingMessage =>
  record.timestamp === undefined || record.timestamp ? record : { ...record, timestamp: String(record.timestamp) }

/**
 * A task's producer in at-least-once mode: no transactions and no fencing.
 * `deliver` sends the records and waits for their acknowledgement; the runner
 * commits offsets after it. A zombie may still write (no fencing): that is the
 * at-least-once contract.
 */
export interface AtLeastOnceProducer<P extends number = number, S = unknown> {
  readonly [issuedBy]: "at-least-once"
  readonly [lifetime]?: (lifetime: S) => S
  readonly _tag: "AtLeastOnceProducer"
  readonly partition: P
  readonly deliver: (records: ReadonlyArray<EncodedRecord>) => Effect.Effect<CommitReceipt.CommitReceipt<P>, KafkaError>
}

/** A processing guarantee, as a restore permit's type names it. */
export type Guarantee = "exactly-once" | "at-least-once"

/**
 * What a task must hold before it reads committed offsets or restores its
 * store, for task `P` under guarantee `G`, within lifetime `S`: the fenced
 * producer (exactly-once) or the at-least-once producer, which declares that
 * no fencing is wanted.
 */
export type RestorePermit<P extends number = number, G extends Guarantee = Guarantee, S = unknown> = G extends
  "exactly-once" ? FencedProducer<P, string, S>
  : AtLeastOnceProducer<P, S>

/**
 * The permits this module issued, each with its kafkajs producer (the permit
 * is revoked once that closes): a value not in here was not made by `fence`
 * or `atLeastOnce`.
 */
const issued = new WeakMap<object, Producer>()

/** The producers whose scope closed: their permits are revoked. */
const closed = new WeakSet<Producer>()

const issue = <R extends RestorePermit>(permit: R, producer: Producer): R => {
  issued.set(permit, producer)
  return permit
}

/** Revokes the producer's permits, then disconnects it (its scope's release). */
const release = (producer: Producer) =>
  Effect.promise(() => {
    closed.add(producer)
    return producer.disconnect().catch(() => undefined)
  })

/** Why `permit` is no permit of task `partition` now (a defect's message), or `undefined` when it is one. */
export const notPermit = <S>(permit: RestorePermit<number, Guarantee, S>, partition: number): string | undefined => {
  const producer = issued.get(permit)
  if (producer === undefined) return "it is no producer that fenced (or an at-least-once producer): a value made elsewhere"
  if (closed.has(producer)) {
    return `its producer closed (task ${permit.partition}'s permit was kept after its producer's scope or use ended)`
  }
  if (permit.partition !== partition) return `it is task ${permit.partition}'s permit`
  return undefined
}

/** True when `permit` was issued by this module for task `partition`, and its producer is still open. */
export const isPermit = <S>(permit: RestorePermit<number, Guarantee, S>, partition: number): boolean =>
  notPermit(permit, partition) === undefined

/** A send call's messages to one topic, and their bytes (bounds). */
interface TopicMessages {
  readonly messages: Array<OutgoingMessage>
  bytes: number
}

/**
 * The records' messages per topic, in send calls of at most `maxBytes` each,
 * and at most `limitOf(topic)` per topic: a broker checks `max.message.bytes`
 * against a partition's whole record batch, and a send call makes one batch
 * per partition. Outputs come in runs of one topic: a topic's limit and
 * messages are looked up once per run.
 */
const sendCalls = (
  records: ReadonlyArray<EncodedRecord>,
  maxBytes: number,
  limitOf: (topic: string) => number | undefined
) => {
  const calls: Array<Array<OutgoingTopicMessages>> = []
  let byTopic = new Map<string, TopicMessages>()
  let bytes = 0
  const flush = () => {
    if (byTopic.size > 0) calls.push([...byTopic].map(([topic, { messages }]) => ({ topic, messages })))
    byTopic = new Map()
    bytes = 0
  }
  let topic: string | undefined = undefined
  let limit = maxBytes
  let current: TopicMessages | undefined = undefined
  for (const record of records) {
    if (record.topic !== topic) {
      topic = record.topic
      limit = Math.min(maxBytes, limitOf(topic) ?? maxBytes)
      current = byTopic.get(topic)
    }
    let size = recordSizeBound(record)
    // A bound above the limit may still fit: count the text before splitting on it.
    if (size > limit) size = recordBytes(record)
    const inTopic = current?.bytes ?? 0
    if ((bytes > 0 && bytes + size > maxBytes) || (inTopic > 0 && inTopic + size > limit)) {
      flush()
      current = undefined
    }
    bytes += size
    if (current === undefined) {
      current = { messages: [], bytes: 0 }
      byTopic.set(topic, current)
    }
    current.bytes += size
    current.messages.push(toMessage(record))
  }
  flush()
  return calls
}

/** One transaction on a kafkajs producer: sends, offsets, commit; on failure an abort whose own failure is kept. */
export const runTransaction = async (
  producer: Producer,
  records: ReadonlyArray<EncodedRecord>,
  offsets: TransactionOffsets,
  limits: Limits,
  /** The task committing (for Skein's own fault points). */
  partition?: number
): Promise<ReadonlyArray<Appended>> => {
  const transaction: Transaction = await producer.transaction()
  const appended = new Map<string, Appended>()
  const sender: Sender = transaction
  try {
    for (const topicMessages of sendCalls(records, limits.maxMessageBytes, limits.limitOf)) {
      appendedOf(await sender.sendBatch({ topicMessages }), topicMessages, appended)
    }
    if (offsets.offsets.length > 0) {
      const topics = new Map<string, Array<{ partition: number; offset: string }>>()
      for (const o of offsets.offsets) {
        const list = topics.get(o.topic) ?? []
        list.push({ partition: o.partition, offset: String(o.offset) })
        topics.set(o.topic, list)
      }
      await transaction.sendOffsets({
        consumerGroupId: offsets.groupId,
        topics: [...topics].map(([topic, partitions]) => ({ topic, partitions }))
      })
    }
    if (partition !== undefined && Faults.loseCommit(partition)) {
      // Skein's own crash tests only (`SKEIN_FAULT=commit-lost:<n>`): a commit a broker acknowledged and lost.
      await transaction.abort()
      return [...appended.values()]
    }
    await transaction.commit()
    return [...appended.values()]
  } catch (error) {
    if (transaction.isActive()) {
      // The abort's own failure is kept with the error, never dropped: the producer is discarded either way.
      await transaction.abort().catch((abortError: unknown) => {
        throw new TransactionAbortFailed(error, abortError)
      })
    }
    throw error
  }
}

/** A transaction failed and so did its abort; both causes are kept. */
export class TransactionAbortFailed extends Error {
  constructor(override readonly cause: unknown, readonly abortCause: unknown) {
    super(
      `${cause instanceof Error ? cause.message : String(cause)} (and its abort failed: ${
        abortCause instanceof Error ? abortCause.message : String(abortCause)
      })`
    )
    this.name = "TransactionAbortFailed"
  }
}

/** The size limits of what a producer sends. */
export interface Limits {
  /** The limit of any record batch (`SkeinConfig.maxMessageBytes`). */
  readonly maxMessageBytes: number
  /** A topic's limit (its `max.message.bytes`, at most `maxMessageBytes`) once known. */
  readonly limitOf: (topic: string) => number | undefined
}

const unknownLimits = (): undefined => undefined

/** A connected transactional producer, disconnected when the scope closes. */
export const make = <P extends number, T extends string>(
  kafka: Kafka,
  options: {
    readonly partition: P
    readonly transactionalId: T
    readonly transactionTimeout: Duration.Duration
    readonly maxMessageBytes: number
    readonly limitOf?: ((topic: string) => number | undefined) | undefined
  }
): Effect.Effect<TransactionalProducer<P, T>, KafkaError, Scope.Scope> =>
  Effect.zipRight(probeTransactionalId(kafka, options.transactionalId), Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const producer = kafka.producer({
          transactionalId: options.transactionalId,
          idempotent: true,
          maxInFlightRequests: 1,
          transactionTimeout: Duration.toMillis(options.transactionTimeout),
          // CONCURRENT_TRANSACTIONS is answered while the broker aborts a fenced owner's
          // transaction, and to a task's next transaction begun right after its commit (the
          // commit's markers still being written): retry it within milliseconds (5, 10, 20, ...
          // up to 1 s), not after kafkajs's 300 ms default. A 50 ms start added ~20 ms to the
          // median latency once tasks began their next batch at once (bench/README.md).
          retry: { initialRetryTime: 5, maxRetryTime: 1000, retries: 30 }
        })
        await connectOrDisconnect(producer)
        return producer
      },
      catch: toKafkaError("producer.connect", { transactionalId: options.transactionalId })
    }),
    release
  ).pipe(Effect.map((producer): TransactionalProducer<P, T> => ({
    transactionalId: options.transactionalId,
    fence: Effect.tryPromise({
      try: async () => {
        // The first transaction() sends InitProducerId: that is the fence. An abort
        // with nothing sent issues no EndTxn.
        const transaction = await producer.transaction()
        await transaction.abort()
      },
      catch: toKafkaError("fence", { transactionalId: options.transactionalId, clusterOperation: "IDEMPOTENT_WRITE" })
    }).pipe(Effect.zipRight(Effect.sync(() =>
      fenced(producer, options, {
        maxMessageBytes: options.maxMessageBytes,
        limitOf: options.limitOf ?? unknownLimits
      })
    )))
  }))))

/**
 * A connected transactional producer lent to `f`, disconnected when `f`
 * ends. Its type names `f`'s own lifetime `S`, and so does its fenced
 * producer (a restore permit): no permit leaves `f`, so none outlives its
 * producer, in types (returned or stored, it no longer type-checks as a
 * permit); `isPermit` rejects a closed producer's permit at run time.
 */
export const use = <P extends number, T extends string, A, E, R>(
  kafka: Kafka,
  options: Parameters<typeof make<P, T>>[1],
  f: <S>(producer: TransactionalProducer<P, T, S>) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | KafkaError, Exclude<R, Scope.Scope>> =>
  // `f` at the lifetime of this call's scope (`unknown`): the only place a lifetime is chosen.
  Effect.scoped(Effect.flatMap(make(kafka, options), (producer) => f(producer)))

const fenced = <P extends number, T extends string>(
  producer: Producer,
  options: { readonly partition: P; readonly transactionalId: T },
  limits: Limits
): FencedProducer<P, T> =>
  issue({
    [issuedBy]: "exactly-once",
    _tag: "FencedProducer",
    partition: options.partition,
    transactionalId: options.transactionalId,
    commit: (records: ReadonlyArray<EncodedRecord>, offsets: TransactionOffsets) =>
      Effect.tryPromise({
        try: () => runTransaction(producer, records, offsets, limits, options.partition).then((appended) => CommitReceipt.issue(options.partition, appended)),
        catch: (error): KafkaError | TaskMigrated =>
          isFenced(error)
            ? new TaskMigrated({ partition: options.partition, cause: error })
            : toKafkaError("commit", {
              topics: [...new Set(records.map((r) => r.topic))],
              topicOperation: "WRITE",
              group: offsets.groupId,
              groupOperation: "READ",
              transactionalId: options.transactionalId
            })(error)
      }).pipe(Effect.uninterruptible)
  }, producer)

/** A connected idempotent producer for at-least-once mode, disconnected when the scope closes. */
export const atLeastOnce = <P extends number>(
  kafka: Kafka,
  options: {
    readonly partition: P
    readonly maxMessageBytes: number
    readonly limitOf?: ((topic: string) => number | undefined) | undefined
  }
): Effect.Effect<AtLeastOnceProducer<P>, KafkaError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
        await connectOrDisconnect(producer)
        return producer
      },
      catch: toKafkaError("producer.connect")
    }),
    release
  ).pipe(Effect.map((producer) =>
    issue({
      [issuedBy]: "at-least-once",
      _tag: "AtLeastOnceProducer",
      partition: options.partition,
      deliver: (records: ReadonlyArray<EncodedRecord>) =>
        Effect.tryPromise({
          try: async () => {
            const appended = new Map<string, Appended>()
            const sender: Sender = producer
            for (const topicMessages of sendCalls(records, options.maxMessageBytes, options.limitOf ?? unknownLimits)) {
              appendedOf(await sender.sendBatch({ topicMessages, acks: -1 }), topicMessages, appended)
            }
            return CommitReceipt.issue(options.partition, [...appended.values()])
          },
          catch: toKafkaError("send", {
            topics: [...new Set(records.map((r) => r.topic))],
            topicOperation: "WRITE",
            clusterOperation: "IDEMPOTENT_WRITE"
          })
        }).pipe(Effect.uninterruptible)
    } satisfies AtLeastOnceProducer<P>, producer)
  ))
