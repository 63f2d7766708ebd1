/**
 * Effects composed eagerly (src/internal/streams/eager.ts): a step after a done one
 * (an `Exit`) runs at once and the result is done; from the first step that
 * is not done, the rest runs when the Effect runs, in the same order and with
 * the same result; a failure stops the steps after it; a throw while
 * composing at once and a defect of a lazy step reach `catchSomeDefect`
 * alike.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Option } from "effect"
import * as Eager from "../../src/internal/streams/eager.ts"

/** A step that logs `name` when it runs: done at once (`Effect.succeed`) or not (`Effect.sync`). */
const stepOf = (log: Array<string>, done: boolean) => (name: string): Effect.Effect<string> =>
  done ? (log.push(name), Effect.succeed(name)) : Effect.sync(() => {
    log.push(name)
    return name
  })

describe("eager effects", () => {
  it.effect("done steps run at once and give an Exit; a step that is not done defers the rest, same order and result", () =>
    Effect.gen(function*() {
      for (const lazyAt of [-1, 0, 1, 2]) {
        const log: Array<string> = []
        const step = (i: number, name: string) => stepOf(log, i !== lazyAt)(name)
        const composed = Eager.flatMap(step(0, "a"), (a) =>
          Eager.map(
            Eager.forEach(["b", "c"], (name) => Eager.map(step(name === "b" ? 1 : 2, name), () => undefined)),
            () => `${a}+`
          ))
        if (lazyAt === -1) {
          assert.ok(Exit.isExit(composed), "every step done: the result is done")
          assert.deepStrictEqual(log, ["a", "b", "c"])
        } else {
          assert.notOk(Exit.isExit(composed), `step ${lazyAt} is not done: the result runs later`)
          assert.deepStrictEqual(log, ["a", "b", "c"].slice(0, lazyAt), "the steps before it ran at once, none after it")
        }
        assert.strictEqual(yield* composed, "a+")
        assert.deepStrictEqual(log, ["a", "b", "c"])
      }
    }))

  it.effect("gen: yields of done steps resume at once; the first that is not done runs the rest with the Effect", () =>
    Effect.gen(function*() {
      for (const lazy of [false, true]) {
        const log: Array<string> = []
        const done = stepOf(log, true)
        const body = Eager.gen(function*() {
          const a = yield* done("a")
          const b = yield* stepOf(log, !lazy)("b")
          const c = yield* done("c")
          return [a, b, c].join("")
        })
        assert.strictEqual(Exit.isExit(body), !lazy)
        assert.deepStrictEqual(log, lazy ? ["a"] : ["a", "b", "c"])
        assert.strictEqual(yield* body, "abc")
        assert.deepStrictEqual(log, ["a", "b", "c"])
      }
    }))

  it.effect("a failure stops the steps after it, at once or later, with the same error", () =>
    Effect.gen(function*() {
      for (const lazy of [false, true]) {
        const log: Array<string> = []
        const failing = lazy ? Effect.suspend(() => Effect.fail("boom")) : Effect.fail("boom")
        const composed = Eager.forEach([1, 2, 3], (i) => i === 2 ? failing : Eager.map(stepOf(log, true)(`s${i}`), () => undefined))
        const generated = Eager.gen(function*() {
          yield* stepOf(log, true)("g1")
          yield* failing
          yield* stepOf(log, true)("g2")
        })
        assert.deepStrictEqual(yield* Effect.flip(composed), "boom")
        assert.deepStrictEqual(yield* Effect.flip(generated), "boom")
        assert.deepStrictEqual(log, ["s1", "g1"])
      }
      const either = Eager.fromEither(Effect.runSync(Effect.either(Effect.fail("e"))))
      assert.ok(Exit.isExit(either) && Exit.isFailure(either))
    }))

  it.effect("catchSomeDefect: a throw while composing at once and a lazy step's defect are recovered alike; others stay defects", () =>
    Effect.gen(function*() {
      class Mine {
        constructor(readonly why: string) {}
      }
      const recover = (defect: unknown) => defect instanceof Mine ? Option.some(Effect.succeed(`recovered ${defect.why}`)) : Option.none()
      const thrown = Eager.catchSomeDefect((): Effect.Effect<string> => {
        throw new Mine("thrown")
      }, recover)
      assert.ok(Exit.isExit(thrown), "thrown while composing at once: recovered at once")
      assert.strictEqual(yield* thrown, "recovered thrown")
      const died = Eager.catchSomeDefect(() => Effect.suspend(() => Effect.die(new Mine("lazy"))), recover)
      assert.notOk(Exit.isExit(died))
      assert.strictEqual(yield* died, "recovered lazy")
      const other = yield* Effect.exit(Eager.catchSomeDefect((): Effect.Effect<string> => {
        throw new Error("not mine")
      }, recover))
      assert.ok(Exit.isFailure(other) && Cause.isDie(other.cause), "a defect the function does not recover stays a defect")
    }))

  it.effect("runNow: Effect.sync, Effect.suspend, Effect.gen and map/flatMap of done steps are taken now, in order, as an Exit", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const cases: ReadonlyArray<readonly [string, () => Effect.Effect<string, string>]> = [
        ["sync", () => Effect.sync(() => (log.push("sync"), "sync"))],
        ["suspend", () => Effect.suspend(() => (log.push("suspend"), Effect.succeed("suspend")))],
        ["gen", () =>
          Effect.gen(function*() {
            const a = yield* Effect.sync(() => (log.push("gen-a"), "gen"))
            const b = yield* Effect.succeed("-")
            log.push("gen-end")
            return `${a}${b}`
          })],
        ["map", () => Effect.map(Effect.sync(() => (log.push("map"), "ma")), (s) => `${s}p`)],
        ["failure", () => Effect.flatMap(Effect.sync(() => (log.push("failure"), 1)), () => Effect.fail("failed"))]
      ]
      const expected: Record<string, { readonly log: ReadonlyArray<string>; readonly exit: Exit.Exit<string, string> }> = {
        sync: { log: ["sync"], exit: Exit.succeed("sync") },
        suspend: { log: ["suspend"], exit: Exit.succeed("suspend") },
        gen: { log: ["gen-a", "gen-end"], exit: Exit.succeed("gen-") },
        map: { log: ["map"], exit: Exit.succeed("map") },
        failure: { log: ["failure"], exit: Exit.fail("failed") }
      }
      for (const [name, make] of cases) {
        log.length = 0
        const effect = make()
        assert.deepStrictEqual(log, [], `${name}: nothing runs when the Effect is made`)
        const now = Eager.runNow(effect)
        // Fails when Effect's instructions change shape: the fast path would be gone unnoticed.
        assert.ok(Eager.isDone(now), `${name}: taken now, an Exit (Effect ${Effect.isEffect(now) ? "instruction changed?" : ""})`)
        assert.deepStrictEqual(log, expected[name]!.log, `${name}: its steps ran once, in order`)
        assert.deepStrictEqual(now, expected[name]!.exit)
        // The same as the runtime running the Effect.
        log.length = 0
        assert.deepStrictEqual(yield* Effect.exit(make()), expected[name]!.exit)
        assert.deepStrictEqual(log, expected[name]!.log)
      }
    }))

  it.effect("runNow: the first step that needs the runtime is left for it, with every step after it, in order", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const effect = Effect.gen(function*() {
        yield* Effect.sync(() => log.push("before"))
        yield* Effect.yieldNow()
        yield* Effect.sync(() => log.push("after"))
        return "done"
      })
      const now = Eager.runNow(effect)
      assert.notOk(Eager.isDone(now), "a yield needs the runtime")
      assert.deepStrictEqual(log, ["before"], "the steps before it ran now, none after it")
      assert.strictEqual(yield* now, "done")
      assert.deepStrictEqual(log, ["before", "after"], "the runtime ran the rest, not the first steps again")
      const service = Effect.map(Effect.context<never>(), () => "context")
      assert.strictEqual(yield* Eager.runNow(service), "context")
    }))

  it("runNow: a throw in a step taken now is thrown to the caller, the defect a throw in the runtime is", () => {
    const boom = new Error("boom")
    assert.throws(() => Eager.runNow(Effect.sync(() => { throw boom })), "boom")
    const died = Effect.runSyncExit(Effect.sync(() => { throw boom }))
    assert.ok(Exit.isFailure(died) && Cause.isDie(died.cause), "the runtime makes the same throw a defect")
    const caught = Eager.catchSomeDefect(() => Eager.runNow(Effect.sync(() => { throw boom })), (defect) =>
      defect === boom ? Option.some(Effect.succeed("recovered")) : Option.none())
    assert.deepStrictEqual(caught, Exit.succeed("recovered"))
  })
})
