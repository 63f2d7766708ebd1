import { Activity, DurableDeferred, Workflow } from "@effect/workflow"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Option, Schema } from "effect"
import * as Engine from "../../src/internal/workflow/engine.ts"

const Flow = Workflow.make({ name: "flow", payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (p) => p.id })

const step = (name: string, value: string) => Activity.make({ name, success: Schema.String, execute: Effect.succeed(value) })

describe("workflow engine (no run store)", () => {
  it.effect("runs the body and its activities; the result is the body's", () =>
    Effect.gen(function*() {
      const run = yield* Engine.execute(
        Flow,
        () => Effect.zipWith(step("a", "1"), step("b", "2"), (a, b) => `${a}${b}`),
        { id: "x" },
        "exec-1",
        Option.none()
      )
      assert.strictEqual(run._tag, "Complete")
      if (run._tag === "Complete") assert.deepStrictEqual(run.exit, Exit.succeed("12"))
    }))

  it.effect("two activities with one name in one run are a defect that names them", () =>
    Effect.gen(function*() {
      const run = yield* Engine.execute(
        Flow,
        () => Effect.zipWith(step("charge", "1"), step("charge", "2"), (a, b) => `${a}${b}`),
        { id: "x" },
        "exec-2",
        Option.none()
      )
      assert.strictEqual(run._tag, "Complete")
      if (run._tag === "Complete" && Exit.isFailure(run.exit)) {
        assert.match(Cause.pretty(run.exit.cause), /two activities named "charge"/)
      } else {
        assert.fail("expected the run to fail")
      }
    }))

  it.effect("a body that interrupts itself is a suspended run", () =>
    Effect.gen(function*() {
      const run = yield* Engine.execute(Flow, () => Effect.as(Effect.interrupt, "never"), { id: "x" }, "exec-4", Option.none())
      assert.strictEqual(run._tag, "Suspended")
    }))

  it.effect("a deferred that nothing completes suspends the run", () =>
    Effect.gen(function*() {
      const run = yield* Engine.execute(Flow, () => Effect.as(DurableDeferred.await(DurableDeferred.make("signal")), "never"), { id: "x" }, "exec-3", Option.none())
      assert.strictEqual(run._tag, "Suspended")
    }))
})
