/**
 * The options of a batch run in memory (`runtime/batch.ts` `run`), for unit
 * tests without a broker: no dead letter topic, never stopped, no permits,
 * 1 MiB outputs to topics of one partition, with the task's state cache.
 */
import { Effect, Option } from "effect"
import type * as Batch from "../../src/internal/runtime/batch.ts"
import { makeMessageLimits } from "../../src/internal/runtime/outputs.ts"
import * as PartitionCounts from "../../src/internal/runtime/partitionCounts.ts"
import type { StateCache } from "../../src/internal/stores/StateCache.ts"

export const batchOptions = (cache: StateCache): Batch.Options => ({
  deadLetterTopic: Option.none(),
  stop: Effect.never,
  permits: Option.none(),
  messageLimits: makeMessageLimits(1024 * 1024, () => Effect.succeed(undefined)),
  partitionCounts: PartitionCounts.make(() => Effect.succeed(1)),
  cache
})
