/**
 * Reads one changelog partition from an offset up to an end offset,
 * read_committed, for restoring a task's store.
 *
 * kafkajs has no manual `assign()`, so the reader is a consumer in a private
 * group of its own (the only member, it is assigned every partition), with
 * every partition paused except the ones being restored: tasks starting
 * together restore their partitions together, one fetch serving them all.
 *
 * @internal
 */
import { Deferred, Duration, Effect, Queue } from "effect"
import type { Scope } from "effect"
import type { Consumer, KafkaMessage } from "kafkajs"
import { KafkaError } from "../../SkeinError.ts"
import { connectOrDisconnect, explainGroupFailure } from "./client.ts"
import type { Kafka } from "./client.ts"
import { consumerRetry, offsetOf } from "./consumer.ts"
import { toKafkaError } from "./errors.ts"
import { notPermit } from "./producer.ts"
import type { Guarantee, RestorePermit } from "./producer.ts"

/**
 * Fetched batches handed on but not yet applied, at most: the consumer fetches
 * the next batch while the store writes the previous one (LevelDB writes off
 * the main thread), and holds at most this many batches in memory.
 */
const batchesAhead = 2

/**
 * A read that gets nothing for this long (no join of the reader's group, no
 * fetched batch, no position) fails with a `KafkaError` of reason `Timeout`,
 * which its task's start retries after a backoff: a restore never waits
 * forever on a group that does not join or a partition that is not fetched.
 */
export const defaultStallTimeout: Duration.Duration = Duration.minutes(1)

type ReadEvent =
  | { readonly _tag: "Records"; readonly records: ReadonlyArray<ChangelogRecord>; readonly ack: () => void }
  | { readonly _tag: "Position"; readonly next: number }
  | { readonly _tag: "Failed"; readonly error: KafkaError }

/**
 * A changelog record as a restore needs it: its offset, key and value, and
 * its timestamp (a source-topic changelog's state keeps it,
 * `SourceChangelog.ts`). A changelog's headers are never read, and a restore
 * handles hundreds of thousands of these, so they carry nothing else.
 */
export interface ChangelogRecord {
  readonly offset: number
  readonly key: Buffer | null
  readonly value: Buffer | null
  readonly timestamp?: number
}

/** A fetched changelog batch as changelog records. */
export const changelogRecords = (
  batch: {
    readonly messages: ReadonlyArray<Pick<KafkaMessage, "offset" | "key" | "value"> & { readonly timestamp?: string }>
  }
): Array<ChangelogRecord> => {
  const messages = batch.messages
  const records = new Array<ChangelogRecord>(messages.length)
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!
    records[i] = m.timestamp === undefined
      ? { offset: offsetOf(m), key: m.key, value: m.value }
      : { offset: offsetOf(m), key: m.key, value: m.value, timestamp: Number(m.timestamp) }
  }
  return records
}

/** The records of `records` (in offset order) from `from` until `until`: the array itself when all are. */
export const inRange = (
  records: ReadonlyArray<ChangelogRecord>,
  from: number,
  until: number
): ReadonlyArray<ChangelogRecord> => {
  const first = records[0]
  const last = records[records.length - 1]
  if (first === undefined || last === undefined) return records
  if (first.offset >= from && last.offset < until) return records
  return records.filter((r) => r.offset >= from && r.offset < until)
}

/** A partition being read: its position, its events, and the applies of the batches handed on. */
interface Reading {
  readonly partition: number
  position: number
  readonly events: Queue.Queue<ReadEvent>
  readonly applied: Array<Promise<void>>
}

/**
 * A changelog reader for tasks under guarantee `G` (both: the reader of a
 * runner whose guarantee is a setting).
 */
