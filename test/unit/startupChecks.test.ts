/**
 * A transformer whose timers or stores need a state store it does not have
 * (a hand-built `Transformer` without `state`) fails at startup with the fix,
 * before the runner joins its group: not at its first batch.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import * as SkeinConfig from "../../src/SkeinConfig.ts"
import { makeStats } from "../../src/internal/runtime/RunnerStats.ts"
import { validateConfig } from "../../src/internal/runtime/validation.ts"

const config = SkeinConfig.make({ applicationId: "startup-checks", brokers: ["127.0.0.1:9"] })

const failureOf = (transformer: Parameters<typeof validateConfig>[2]) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(validateConfig(config, makeStats(), transformer))
    return Exit.isFailure(exit) ? String(exit.cause) : "passed"
  })

describe("startup checks of a transformer", () => {
  it.effect("onTimer without state fails with the fix", () =>
    Effect.gen(function*() {
      const failure = yield* failureOf({ name: "ticker", rules: [], state: Option.none(), onTimer: () => Effect.void })
      expect(failure).toContain("Transformer ticker has onTimer but no state")
      expect(failure).toContain("Declare it with Transformer.make")
    }))

  it.effect("stores without state fail with the fix", () =>
    Effect.gen(function*() {
      const failure = yield* failureOf({ name: "lookup", rules: [], state: Option.none(), stores: [{}] })
      expect(failure).toContain("Transformer lookup has stores but no state")
    }))

  it.effect("a stateful transformer with onTimer and stores passes", () =>
    Effect.gen(function*() {
      const failure = yield* failureOf({ name: "ok", rules: [], state: Option.some({}), onTimer: () => Effect.void, stores: [{}] })
      expect(failure).toBe("passed")
    }))
})
