/**
 * The cursor topic of an extractor: a compacted topic with one partition per
 * token (token `i` is partition `i`), keyed by token. A token's cursor is the
 * last committed record of its partition, written by the token's own
 * transactions only, together with the records of the page it follows.
 *
 * Reading a cursor requires the token's `FencedProducer`: only after fencing
 * is the partition's last stable offset final (no previous owner can still
 * commit a page).
 *
 * @internal
 */
import { Effect, Option, Schema } from "effect"
import type { Scope } from "effect"
import type { KafkaError } from "../../SkeinError.ts"
import { EncodeError } from "../../SkeinError.ts"
import type { Codec, EncodedRecord } from "../../Topic.ts"
import type { KafkaAdmin } from "../kafka/admin.ts"
import type { ChangelogReader, ChangelogRecord } from "../kafka/changelogReader.ts"
import type { FencedProducer } from "../kafka/producer.ts"
import { BadCursor } from "./errors.ts"

/** The cursor topic of extractor `name`. */
export const topicName = (applicationId: string, name: string): string => `${applicationId}-${name}-cursors`

/** A token's cursor partition. */
export interface TokenPartition<Token extends string> {
  readonly token: Token
  readonly partition: number
}

export interface Cursors<C> {
  readonly topic: string
  /** The cursor in its wire form (JSON text). */
  readonly encode: (cursor: C) => Effect.Effect<string, EncodeError>
  /** The record that commits `encoded` as the cursor of `owned`. */
  readonly record: (owned: TokenPartition<string>, encoded: string) => EncodedRecord
  /** The token's last committed cursor, read_committed up to the last stable offset. */
  readonly read: <S>(
    fenced: FencedProducer<number, string, S>,
    owned: TokenPartition<string>
  ) => Effect.Effect<Option.Option<C>, KafkaError | BadCursor>
}

/** The first window read back from the last stable offset; every transaction takes two offsets. */
const FIRST_WINDOW = 16

export const make = <C>(options: {
  readonly extractor: string
  readonly topic: string
  readonly codec: Codec<C>
  readonly admin: KafkaAdmin
  /** The reader reads one partition at a time: callers share it through `make`'s lock. */
  readonly reader: ChangelogReader<"exactly-once">
}): Effect.Effect<Cursors<C>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const lock = yield* Effect.makeSemaphore(1)
    const encode = Schema.encode(options.codec)
    const decode = Schema.decode(options.codec)

    /** The last committed record in [from, until) of the partition, if any. */
    const lastIn = <S>(fenced: FencedProducer<number, string, S>, partition: number, from: number, until: number) =>
      Effect.suspend(() => {
        let last: ChangelogRecord | undefined
        return options.reader.read(fenced, partition, { from, until }, (records) =>
          Effect.sync(() => {
            last = records[records.length - 1] ?? last
          })).pipe(Effect.map(() => Option.fromNullable(last)))
      })

    /**
     * Reads back from the last stable offset in growing windows: the cursor
     * is normally the record right before the last commit marker, but aborted
     * transactions (crashed or fenced owners) leave records the read skips.
     */
    const lastCommitted = <S>(
      fenced: FencedProducer<number, string, S>,
      partition: number
    ): Effect.Effect<Option.Option<ChangelogRecord>, KafkaError> =>
      Effect.gen(function*() {
        const range = yield* options.admin.offsetRange(options.topic, partition)
        let window = FIRST_WINDOW
        let until = range.end
        while (until > range.low) {
          const from = Math.max(range.low, until - window)
          const found = yield* lastIn(fenced, partition, from, until)
          if (Option.isSome(found)) return found
          until = from
          window *= 4
        }
        return Option.none()
      })

    const toCursor = (owned: TokenPartition<string>, record: ChangelogRecord): Effect.Effect<C, BadCursor> => {
      const bad = (reason: BadCursor["reason"], cause: unknown) =>
        new BadCursor({
          reason,
          extractor: options.extractor,
          token: owned.token,
          topic: options.topic,
          partition: owned.partition,
          offset: record.offset,
          cause
        })
      const key = record.key?.toString("utf8") ?? null
      if (key !== owned.token) return Effect.fail(bad("WrongToken", key))
      if (record.value === null) return Effect.fail(bad("Tombstone", null))
      return Effect.mapError(decode(record.value.toString("utf8")), (cause) => bad("Undecodable", cause))
    }

    return {
      topic: options.topic,
      encode: (cursor) => Effect.mapError(encode(cursor), (cause) => new EncodeError({ topic: options.topic, cause })),
      record: (owned, encoded) => ({
        topic: options.topic,
        partition: owned.partition,
        key: owned.token,
        value: encoded
      }),
      read: (fenced, owned) =>
        lock.withPermits(1)(lastCommitted(fenced, owned.partition)).pipe(
          Effect.flatMap(Option.match({
            onNone: () => Effect.succeed(Option.none<C>()),
            onSome: (record) => Effect.map(toCursor(owned, record), Option.some)
          }))
        )
    }
  })
