/**
 * Loads a topology's global tables (`GlobalKTable.from`) on this instance
 * and keeps them up to date: every partition of each table's topic, read
 * committed, by a reader of its own in a private consumer group (the only
 * member, assigned every partition: `kafka/changelogTail.ts`), so every
 * instance reads the whole topic, as Kafka Streams' global stream thread.
 *
 * `start` returns once each partition has been read up to the end offset it
 * had when the load began (the bootstrap: no stream record is joined before),
 * and keeps reading in the scope's background; `failed` fails when a reader
 * crashes, so that the run stops with it. A record without a key is skipped;
 * one that does not decode is skipped with a warning (a global table is read
 * apart from any task: it has no dead letter topic). The table is kept in
 * memory and loaded in full at each start: its topic is its only copy.
 *
 * @internal
 */
import { randomUUID } from "node:crypto"
import { Deferred, Effect, Either, Queue } from "effect"
import type { Scope } from "effect"
import { TopicNotFound } from "../../SkeinError.ts"
import type { KafkaError } from "../../SkeinError.ts"
import type { KafkaAdmin } from "../kafka/admin.ts"
import * as ChangelogTail from "../kafka/changelogTail.ts"
import type { Kafka } from "../kafka/client.ts"
import type { GlobalTable } from "../streams/compile.ts"

/** The loaded global tables: `failed` fails when a table's reader crashed. */
export interface Loaded {
  readonly failed: Effect.Effect<never, KafkaError>
}

/** Reads `table`'s partition from `low` on into its store; `ready` completes once it reaches `end`. */
const follow = (
  tail: ChangelogTail.ChangelogTail,
  table: GlobalTable,
  partition: number,
  range: { readonly low: number; readonly end: number },
  ready: Deferred.Deferred<void>
): Effect.Effect<void, KafkaError, Scope.Scope> =>
  Effect.gen(function*() {
    let skipped = 0
    const events = yield* tail.follow(partition, range.low)
    if (range.end <= range.low) yield* Deferred.succeed(ready, undefined)
    const reached = (next: number) => next >= range.end ? Deferred.succeed(ready, undefined) : Effect.void
    yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(events), (event) => {
      if (event._tag === "Position") return reached(event.next)
      const warnings: Array<string> = []
      for (const record of event.records) {
        const applied = table.store.apply(record.key, record.value)
        if (Either.isLeft(applied) && applied.left._tag === "Undecodable") {
          skipped++
          if (skipped === 1 || skipped % 1_000 === 0) {
            warnings.push(
              `global table ${table.name}: skipped the record ${table.topic}/${partition}@${record.offset}, whose ` +
                `${applied.left.failure.part} does not decode (${skipped} so far): ${applied.left.failure.cause.message}`
            )
          }
        }
      }
      event.ack()
      return Effect.zipRight(Effect.forEach(warnings, (warning) => Effect.logWarning(warning)), reached(event.next))
    })))
  })

/**
 * Loads `tables` (their topics read from the beginning) and returns once
 * every partition is read to its end offset at the start; the readers run
 * on in the scope.
 */
export const start = (
  kafka: Kafka,
  admin: KafkaAdmin,
  tables: ReadonlyArray<GlobalTable>,
  applicationId: string
): Effect.Effect<Loaded, KafkaError | TopicNotFound, Scope.Scope> =>
  Effect.gen(function*() {
    const crashes: Array<Effect.Effect<never, KafkaError>> = []
    for (const table of tables) {
      const began = Date.now()
      const tail = yield* ChangelogTail.make(kafka, { topic: table.topic, groupId: `${applicationId}-global-${randomUUID()}` })
      crashes.push(Deferred.await(tail.crashed))
      const first = yield* admin.offsetRange(table.topic, 0)
      if (first.partitions === 0) return yield* new TopicNotFound({ topic: table.topic })
      const readies: Array<Deferred.Deferred<void>> = []
      let records = 0
      for (let partition = 0; partition < first.partitions; partition++) {
        const range = partition === 0 ? first : yield* admin.offsetRange(table.topic, partition)
        records += range.end - range.low
        const ready = yield* Deferred.make<void>()
        readies.push(ready)
        yield* follow(tail, table, partition, range, ready)
      }
      yield* Effect.logInfo(
        `loading global table ${table.name} from ${table.topic} (${first.partitions} partitions, up to ${records} records)`
      )
      // The bootstrap, or the reader's crash.
      yield* Effect.raceFirst(Effect.forEach(readies, Deferred.await, { discard: true }), Deferred.await(tail.crashed))
      yield* Effect.logInfo(`loaded global table ${table.name}: ${table.store.size} keys in ${Date.now() - began} ms`)
    }
    return { failed: crashes.length === 0 ? Effect.never : Effect.raceAll(crashes) }
  })
