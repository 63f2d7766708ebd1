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
import type { Message, Producer, Transaction } from "kafkajs"
import { KafkaError, TaskMigrated } from "../../SkeinError.ts"
import type { EncodedRecord } from "../../Topic.ts"
import type { Kafka } from "./client.ts"
import { isFenced, toKafkaError } from "./errors.ts"

declare const FencedBrand: unique symbol

/** A producer that has not fenced its transactional id yet. */
export interface TransactionalProducer {
  readonly transactionalId: string
  /** Fences every previous owner of the transactional id. */
  readonly fence: Effect.Effect<FencedProducer, KafkaError>
}

/** Offsets to commit in a transaction: the next offset to read per partition. */
export interface TransactionOffsets {
  readonly groupId: string
  readonly offsets: ReadonlyArray<{ readonly topic: string; readonly partition: number; readonly offset: number }>
}

/** A producer that owns its transactional id. Only `fence` creates one. */
export interface FencedProducer {
  readonly [FencedBrand]: true
  readonly transactionalId: string
  /**
   * Runs one transaction: sends the records, adds the offsets, commits.
   * Fails with `TaskMigrated` when a newer owner fenced this producer, with
   * `KafkaError` otherwise; either way the transaction is aborted and the
   * producer must be discarded.
   */
  readonly commit: (
    records: ReadonlyArray<EncodedRecord>,
    offsets: TransactionOffsets,
    partition: number
  ) => Effect.Effect<void, KafkaError | TaskMigrated>
}

const toMessage = (record: EncodedRecord): Message => {
  const message: Message = { key: record.key, value: record.value }
  if (record.partition !== undefined) message.partition = record.partition
  if (record.headers !== undefined) message.headers = { ...record.headers }
  return message
}

const groupByTopic = (records: ReadonlyArray<EncodedRecord>) => {
  const byTopic = new Map<string, Array<Message>>()
  for (const record of records) {
    let messages = byTopic.get(record.topic)
    if (messages === undefined) {
      messages = []
      byTopic.set(record.topic, messages)
    }
    messages.push(toMessage(record))
  }
  return [...byTopic].map(([topic, messages]) => ({ topic, messages }))
}

const runTransaction = async (
  producer: Producer,
  records: ReadonlyArray<EncodedRecord>,
  offsets: TransactionOffsets
): Promise<void> => {
  const transaction: Transaction = await producer.transaction()
  try {
    if (records.length > 0) {
      await transaction.sendBatch({ topicMessages: groupByTopic(records) })
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
    await transaction.commit()
  } catch (error) {
    if (transaction.isActive()) {
      await transaction.abort().catch(() => undefined)
    }
    throw error
  }
}

/** A connected transactional producer, disconnected when the scope closes. */
export const make = (
  kafka: Kafka,
  options: { readonly transactionalId: string; readonly transactionTimeout: Duration.Duration }
): Effect.Effect<TransactionalProducer, KafkaError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const producer = kafka.producer({
          transactionalId: options.transactionalId,
          idempotent: true,
          maxInFlightRequests: 1,
          transactionTimeout: Duration.toMillis(options.transactionTimeout),
          // CONCURRENT_TRANSACTIONS is answered while the broker aborts a fenced owner's
          // transaction: retry it quickly instead of kafkajs's 300 ms default.
          retry: { initialRetryTime: 50, maxRetryTime: 1000, retries: 20 }
        })
        await producer.connect()
        return producer
      },
      catch: toKafkaError("producer.connect")
    }),
    (producer) => Effect.promise(() => producer.disconnect().catch(() => undefined))
  ).pipe(Effect.map((producer): TransactionalProducer => ({
    transactionalId: options.transactionalId,
    fence: Effect.tryPromise({
      try: async () => {
        // The first transaction() sends InitProducerId: that is the fence. An abort
        // with nothing sent issues no EndTxn.
        const transaction = await producer.transaction()
        await transaction.abort()
      },
      catch: toKafkaError("fence")
    }).pipe(Effect.as(fenced(producer, options.transactionalId)))
  })))

const fenced = (producer: Producer, transactionalId: string): FencedProducer => {
  const value = {
    transactionalId,
    commit: (records: ReadonlyArray<EncodedRecord>, offsets: TransactionOffsets, partition: number) =>
      Effect.tryPromise({
        try: () => runTransaction(producer, records, offsets),
        catch: (error): KafkaError | TaskMigrated =>
          isFenced(error) ? new TaskMigrated({ partition, cause: error }) : toKafkaError("commit")(error)
      }).pipe(Effect.uninterruptible)
  }
  return value as unknown as FencedProducer
}
