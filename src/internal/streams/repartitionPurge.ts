/**
 * The purge of a topology's repartition topics, as Kafka Streams does it
 * (`repartition.purge.interval.ms`): a repartition topic keeps its records
 * without a time limit (`retention.ms` -1), because the time a record carries
 * is its event time, which may be days or years old, so a time limit would
 * delete records before they are read; instead, every `interval`, the records
 * below the reading sub-topology's committed offsets are deleted. Several
 * instances purge the same offsets: DeleteRecords below an offset already
 * deleted is a no-op. A purge that fails is logged and counted and tried again
 * at the next interval; the records stay until then.
 *
 * @internal
 */
import { Duration, Effect, Metric } from "effect"
import type { KafkaAdmin } from "../kafka/admin.ts"

/** A repartition topic and the consumer group of the sub-topology that reads it. */
export interface Purged {
  readonly topic: string
  readonly groupId: string
}

/** How often the records already read are deleted (Kafka Streams' default, 30 s). */
export const defaultInterval: Duration.Duration = Duration.seconds(30)

/** Purges that failed (a missing Delete ACL, a broker away). */
export const purgeFailures = Metric.counter("skein_streams_repartition_purge_failures_total", {
  description: "Purges of a repartition topic's read records that failed (tried again at the next interval)",
  incremental: true
})

/** Deletes, once, the records of each topic below its reader's committed offsets. */
export const purgeOnce = (admin: Pick<KafkaAdmin, "groupOffsets" | "deleteRecordsBefore">, topics: ReadonlyArray<Purged>): Effect.Effect<void> =>
  Effect.forEach(topics, ({ groupId, topic }) =>
    admin.groupOffsets(groupId, topic).pipe(
      Effect.map((offsets) => offsets.filter((o) => o.offset > 0)),
      Effect.flatMap((offsets) => offsets.length === 0 ? Effect.void : admin.deleteRecordsBefore(topic, offsets)),
      Effect.catchAll((error) =>
        Effect.zipRight(
          Metric.increment(Metric.tagged(purgeFailures, "topic", topic)),
          Effect.logWarning(
            `could not delete the records of repartition topic ${topic} that ${groupId} has read: ${error.message}; ` +
              `they stay (the topic has no time limit) until a purge succeeds (every ${Duration.format(defaultInterval)})`
          )
        )
      )
    ), { discard: true })

/** Purges every `interval`, forever. */
export const purgeEvery = (
  admin: Pick<KafkaAdmin, "groupOffsets" | "deleteRecordsBefore">,
  topics: ReadonlyArray<Purged>,
  interval: Duration.Duration = defaultInterval
): Effect.Effect<never> => Effect.forever(Effect.zipRight(Effect.sleep(interval), purgeOnce(admin, topics)))
