/**
 * The stateful count many tests run: string records in, each key's running
 * count out (JSON numbers), the count kept in the transformer's state.
 */
import { Effect, Option, Schema } from "effect"
import { Topic, Transformer } from "../../src/index.ts"

/** Counts the records of each key of `input`, writing each new count to `output`. */
export const countOf = (input: string, output: string, name = "count") => {
  const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
  const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Schema.Number) })
  return Transformer.make({
    name,
    inputs: [In],
    state: Schema.Number,
    transform: (record, count) => {
      const next = Option.getOrElse(count, () => 0) + 1
      return Effect.succeed({ emit: [Topic.record(Out, record.key, next)], state: Transformer.set(next) })
    }
  })
}
