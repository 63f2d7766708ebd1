/**
 * Type-level tests, checked by `npm run typecheck` (part of `npm test`): the
 * error rules of docs/error-handling.md ("Poison records and error rules") compile inline in
 * `rules: [...]` without annotations, and a rule for a tag the transform
 * cannot fail with does not. Each `@ts-expect-error` fails the type check if
 * the line below it compiles.
 */
import { Effect, Option, Schedule, Schema } from "effect"
import { ErrorRule, Topic, Transformer } from "../../src/index.ts"

class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", { value: Schema.String }) {}
class Invalid extends Schema.TaggedError<Invalid>()("Invalid", { value: Schema.String }) {}

const Words = Topic.make({ name: "words", key: Schema.String, value: Schema.String })

declare const lookup: (word: string) => Effect.Effect<number, Unavailable | Invalid>

/** The snippet of docs/error-handling.md, verbatim apart from the transform. */
export const readmeRules = Transformer.make({
  name: "readme-rules",
  inputs: [Words],
  state: Schema.Number,
  transform: (record, count) =>
    Effect.map(lookup(record.value), (n) => ({ state: Transformer.set(Option.getOrElse(count, () => 0) + n) })),
  rules: [
    // retried with the state as it was before the failed attempt, then dead-lettered
    ErrorRule.tagged("Unavailable", { retry: Schedule.exponential("100 millis").pipe(Schedule.intersect(Schedule.recurs(3))), then: "dlq" }),
    // committed past, counted in Runner.Stats.skipped and logged
    ErrorRule.tagged("Invalid", { then: "skip" })
    // then: "fail" ends the run without committing past the record
  ]
})

/** One tagged rule alone, and the OutputTooLarge rule next to the transform's own. */
export const singleRule = Transformer.stateless({
  name: "single-rule",
  inputs: [Words],
  transform: (record) => Effect.as(lookup(record.value), {}),
  rules: [ErrorRule.tagged("Invalid", { then: "skip" }), ErrorRule.tagged("OutputTooLarge", { then: "dlq" })]
})

/** A predicate rule still infers the error type from its `when`. */
export const predicateRule = Transformer.stateless({
  name: "predicate-rule",
  inputs: [Words],
  transform: (record) => Effect.as(lookup(record.value), {}),
  rules: [ErrorRule.make({ when: (e: Unavailable | Invalid) => e._tag === "Invalid", then: "skip" })]
})

export const unknownTag = Transformer.stateless({
  name: "unknown-tag",
  inputs: [Words],
  transform: (record) => Effect.as(lookup(record.value), {}),
  rules: [
    // @ts-expect-error the transform never fails with "Timeout"
    ErrorRule.tagged("Timeout", { then: "skip" })
  ]
})

export const unknownTagWithKnownOne = Transformer.make({
  name: "unknown-tag-with-known-one",
  inputs: [Words],
  state: Schema.Number,
  transform: (record) => Effect.as(lookup(record.value), {}),
  rules: [
    ErrorRule.tagged("Invalid", { then: "skip" }),
    // @ts-expect-error the transform never fails with "Invalidd"
    ErrorRule.tagged("Invalidd", { then: "dlq" })
  ]
})

/** A retry schedule receives the transform's errors. */
export const retryInput = Transformer.stateless({
  name: "retry-input",
  inputs: [Words],
  transform: (record) => Effect.as(lookup(record.value), {}),
  rules: [
    ErrorRule.tagged("Unavailable", {
      retry: Schedule.recurWhile((e: Unavailable | Invalid) => e.value !== "stop"),
      then: "dlq"
    })
  ]
})

export const retryInputTooNarrow = Transformer.stateless({
  name: "retry-input-too-narrow",
  inputs: [Words],
  transform: (record) => Effect.as(lookup(record.value), {}),
  rules: [
    // @ts-expect-error the schedule must accept every error of the transform
    ErrorRule.tagged("Unavailable", { retry: Schedule.recurWhile((e: { readonly missing: string }) => e.missing === ""), then: "dlq" })
  ]
})

/** Rules declared apart, with the rule type annotated, as the handler tests do. */
export const declaredApart: ReadonlyArray<ErrorRule.ErrorRule<Unavailable | Invalid>> = [
  ErrorRule.tagged("Unavailable", { retry: Schedule.recurs(2), then: "fail" }),
  ErrorRule.tagged("Invalid", { then: "skip" })
]

export const declaredApartRules = Transformer.stateless({
  name: "declared-apart",
  inputs: [Words],
  transform: (record) => Effect.as(lookup(record.value), {}),
  rules: declaredApart
})
