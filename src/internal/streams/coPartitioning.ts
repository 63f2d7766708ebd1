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
    const [left, right] = join.labels ?? ["stream", "table"]
    const wanted = partitionCounts.get(join.tableTopics[0] ?? "") ?? "N"
    return Either.left(
      new ConfigurationError({
        problem: `The join "${join.name}" reads the ${left} ${list(join.streamTopics)} and the ${right} ${list(join.tableTopics)}: ` +
          `a join needs its inputs co-partitioned (equal partition counts), so that a key's ${left} and ${right} records meet in one task`,
        fix: join.labels === undefined || right === "right stream"
          ? `Give both topics the same partition count, or repartition the ${left} to the ${right}'s count before the join ` +
            `(KStream.repartition({ key, value, partitions: ${wanted} })${join.labels === undefined ? " or a groupBy" : ""})`
          : `Give both topics the same partition count (${wanted}), or write one table to a topic with that count ` +
            `(KTable.toStream, KStream.repartition({ key, value, partitions: ${wanted} })) and join KTable.from of that topic`
      })
    )
  }
  return Either.right(undefined)
}
