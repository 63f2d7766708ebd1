/**
 * An extractor instance: prepares the cursor topic, joins the extractor's
 * group over it and owns the tokens the group assigns to it, one fiber per
 * token.
 *
 * Ownership is the group assignment of the cursor topic: partition `i` is
 * token `i`. The group consumer never fetches (every assigned partition stays
 * paused); it only heartbeats and reports assignments. On a rebalance every
 * owned token stops (a commit in flight finishes first); on an assignment the
 * assigned tokens start (fence, read the cursor, extract). Correctness rests
 * on fencing, not on the rebalance being drained: kafkajs rejoins without
 * waiting for us, and a new owner's fence aborts anything still in flight.
 *
 * @internal
 */
import { Effect, FiberMap, Queue } from "effect"
import type { Scope } from "effect"
import { randomUUID } from "node:crypto"
import type { SkeinConfig } from "../../SkeinConfig.ts"
import * as Admin from "../kafka/admin.ts"
import * as ChangelogReader from "../kafka/changelogReader.ts"
import { makeKafka } from "../kafka/client.ts"
import * as Consumer from "../kafka/consumer.ts"
import { surface } from "../kafka/errors.ts"
import * as CursorTopic from "./cursorTopic.ts"
import * as Cursors from "./cursors.ts"
import type { Extractor, ExtractorError } from "./model.ts"
import { makeStats } from "./stats.ts"
import type { ExtractorStats } from "./stats.ts"
import * as TokenOwner from "./TokenOwner.ts"
import * as TransactionalIds from "../runtime/TransactionalIds.ts"

export { makeStats }
export type { ExtractorStats }

/** The consumer group whose assignment of the cursor topic is token ownership. */
export const groupId = (applicationId: string, extractor: string): string => `${applicationId}-extract-${extractor}`

export const run = <Token extends string, C, E, R>(
  extractor: Extractor<Token, C, E, R>,
  config: SkeinConfig,
  stats: ExtractorStats = makeStats()
): Effect.Effect<never, ExtractorError | E, R | Scope.Scope> =>
  Effect.gen(function*() {
    const kafka = yield* makeKafka(config)
    // Before any token's producer fences: no other run of this process uses these transactional ids.
    yield* TransactionalIds.claim(
      { applicationId: config.applicationId, description: `extractor "${extractor.name}"` },
      extractor.tokens.map((token) => TokenOwner.transactionalId(config.applicationId, extractor.name, token))
    )
    const admin = yield* Admin.make(kafka)
    const topic = Cursors.topicName(config.applicationId, extractor.name)
    yield* CursorTopic.ensure({
      kafka,
      admin,
      extractor: extractor.name,
      topic,
      tokens: extractor.tokens,
      replicationFactor: config.changelogReplicationFactor
    })
    const reader = yield* ChangelogReader.make(kafka, {
      topic,
      groupId: `${config.applicationId}-extract-${extractor.name}-cursors-${randomUUID()}`,
      groupPrefix: config.applicationId,
      guarantee: "exactly-once"
    })
    const cursors = yield* Cursors.make({ extractor: extractor.name, topic, codec: extractor.cursor, admin, reader })
    const group = groupId(config.applicationId, extractor.name)
    const membership = yield* Consumer.make(kafka, {
      groupId: group,
      topics: [topic],
      sessionTimeout: config.sessionTimeout,
      rebalanceTimeout: config.rebalanceTimeout,
      heartbeatInterval: config.heartbeatInterval
    })
    // Acquired after the membership: owners stop (commits in flight finish) before the group is left.
    const owners = yield* FiberMap.make<Token, never, ExtractorError | E>()
    const context: TokenOwner.OwnerContext<Token, C, E, R> = {
      kafka,
      applicationId: config.applicationId,
      groupId: group,
      extractor,
      cursors,
      transactionTimeout: config.transactionTimeout,
      maxMessageBytes: config.maxMessageBytes,
      migrationGrace: config.sessionTimeout,
      migrated: new Set(),
      stats
    }

    const assign = (partitions: ReadonlyArray<number>) =>
      Effect.gen(function*() {
        const assigned = new Map<Token, number>()
        for (const partition of partitions) {
          const token = extractor.tokens[partition]
          if (token === undefined) {
            yield* Effect.logWarning(
              `Partition ${partition} of ${topic} has no token here: another instance runs with more tokens`
            )
          } else {
            assigned.set(token, partition)
          }
        }
        for (const [token] of owners) {
          if (!assigned.has(token)) yield* FiberMap.remove(owners, token)
        }
        for (const [token, partition] of assigned) {
          // Owned tokens keep running; a migrated one waiting out its grace starts over now.
          yield* FiberMap.run(owners, token, TokenOwner.own(context, { token, partition }), {
            onlyIfMissing: !context.migrated.has(token)
          })
        }
        yield* Effect.logDebug(`Owning tokens ${[...assigned.keys()].join(", ") || "(none)"}`)
      })

    const handle = (event: Consumer.ConsumerEvent): Effect.Effect<void, ExtractorError, R> => {
      switch (event._tag) {
        case "Crashed":
          return Effect.fail(event.error)
        case "Rebalancing":
          return Effect.sync(() => stats.rebalances++).pipe(Effect.zipRight(FiberMap.clear(owners)))
        case "Assigned":
          return assign(event.partitions.filter((tp) => tp.topic === topic).map((tp) => tp.partition))
        case "Batch":
          // Never expected: every assigned partition stays paused.
          return Effect.sync(() => event.batch.complete("Dropped"))
        case "Filtered":
          return Effect.void
      }
    }

    const events = Effect.forever(Effect.flatMap(Queue.take(membership.events), handle))
    return yield* Effect.raceFirst(events, Effect.zipRight(FiberMap.join(owners), Effect.never))
  }).pipe(Effect.mapError(surface), Effect.annotateLogs({ applicationId: config.applicationId, extractor: extractor.name }))
