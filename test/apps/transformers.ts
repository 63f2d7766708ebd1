/**
 * The transformers under test. The app entry points (`echo.ts`,
 * `aggregate.ts`, `pipeline.ts`) run one each; tests import them directly.
 */
import { Effect, Option, Schema } from "effect"
import { Topic, Transformer } from "../../src/index.ts"
import { Aggregate, aggregate, audit, Audited, AuditState, InputValue } from "./model.ts"

/** Input and output topic names of an app. */
export interface Names {
  readonly input: string
  readonly output: string
}

/** Stateless copier: every input record to the output, same key and value. */
export const echo = (names: Names) => {
  const input = Topic.make({ name: names.input, key: Schema.String, value: Topic.json(InputValue) })
  const output = Topic.make({ name: names.output, key: Schema.String, value: Topic.json(InputValue) })
  return Transformer.stateless({
    name: "echo",
    inputs: [input],
    transform: (record) => Effect.succeed({ emit: [Topic.record(output, record.key, record.value)] })
  })
}

/** Per-key count/sum/min/max, emitting the new aggregate for every record. */
export const aggregator = (names: Names) => {
  const input = Topic.make({ name: names.input, key: Schema.String, value: Topic.json(InputValue) })
  const output = Topic.make({ name: names.output, key: Schema.String, value: Topic.json(Aggregate) })
  return Transformer.make({
    name: "aggregate",
    inputs: [input],
    state: Aggregate,
    transform: (record, state) => {
      const next = aggregate(Option.getOrUndefined(state), record.value)
      return Effect.succeed({ emit: [Topic.record(output, record.key, next)], state: Transformer.set(next) })
    }
  })
}

/** Pipeline stage 2: consumes stage-1 aggregates, counts them per key and emits them audited. */
export const auditor = (names: Names) => {
  const input = Topic.make({ name: names.input, key: Schema.String, value: Topic.json(Aggregate) })
  const output = Topic.make({ name: names.output, key: Schema.String, value: Topic.json(Audited) })
  return Transformer.make({
    name: "audit",
    inputs: [input],
    state: AuditState,
    transform: (record, state) => {
      const next = audit(Option.getOrUndefined(state), record.value)
      return Effect.succeed({
        emit: [Topic.record(output, record.key, { ...record.value, ...next })],
        state: Transformer.set(next)
      })
    }
  })
}
