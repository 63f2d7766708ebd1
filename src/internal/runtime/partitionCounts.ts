/**
 * The partition counts of a runner's output topics, for outputs that name
 * their partition: looked up once per topic, and again before an output is
 * refused (partitions may have been added since).
 *
 * @internal
 */
import { Effect } from "effect"
import type { KafkaError } from "../../SkeinError.ts"

/** A topic's partition count; `null` for a topic that does not exist (the producer reports it). */
export type Count = number | null

export interface PartitionCounts {
  /** The count once looked up; `undefined` before. */
  readonly known: (topic: string) => Count | undefined
  /** The known count, or looked up (once). */
  readonly lookup: (topic: string) => Effect.Effect<Count, KafkaError>
  /** Looked up again, whatever is known. */
  readonly refresh: (topic: string) => Effect.Effect<Count, KafkaError>
}

export const make = (
  partitionCount: (topic: string) => Effect.Effect<number | undefined, KafkaError>
): PartitionCounts => {
  const counts = new Map<string, Count>()
  const refresh = (topic: string) =>
    Effect.map(partitionCount(topic), (count) => {
      const known = count ?? null
      counts.set(topic, known)
      return known
    })
  return {
    known: (topic) => counts.get(topic),
    lookup: (topic) => {
      const known = counts.get(topic)
      return known !== undefined ? Effect.succeed(known) : refresh(topic)
    },
    refresh
  }
}

/** Whether `partition` is one of the `count` partitions (any integer from 0 when the count is unknown). */
export const inRange = (partition: number, count: Count): boolean =>
  Number.isInteger(partition) && partition >= 0 && (count === null || partition < count)
