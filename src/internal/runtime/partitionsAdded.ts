/**
 * Partitions added to a topic while a runner runs. The partition counts are
 * checked at startup (`validation.ts`); an input topic that gains partitions
 * later gets tasks of partitions its changelog (or run store) does not have.
 * A task's offset lookups see the partitions that exist (the admin's
 * metadata is looked up again for each request), so a task whose partition
 * is missing from a topic it reads fails here with the startup's typed
 * mismatch errors, whose messages carry the fix: never a missing partition
 * read as empty.
 *
 * @internal
 */
import { Effect } from "effect"
import { ChangelogPartitionMismatch, KafkaError, PartitionCountMismatch } from "../../SkeinError.ts"
import type { TopicNotFound } from "../../SkeinError.ts"
import type { KafkaAdmin } from "../kafka/admin.ts"

/** The input topics' partition count, or `PartitionCountMismatch` when they differ now. */
const inputCount = (
  admin: KafkaAdmin,
  inputTopics: ReadonlyArray<string>
): Effect.Effect<number, KafkaError | TopicNotFound | PartitionCountMismatch> =>
  Effect.flatMap(admin.partitionCounts(inputTopics), (counts) => {
    const [count, ...others] = new Set(counts.values())
    return count === undefined || others.length > 0
      ? Effect.fail(new PartitionCountMismatch({ counts: [...counts].map(([topic, partitions]) => ({ topic, partitions })) }))
      : Effect.succeed(count)
  })

/** Assigned from older metadata than the topics': retried like any broker error at a task's start. */
const notYetKnown = (topic: string, partition: number, partitions: number) =>
  new KafkaError({
    reason: "Unknown",
    operation: "fetchTopicOffsets",
    cause: new Error(`partition ${partition} of ${topic} does not exist (it has ${partitions} partitions)`)
  })

/**
 * Task `partition` reads input `topic`, which has `partitions` partitions
 * only: the inputs' counts differ now (`PartitionCountMismatch`).
 */
export const inputMissing = (
  admin: KafkaAdmin,
  inputTopics: ReadonlyArray<string>,
  topic: string,
  partition: number,
  partitions: number
): Effect.Effect<never, KafkaError | TopicNotFound | PartitionCountMismatch> =>
  Effect.flatMap(inputCount(admin, inputTopics), () => Effect.fail(notYetKnown(topic, partition, partitions)))

/**
 * Task `partition` restores `store` (a changelog or a run store), which has
 * `partitions` partitions only: the inputs gained partitions
 * (`ChangelogPartitionMismatch`), or their counts differ now
 * (`PartitionCountMismatch`).
 */
export const storeMissing = (
  admin: KafkaAdmin,
  inputTopics: ReadonlyArray<string>,
  store: string,
  partition: number,
  partitions: number
): Effect.Effect<never, KafkaError | TopicNotFound | PartitionCountMismatch | ChangelogPartitionMismatch> =>
  Effect.flatMap(
    inputCount(admin, inputTopics),
    (expected): Effect.Effect<never, KafkaError | ChangelogPartitionMismatch> =>
      expected !== partitions
        ? Effect.fail(new ChangelogPartitionMismatch({ changelog: store, expected, actual: partitions }))
        : Effect.fail(notYetKnown(store, partition, partitions))
  )
