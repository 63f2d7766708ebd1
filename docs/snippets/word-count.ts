/**
 * The README's word count, for the documentation's code blocks that use it
 * (```ts prelude=word-count): `WordCount`, its topics and a `Shout` transformer.
 * scripts/check-docs.mjs type-checks this file and the blocks against src/.
 */
import { Effect, Option, Schema } from "effect"
import { Topic, Transformer } from "skein"

export const Words = Topic.make({ name: "words", key: Schema.String, value: Schema.String })
export const Counts = Topic.make({ name: "word-counts", key: Schema.String, value: Topic.json(Schema.Number) })
export const Shouted = Topic.make({ name: "words-shouted", key: Schema.String, value: Schema.String })

export const WordCount = Transformer.make({
  name: "word-count",
  inputs: [Words],
  state: Schema.Number,
  transform: (record, count) => {
    const next = Option.getOrElse(count, () => 0) + 1
    return Effect.succeed({
      emit: [Topic.record(Counts, record.key, next)],
      state: Transformer.set(next)
    })
  }
})

/** A stateless transformer: each word in upper case. */
export const Shout = Transformer.stateless({
  name: "shout",
  inputs: [Words],
  transform: (record) => Effect.succeed({ emit: [Topic.record(Shouted, record.key, record.value.toUpperCase())] })
})

/** Bootstrap servers, as a program would read them. */
export const brokers: ReadonlyArray<string> = ["localhost:9092"]
