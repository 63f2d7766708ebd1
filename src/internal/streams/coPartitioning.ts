/**
 * A join's inputs must be co-partitioned: a key's stream records and table
 * records are on the same partition number of their topics, so one task
 * holds both. Equal partition counts are what can be checked (the producers'
 * partitioner is the other half: Skein's and Kafka's default agree). Checked
 * at startup, before any record is read.
 *
 * @internal
 */
import { Either } from "effect"
import { ConfigurationError } from "../../SkeinError.ts"
import type { JoinInputs } from "./compile.ts"

/** Checks each join's topics against their partition counts; the first mismatch names both sides and the fix. */
export const check = (
  joins: ReadonlyArray<JoinInputs>,
  partitionCounts: ReadonlyMap<string, number>
): Either.Either<void, ConfigurationError> => {
  for (const join of joins) {
    const sides = [...join.streamTopics, ...join.tableTopics].map((topic) => ({ topic, partitions: partitionCounts.get(topic) }))
    const counts = new Set(sides.map((side) => side.partitions))
    if (counts.size <= 1) continue
    const list = (topics: ReadonlyArray<string>) =>
      topics.map((topic) => `${topic} (${partitionCounts.get(topic) ?? "unknown"} partitions)`).join(", ")
    return Either.left(
      new ConfigurationError({
        problem: `The join "${join.name}" reads the stream ${list(join.streamTopics)} and the table ${list(join.tableTopics)}: ` +
          "a join needs its inputs co-partitioned (equal partition counts), so that a key's stream and table records meet in one task",
        fix: `Give both topics the same partition count, or repartition the stream to the table's count before the join ` +
          `(KStream.repartition({ key, value, partitions: ${partitionCounts.get(join.tableTopics[0] ?? "") ?? "N"} }) or a groupBy)`
      })
    )
  }
  return Either.right(undefined)
}