export interface ChangelogReader<G extends Guarantee = Guarantee> {
  /**
   * Feeds every record of `partition` in [from, until) to `apply`, in order.
   * Requires the permit of the partition's task (its type names the
   * partition `P`): the fenced producer (exactly-once: only after fencing is
   * the changelog's last stable offset final), or the at-least-once producer,
   * which declares that no fencing is wanted.
   */
  readonly read: <P extends number, S, E>(
    permit: RestorePermit<P, G, S>,
    partition: NoInfer<P>,
    range: { readonly from: number; readonly until: number },
    apply: (records: ReadonlyArray<ChangelogRecord>) => Effect.Effect<void, E>
  ) => Effect.Effect<number, KafkaError | E>
  /**
   * True once the reader's consumer crashed without restarting: every read
   * fails from then on, so its owner makes a new reader for the next restore.
   */
  readonly isCrashed: Effect.Effect<boolean>
}

export const make = <G extends Guarantee = Guarantee>(
  kafka: Kafka,
  options: {
    readonly topic: string
    readonly groupId: string
    /** A prefix of `groupId` that ACLs can grant on (its suffix is per run). */
    readonly groupPrefix?: string | undefined
    /** The guarantee of the tasks that read (a permit of the other one is rejected); both when unset. */
    readonly guarantee?: G | undefined
    /** How long a read waits for its group's join or its next batch before it fails (`defaultStallTimeout`). */
    readonly stallTimeout?: Duration.DurationInput | undefined
  }
): Effect.Effect<ChangelogReader<G>, KafkaError, Scope.Scope> =>
  Effect.gen(function*() {
    /** The first assignment, or the crash that came before it (a failed join must not leave reads waiting). */
    const joined = yield* Deferred.make<ReadonlyArray<number>, KafkaError>()
    const access = { topics: [options.topic], topicOperation: "READ", group: options.groupId, groupOperation: "READ" } as const
    const stallTimeout = Duration.decode(options.stallTimeout ?? defaultStallTimeout)
    /** Fails `wait` with a `Timeout` after `stallTimeout` without an answer. */
    const unlessStalled = <A, E>(wait: Effect.Effect<A, E>, what: string): Effect.Effect<A, E | KafkaError> =>
      Effect.timeoutFail(wait, {
        duration: stallTimeout,
        onTimeout: () =>
          new KafkaError({
            reason: "Timeout",
            operation: "changelog restore",
            cause: `${options.topic}: ${what} within ${Duration.format(stallTimeout)} (no progress); the task's start is retried`
          })
      })
    /** The partitions being read, each by one `read`. */
    const readings = new Map<number, Reading>()
    let assigned: ReadonlyArray<number> = []
    /**
     * The reading each partition's batch in hand (handed to `eachBatch`) went
     * to, until its END_BATCH_PROCESS: none when it was fetched before a seek
     * (kafkajs's `isStale()`) or no read wanted it. Its position goes to that
     * reading only, never to one that began since.
     */
    const inHand = new Map<number, Reading | undefined>()
    /**
     * Partitions seeked whose first batch since is not handled yet, with the
     * offset seeked to. That batch may have been fetched before the seek (at
     * most one: kafkajs fetches a partition again only once its batch in hand
     * is handled, and applies the seek in that fetch). A batch of only
     * filtered records (aborted ones, markers) never reaches `eachBatch`, so
     * no `isStale()` tells: kafkajs resolves it itself and reports only its
     * offsets (END_BATCH_PROCESS, batchSize 0).
     */
    const seeked = new Map<number, number>()

    const consumer: Consumer = kafka.consumer({
      groupId: options.groupId,
      readUncommitted: false,
      // A fetch finding no records is held this long at the broker: the one in flight when the
      // last restoring partition reaches its end delays the next restore by up to this. An idle
      // reader (every partition paused) sleeps this long between its checks; 20 ms cost an idle
      // runner ~1 % of a core, and with restores together no longer sped them up.
      maxWaitTimeInMs: 200,
      maxBytesPerPartition: 4 * 1024 * 1024,
      // Generous for transient answers (a group coordinator loading or moving); a
      // crash after that is reported as a typed KafkaError, never restarted silently.
      retry: consumerRetry
    })
    /** Fetches the reading's partition from its position on. */
    const resumeAt = (reading: Reading) => {
      consumer.seek({ topic: options.topic, partition: reading.partition, offset: String(reading.position) })
      seeked.set(reading.partition, reading.position)
      consumer.resume([{ topic: options.topic, partitions: [reading.partition] }])
    }
    const pauseAll = () => {
      if (assigned.length > 0) consumer.pause([{ topic: options.topic, partitions: [...assigned] }])
    }
    consumer.on(consumer.events.GROUP_JOIN, (event) => {
      assigned = event.payload.memberAssignment[options.topic] ?? []
      pauseAll()
      for (const reading of readings.values()) resumeAt(reading)
      Deferred.unsafeDone(joined, Effect.succeed(assigned))
    })
    consumer.on(consumer.events.END_BATCH_PROCESS, (event) => {
      const { batchSize, firstOffset, lastOffset, partition } = event.payload
      const seekedTo = seeked.get(partition)
      seeked.delete(partition)
      const reading = readings.get(partition)
      if (batchSize > 0) {
        const owner = inHand.get(partition)
        inHand.delete(partition)
        if (owner === undefined || owner !== reading) return
      } else {
        if (reading === undefined) return
        // Filtered records only, resolved by kafkajs without `eachBatch` (so no `isStale()`): the
        // first such batch since a seek may have been fetched before it. One that begins at or before
        // the offset seeked to covers the records from there on, all filtered, whenever it was
        // fetched: its position holds. Any other (a stale one, or a fresh one past a compacted gap:
        // they look alike) is dropped and the partition fetched again from the offset seeked to;
        // kafkajs applies that seek in its next fetch of the partition, so the batch after it is
        // fresh and is taken as it comes.
        if (seekedTo !== undefined && (firstOffset === null || Number(firstOffset) > seekedTo)) {
          try {
            consumer.seek({ topic: options.topic, partition, offset: String(seekedTo) })
          } catch (error) {
            reading.events.unsafeOffer({ _tag: "Failed", error: toKafkaError("changelog seek", access)(error) })
          }
          return
        }
      }
      Queue.unsafeOffer(reading.events, { _tag: "Position", next: Number(lastOffset) + 1 })
    })
    // A crashed reader stays crashed: every later read fails with this typed error (a security
    // failure as its cause, so an ACL missing on the restore group is fatal, not retried).
    let crashed: KafkaError | undefined = undefined
    consumer.on(consumer.events.CRASH, (event) => {
      if (event.payload.restart) return
      const error = toKafkaError("changelog consumer", access)(event.payload.error)
      const failure = new KafkaError({ reason: "Crashed", operation: error.operation, cause: error.cause })
      crashed = failure
      Deferred.unsafeDone(joined, Effect.fail(failure))
      for (const reading of readings.values()) reading.events.unsafeOffer({ _tag: "Failed", error: failure })
    })

    yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          await connectOrDisconnect(consumer, () => consumer.subscribe({ topics: [options.topic], fromBeginning: true }))
          await consumer.run({
            autoCommit: false,
            eachBatch: async ({ batch, isStale }) => {
              // Fetched before a seek, handed on after it (the worker was busy): a later read of the
              // partition would apply it before the records it seeked to, and skip those.
              const target = isStale() ? undefined : readings.get(batch.partition)
              inHand.set(batch.partition, target)
              if (target === undefined || batch.messages.length === 0) return
              const records = changelogRecords(batch)
              target.applied.push(new Promise<void>((resolve) => {
                Queue.unsafeOffer(target.events, { _tag: "Records", records, ack: resolve })
              }))
              // Fetch the next batch while this one is applied, unless enough are waiting.
              if (target.applied.length >= batchesAhead) await target.applied.shift()
            }
          })
        },
        catch: toKafkaError("changelog consumer.run", access)
      }),
      () => Effect.promise(() => consumer.disconnect().catch(() => undefined))
    )

    /** Leaves a partition: no batch is handed to its reading any more, and it is paused. */
    const leave = (reading: Reading) => {
      const partition = reading.partition
      if (readings.get(partition) === reading) readings.delete(partition)
      try {
        consumer.pause([{ topic: options.topic, partitions: [partition] }])
      } catch {
        // A crashed consumer cannot pause; the crash is already recorded above.
      }
    }

    /**
     * Once the partition is left, the batches fetched past the end (or left by
     * a failure) are released unapplied: a consumer waiting on one fetches on.
     */
    const release = (reading: Reading) =>
      Effect.zipRight(
        Effect.sync(() => leave(reading)),
        Effect.flatMap(Queue.takeAll(reading.events), (left) =>
          Effect.sync(() => {
            for (const event of left) if (event._tag === "Records") event.ack()
          }))
      )

    /** Applies the reading's batches in order until its position reaches `until`. */
    const consume = <E>(
      reading: Reading,
      until: number,
      apply: (records: ReadonlyArray<ChangelogRecord>) => Effect.Effect<void, E>
    ) =>
      Effect.gen(function*() {
        let restored = 0
        while (reading.position < until) {
          const event = yield* unlessStalled(
            Queue.take(reading.events),
            `partition ${reading.partition} fetched nothing at offset ${reading.position} of ${until}`
          )
          switch (event._tag) {
            case "Failed":
              return yield* Effect.fail(event.error)
            case "Position":
              reading.position = Math.max(reading.position, event.next)
              break
            case "Records": {
              const records = inRange(event.records, reading.position, until)
              yield* Effect.ensuring(apply(records), Effect.sync(event.ack))
              restored += records.length
              const last = event.records[event.records.length - 1]
              if (last !== undefined) reading.position = Math.max(reading.position, last.offset + 1)
              break
            }
          }
        }
        return restored
      })

    const wanted = options.guarantee === undefined
      ? undefined
      : options.guarantee === "exactly-once"
      ? "FencedProducer"
      : "AtLeastOnceProducer"
    /** A read with a permit that is not the task's open producer of this reader's guarantee: a defect, saying why. */
    const refused = <S>(permit: RestorePermit<number, G, S>, partition: number): Effect.Effect<never> | undefined => {
      const why = notPermit(permit, partition) ??
        (wanted !== undefined && permit._tag !== wanted ? `it is an ${permit._tag}, not a ${wanted}` : undefined)
      return why === undefined ? undefined : Effect.dieMessage(
        `Skein invariant broken: restoring partition ${partition} without its task's ${
          options.guarantee ?? "fenced or at-least-once"
        } producer (an open one, of that partition): ${why}`
      )
    }
    const read: ChangelogReader<G>["read"] = (permit, partition, range, apply) =>
      refused(permit, partition) ?? (range.until <= range.from
        ? Effect.succeed(0)
        : Effect.gen(function*() {
        // A join that failed on the restore group's ACL is explained as the AuthorizationFailed it is.
        yield* Effect.catchAll(
          unlessStalled(Deferred.await(joined), `the reader's group ${options.groupId} did not join`),
          explainGroupFailure(kafka, options.groupId, options.groupPrefix)
        )
        if (crashed !== undefined) return yield* Effect.fail(crashed)
        if (readings.has(partition)) {
          return yield* Effect.dieMessage(`Skein invariant broken: partition ${partition} restored twice at once`)
        }
        const events = yield* Queue.unbounded<ReadEvent>()
        return yield* Effect.acquireUseRelease(
          Effect.sync(() => {
            const reading: Reading = { partition, position: range.from, events, applied: [] }
            readings.set(partition, reading)
            return reading
          }),
          (reading) =>
            Effect.zipRight(
              Effect.try({ try: () => resumeAt(reading), catch: toKafkaError("changelog seek") }),
              consume(reading, range.until, apply)
            ),
          release
        )
      }))

    return { read, isCrashed: Effect.sync(() => crashed !== undefined) }
  })
