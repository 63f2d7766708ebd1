/**
 * Identifiers for topic partitions and offsets.
 *
 * @since 0.1.0
 */

/**
 * A partition of a topic.
 *
 * @example
 * ```ts
 * import type { TopicPartition } from "skein"
 *
 * const first: TopicPartition.TopicPartition = { topic: "words", partition: 0 }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface TopicPartition {
  readonly topic: string
  readonly partition: number
}

/**
 * Builds a `TopicPartition`.
 *
 * @example
 * ```ts
 * import { TopicPartition } from "skein"
 *
 * TopicPartition.make("words", 0) // { topic: "words", partition: 0 }
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (topic: string, partition: number): TopicPartition => ({ topic, partition })

/**
 * A stable string form, usable as a `Map` key: `topic:partition`.
 *
 * @example
 * ```ts
 * import { TopicPartition } from "skein"
 *
 * const lag = new Map<string, number>()
 * lag.set(TopicPartition.key(TopicPartition.make("words", 0)), 42) // key "words:0"
 * ```
 *
 * @since 0.1.0
 * @category utils
 */
export const key = (tp: TopicPartition): string => `${tp.topic}:${tp.partition}`

/**
 * The offset of the next record to consume for a partition.
 *
 * @example
 * ```ts
 * import type { TopicPartition } from "skein"
 *
 * // partition 0 of "words" resumes at offset 1200
 * const next: TopicPartition.PartitionOffset = { topic: "words", partition: 0, offset: 1200 }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface PartitionOffset extends TopicPartition {
  readonly offset: number
}
