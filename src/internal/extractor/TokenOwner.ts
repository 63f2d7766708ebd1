/**
 * Owning one token: the extractor's counterpart of a transformer's task.
 *
 * Startup order, enforced by the types: producer -> fence (a
 * `FencedProducer`) -> the token's committed cursor is final and read
 * read_committed -> read pages from it. Every page is one transaction: the
 * page's records and the next cursor commit together or not at all.
 *
 * Interrupting an owner abandons a read in flight (nothing of it was sent)
 * but waits for a commit in flight (commits are uninterruptible), then
 * releases the producer. A commit fenced by a newer owner means the token
 * migrated: the owner stops, and starts over (fence, read the cursor) if it
 * still owns the token after a grace period (the group may not have told it
 * yet that the token moved) or as soon as a new assignment includes it.
 *
 * @internal
 */
import { Duration, Effect, Option, Schedule } from "effect"
import type { EncodeError, KafkaError } from "../../SkeinError.ts"
import { TaskMigrated } from "../../SkeinError.ts"
import type { Kafka } from "../kafka/client.ts"
import * as Producer from "../kafka/producer.ts"
import type { FencedProducer } from "../kafka/producer.ts"
import type { Cursors, TokenPartition } from "./cursors.ts"
import type { BadCursor } from "./errors.ts"
import type { Extractor, Page } from "./model.ts"
import { ReadTimeout } from "./errors.ts"
import * as RateLimit from "./rateLimit.ts"
import type { ExtractorStats } from "./stats.ts"

/** What every token owner of an extractor shares. */
export interface OwnerContext<Token extends string, C, E, R> {
  readonly kafka: Kafka
  readonly applicationId: string
  /** The extractor's consumer group (transactions carry no offsets, only the group id). */
  readonly groupId: string
  readonly extractor: Extractor<Token, C, E, R>
  readonly cursors: Cursors<C>
  readonly transactionTimeout: Duration.Duration
  readonly maxMessageBytes: number
  /** How long a migrated token waits before it is started again while still assigned here. */
  readonly migrationGrace: Duration.Duration
  /** Tokens waiting out their grace after a migration: a new assignment restarts them at once. */
  readonly migrated: Set<string>
  readonly stats: ExtractorStats
}

/** The static transactional id of a token: a new owner fences the old one. */
export const transactionalId = (applicationId: string, extractor: string, token: string): string =>
  `${applicationId}-extract-${extractor}-${token}`

type OwnerError<E> = E | KafkaError | EncodeError | BadCursor | ReadTimeout

/** One read of the source, with the extractor's timeout and retry rules. */
const readPage = <Token extends string, C, E, R>(context: OwnerContext<Token, C, E, R>, token: Token) => {
  const extractor = context.extractor
  return (cursor: C) => {
    const read = extractor.read(token, cursor)
    const timed: Effect.Effect<Page<C>, E | ReadTimeout, R> = Option.match(extractor.timeout, {
      onNone: () => read,
      onSome: (timeout) =>
        Effect.timeoutFail(read, {
          duration: timeout,
          onTimeout: () => new ReadTimeout({ extractor: extractor.name, token, timeout })
        })
    })
    return Option.match(extractor.retry, {
      onNone: () => timed,
      onSome: (schedule) => Effect.retry(timed, schedule)
    })
  }
}

/** Reads and commits pages from `start` until interrupted, migrated or failed. */
const extract = <Token extends string, C, E, R, S>(
  context: OwnerContext<Token, C, E, R>,
  owned: TokenPartition<Token>,
  fenced: FencedProducer<number, string, S>,
  start: C
): Effect.Effect<never, OwnerError<E> | TaskMigrated, R> =>
  Effect.gen(function*() {
    const { cursors, extractor, stats } = context
    const limiter = yield* RateLimit.make(extractor.rateLimit)
    const poll = yield* Schedule.driver(extractor.poll)
    const read = readPage(context, owned.token)
    let cursor = start
    let encoded = yield* cursors.encode(start)
    for (;;) {
      yield* limiter.take
      const page = yield* read(cursor)
      stats.pagesRead++
      const records = yield* Effect.forEach(page.emit, (record) => record.encode())
      const next = yield* cursors.encode(page.next)
      const idle = records.length === 0 && next === encoded
      if (!idle) {
        yield* fenced.commit(
          [...records, cursors.record(owned, next)],
          { groupId: context.groupId, offsets: [] }
        ).pipe(
          // Counted before an interruption waiting for the commit can take over.
          Effect.tapError((error) => Effect.sync(() => error instanceof TaskMigrated && stats.migrations++)),
          Effect.uninterruptible
        )
        stats.pagesCommitted++
        stats.recordsEmitted += records.length
        stats.committed.set(owned.token, next)
      } else {
        stats.emptyPolls++
      }
      cursor = page.next
      encoded = next
      // A "page" that neither emits nor moves the cursor is drained: reading again at once would spin.
      if (page._tag === "Page" && !idle) {
        yield* poll.reset
      } else if (Option.isNone(yield* Effect.option(poll.next(undefined)))) {
        yield* Effect.logInfo(`Token ${owned.token} is drained and its poll schedule ended: it stops reading`)
        return yield* Effect.never
      }
    }
  })

/**
 * One ownership of the token: producer -> fence -> committed cursor -> pages.
 * The fenced producer is the ownership's own (`Producer.use`): its type does
 * not leave it, so a later ownership cannot read a cursor with it.
 */
const ownOnce = <Token extends string, C, E, R>(
  context: OwnerContext<Token, C, E, R>,
  owned: TokenPartition<Token>
): Effect.Effect<never, OwnerError<E> | TaskMigrated, R> =>
  Producer.use(context.kafka, {
    partition: owned.partition,
    transactionalId: transactionalId(context.applicationId, context.extractor.name, owned.token),
    transactionTimeout: context.transactionTimeout,
    maxMessageBytes: context.maxMessageBytes
  }, (producer) => Effect.gen(function*() {
    const { stats } = context
    const fenced = yield* producer.fence
    const committed = yield* context.cursors.read(fenced, owned)
    const start = Option.getOrElse(committed, () => context.extractor.initial)
    stats.tokensStarted++
    stats.owned.add(owned.token)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        stats.tokensStopped++
        stats.owned.delete(owned.token)
      })
    )
    yield* Effect.logDebug(
      Option.isSome(committed) ? `Token ${owned.token} resumes from its committed cursor` : `Token ${owned.token} starts`
    )
    return yield* extract(context, owned, fenced, start)
  }))

/**
 * Owns a token until interrupted or until a fatal error. A migration is
 * recoverable: it never ends the run.
 */
export const own = <Token extends string, C, E, R>(
  context: OwnerContext<Token, C, E, R>,
  owned: TokenPartition<Token>
): Effect.Effect<never, OwnerError<E>, R> =>
  ownOnce(context, owned).pipe(
    Effect.catchIf((error): error is TaskMigrated => error instanceof TaskMigrated, (migrated) =>
      Effect.gen(function*() {
        yield* Effect.logWarning(
          `Token ${owned.token} was fenced by a newer owner; ` +
            `starting it again in ${Duration.format(context.migrationGrace)} if it is still assigned here`,
          migrated.cause
        )
        context.migrated.add(owned.token)
        yield* Effect.sleep(context.migrationGrace).pipe(
          Effect.ensuring(Effect.sync(() => context.migrated.delete(owned.token)))
        )
      })),
    Effect.forever,
    Effect.tapErrorCause((cause) => Effect.logDebug(`Token ${owned.token} failed`, cause)),
    Effect.annotateLogs({ extractor: context.extractor.name, token: owned.token })
  )
