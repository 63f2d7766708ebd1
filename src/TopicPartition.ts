/**
 * Identifiers for topic partitions and offsets.
 *
 * @since 0.1.0
 */

/**
 * A partition of a topic.
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
 * @since 0.1.0
 * @category constructors
 */
export const make = (topic: string, partition: number): TopicPartition => ({ topic, partition })

/**
 * A stable string form, usable as a `Map` key: `topic:partition`.
 *
 * @since 0.1.0
 * @category utils
 */
export const key = (tp: TopicPartition): string => `${tp.topic}:${tp.partition}`

/**
 * The offset of the next record to consume for a partition.
 *
 * @since 0.1.0
 * @category models
 */
export interface PartitionOffset extends TopicPartition {
  readonly offset: number
}
