/**
 * The counting app of the SIGKILL query proof (`test/proofs/query-kill.test.ts`): a stateful
 * per-key count whose every value is tagged with the attempt that wrote it, so that a value a
 * query answers can be told apart from any other write of the same count. Each record's transform
 * attempt (a retry, a batch replayed after an abort, another instance's) writes
 * `{ count, by: "<instance>#<attempt>" }` to the state, to the `totals` store, to the `steps`
 * window store (the n-th record's window starts at n seconds) and to the output topic, all in the
 * record's transaction: the committed output names exactly the values that were committed, and a
 * value no committed output names was never committed.
 *
 * With `stall`, a record whose value is `"stall"` is written (state, stores) and then held: the
 * transform prints `{"event":"stalled",...}` with the value it wrote and never returns, so its
 * transaction never commits (until the process dies).
 *
 * Shared by the app (`query-count.ts`, run as a child process) and the test (which runs
 * instances of it in its own process and asks the queries with its stores).
 */
import { Effect, Option, Schema } from "effect"
import { KeyValueStore, Topic, Transformer, WindowStore } from "../../src/index.ts"
import type { Names } from "./transformers.ts"

/** A count and the transform attempt that wrote it. */
export const Tagged = Schema.Struct({ count: Schema.Number, by: Schema.String })
export type Tagged = typeof Tagged.Type

export const Totals = KeyValueStore.make({ name: "totals", key: Schema.String, value: Tagged })
export const Steps = WindowStore.make({ name: "steps", key: Schema.String, value: Tagged })

/** How an instance tags its writes (`name`), and whether it holds a `"stall"` record's transaction open. */
export interface Instance {
  readonly name: string
  readonly stall: boolean
}

/** The counting transformer, as `instance` runs it. */
export const queryCounter = (names: Names, instance: Instance) => {
  const Input = Topic.make({ name: names.input, key: Schema.String, value: Schema.String })
  const Output = Topic.make({ name: names.output, key: Schema.String, value: Topic.json(Tagged) })
  let attempts = 0
  return Transformer.make({
    name: "count",
    inputs: [Input],
    state: Tagged,
    stores: [Totals, Steps],
    transform: (record, state) =>
      Effect.gen(function*() {
        attempts++
        const next: Tagged = {
          count: Option.match(state, { onNone: () => 0, onSome: (s) => s.count }) + 1,
          by: `${instance.name}#${attempts}`
        }
        const key = record.key ?? ""
        yield* Totals.put(key, next)
        yield* Steps.put(key, next.count * 1000, next)
        if (instance.stall && record.value === "stall") {
          yield* Effect.sync(() =>
            process.stdout.write(`${JSON.stringify({ event: "stalled", key, value: next, ts: Date.now() })}\n`)
          )
          return yield* Effect.never
        }
        return { emit: [Topic.record(Output, record.key, next)], state: Transformer.set(next) }
      })
  })
}
