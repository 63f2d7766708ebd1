/**
 * Creates an extractor's cursor topic, or grows it when tokens were appended.
 *
 * Tokens map to partitions by position, so the topic may only grow: a topic
 * with more partitions than tokens means a token was removed and every later
 * token would read another token's cursor.
 *
 * `createPartitions` is missing from the shared admin module, so growing is
 * the one kafkajs admin call made here.
 *
 * @internal
 */
import { Effect } from "effect"
import type { KafkaError } from "../../SkeinError.ts"
import type { KafkaAdmin } from "../kafka/admin.ts"
import type { Kafka } from "../kafka/client.ts"
import { toKafkaError } from "../kafka/errors.ts"
import { InvalidTokens } from "./errors.ts"

const createPartitions = (kafka: Kafka, topic: string, count: number): Effect.Effect<void, KafkaError> =>
  Effect.acquireUseRelease(
    Effect.tryPromise({
      try: async () => {
        const admin = kafka.admin()
        await admin.connect()
        return admin
      },
      catch: toKafkaError("admin.connect")
    }),
    (admin) =>
      Effect.tryPromise({
        try: () => admin.createPartitions({ topicPartitions: [{ topic, count }] }),
        catch: toKafkaError("createPartitions")
      }),
    (admin) => Effect.promise(() => admin.disconnect().catch(() => undefined))
  )

/** Validates the tokens, then makes the cursor topic have exactly one partition per token. */
export const ensure = (options: {
  readonly kafka: Kafka
  readonly admin: KafkaAdmin
  readonly extractor: string
  readonly topic: string
  readonly tokens: ReadonlyArray<string>
  readonly replicationFactor: number
}): Effect.Effect<void, KafkaError | InvalidTokens> =>
  Effect.gen(function*() {
    const { extractor, tokens, topic } = options
    if (tokens.length === 0) {
      return yield* new InvalidTokens({ reason: "Empty", extractor, detail: "an extractor needs at least one token" })
    }
    const duplicates = tokens.filter((token, i) => tokens.indexOf(token) !== i)
    if (duplicates.length > 0) {
      return yield* new InvalidTokens({
        reason: "Duplicate",
        extractor,
        detail: `each token must appear once, found ${[...new Set(duplicates)].map((t) => `"${t}"`).join(", ")} again`
      })
    }
    const created = yield* options.admin.partitionCount(topic).pipe(
      Effect.tap((count) =>
        count === undefined
          ? options.admin.createCompactedTopic(topic, tokens.length, options.replicationFactor)
          : Effect.void
      )
    )
    // Read the count again: another instance may have created the topic meanwhile, with other tokens.
    const count = created === undefined ? yield* options.admin.partitionCount(topic) : created
    if (count !== undefined && count > tokens.length) {
      return yield* new InvalidTokens({
        reason: "Removed",
        extractor,
        detail: `${topic} has ${count} partitions but there are ${tokens.length} tokens. ` +
          `Tokens map to cursor partitions by position: keep every token (append new ones at the end), ` +
          `or start over with a new extractor name.`
      })
    }
    if (count !== undefined && count < tokens.length) {
      yield* Effect.logInfo(`Growing ${topic} from ${count} to ${tokens.length} partitions for appended tokens`)
      yield* createPartitions(options.kafka, topic, tokens.length)
    }
  })
