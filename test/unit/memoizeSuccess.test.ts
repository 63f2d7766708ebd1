import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { memoizeScoped, memoizeSuccess } from "../../src/internal/util/memoizeSuccess.ts"

/** An acquisition that fails the first time (a broker not reachable yet) and succeeds after. */
const flaky = () => {
  let calls = 0
  const acquire = Effect.suspend(() => {
    calls++
    return calls === 1 ? Effect.fail("ECONNREFUSED" as const) : Effect.succeed(`reader-${calls}`)
  })
  return { acquire, calls: () => calls }
}

type Memoize = <A, E>(acquire: Effect.Effect<A, E>) => Effect.Effect<Effect.Effect<A, E>>

// Issue 11, defect 6: the changelog reader was acquired with `Effect.cached`,
// which caches a failure too: after one failed first connect every later task
// start failed the same way. `Effect.cached` fails this suite; memoizeSuccess passes it.
const suite = (name: string, memoize: Memoize) =>
  describe(name, () => {
    it.effect("a failed acquisition is retried by the next caller; a success is cached", () =>
      Effect.gen(function*() {
        const { acquire, calls } = flaky()
        const reader = yield* memoize(acquire)
        const first = yield* Effect.either(reader)
        const second = yield* Effect.either(reader)
        const third = yield* Effect.either(reader)
        assert.deepStrictEqual(
          { first, second, third, acquisitions: calls() },
          {
            first: Either.left("ECONNREFUSED"),
            second: Either.right("reader-2"),
            third: Either.right("reader-2"),
            acquisitions: 2
          }
        )
      }))

    it.live("concurrent callers share one acquisition", () =>
      Effect.gen(function*() {
        let calls = 0
        const reader = yield* memoize(Effect.sync(() => ++calls).pipe(Effect.delay("10 millis")))
        const values = yield* Effect.all([reader, reader, reader], { concurrency: "unbounded" })
        assert.deepStrictEqual({ values, calls }, { values: [1, 1, 1], calls: 1 })
      }))
  })

suite("memoizeSuccess", memoizeSuccess)

describe("memoizeSuccess discardWhen", () => {
  // A reader whose consumer crashed stays crashed: before, the runner kept handing the crashed
  // reader to every restore. A value found unusable is acquired again; a usable one stays cached.
  it.effect("a cached value found unusable is acquired again by the next caller", () =>
    Effect.gen(function*() {
      let calls = 0
      const crashed = new Set<number>()
      const reader = yield* memoizeSuccess(Effect.sync(() => ++calls), {
        discardWhen: (value) => Effect.sync(() => crashed.has(value))
      })
      const first = yield* reader
      const cached = yield* reader
      crashed.add(first)
      const remade = yield* reader
      const kept = yield* reader
      assert.deepStrictEqual({ first, cached, remade, kept, calls }, { first: 1, cached: 1, remade: 2, kept: 2, calls: 2 })
    }))
})

describe("memoizeScoped", () => {
  // Issue 29, defect 13: a crashed changelog or standby reader was made again while the old one
  // stayed pinned to the runner's scope (its consumer and sockets kept until the run ended).
  it.scoped("a value found unusable is released before it is acquired again; a failed acquisition releases what it acquired", () =>
    Effect.gen(function*() {
      const released: Array<string> = []
      let calls = 0
      const crashed = new Set<number>()
      const reader = yield* memoizeScoped(
        Effect.gen(function*() {
          const n = ++calls
          yield* Effect.addFinalizer(() => Effect.sync(() => released.push(`reader-${n}`)))
          if (n === 3) return yield* Effect.fail("ECONNREFUSED" as const)
          return n
        }),
        { discardWhen: (value) => Effect.sync(() => crashed.has(value)) }
      )
      const first = yield* reader
      crashed.add(first)
      const second = yield* reader
      const whileSecondCached = [...released]
      crashed.add(second)
      const third = yield* Effect.either(reader)
      const fourth = yield* reader
      assert.deepStrictEqual(
        { first, second, whileSecondCached, third, fourth, released: [...released] },
        {
          first: 1,
          second: 2,
          whileSecondCached: ["reader-1"],
          third: Either.left("ECONNREFUSED"),
          fourth: 4,
          released: ["reader-1", "reader-2", "reader-3"]
        }
      )
    }))
})
