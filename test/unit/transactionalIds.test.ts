import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import * as TransactionalIds from "../../src/internal/runtime/TransactionalIds.ts"

const orders = { applicationId: "shop-orders", description: `the run store of workflow "orders"` }
const ordersRuns = { applicationId: "shop-orders-runs", description: `the tasks of transformer "orders-runs"` }

describe("transactional ids of one process", () => {
  it.effect("two users of one id fail the second claim with ConfigurationError naming both; released, the id is free", () =>
    Effect.gen(function*() {
      const first = yield* Scope.make()
      yield* TransactionalIds.claim(orders, ["shop-orders-runs-0", "shop-orders-runs-1"]).pipe(Scope.extend(first))
      const clash = yield* Effect.flip(Effect.scoped(TransactionalIds.claim(ordersRuns, ["shop-orders-runs-0"])))
      assert.strictEqual(clash._tag, "ConfigurationError")
      assert.include(clash.message, "shop-orders-runs-0")
      assert.include(clash.message, `workflow "orders"`)
      assert.include(clash.message, `transformer "orders-runs"`)
      // Instances of one application share their ids: a new owner fences the old one on purpose.
      yield* Effect.scoped(TransactionalIds.claim(orders, ["shop-orders-runs-0"]))
      const still = yield* Effect.flip(Effect.scoped(TransactionalIds.claim(ordersRuns, ["shop-orders-runs-1"])))
      assert.strictEqual(still._tag, "ConfigurationError", "the first claim still holds after the second instance ended")
      yield* Scope.close(first, Exit.void)
      yield* Effect.scoped(TransactionalIds.claim(ordersRuns, ["shop-orders-runs-0", "shop-orders-runs-1"]))
    }))
})
