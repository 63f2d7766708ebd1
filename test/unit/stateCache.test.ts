/**
 * A task's state cache (src/internal/stores/StateCache.ts): the last state written per key, at
 * most `capacity` keys; once full, a tenth is evicted, oldest first, where a key written again
 * since eviction last passed it stays (second chance).
 */
import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { makeStateCache } from "../../src/internal/stores/StateCache.ts"

const cached = (cache: ReturnType<typeof makeStateCache>, keys: ReadonlyArray<string>) =>
  keys.filter((key) => cache.get(key) !== undefined)

describe("the state cache", () => {
  it("returns the last state written per key, None included, and nothing for a key never written", () => {
    const cache = makeStateCache(10)
    cache.set("a", Option.some(1))
    cache.set("b", Option.none())
    cache.set("a", Option.some(2))
    assert.deepStrictEqual(cache.get("a"), Option.some(2))
    assert.deepStrictEqual(cache.get("b"), Option.none())
    assert.strictEqual(cache.get("c"), undefined)
  })

  it("holds at most its capacity; the oldest keys go first, but a key written again since stays", () => {
    const cache = makeStateCache(10)
    const keys = Array.from({ length: 10 }, (_, i) => `k${i}`)
    for (const key of keys) cache.set(key, Option.some(key))
    // k0 is the oldest, written again: it stays when the eleventh key evicts one (k1 goes instead).
    cache.set("k0", Option.some("k0 again"))
    cache.set("k10", Option.some("k10"))
    const all = [...keys, "k10"]
    assert.deepStrictEqual(cached(cache, all), all.filter((key) => key !== "k1"))
    assert.deepStrictEqual(cache.get("k0"), Option.some("k0 again"))
    // Its second chance is used up: k0 is now the oldest unwritten after k2..k9, k10 (moved to the end, mark cleared).
    for (let i = 11; i < 20; i++) cache.set(`k${i}`, Option.some(`k${i}`))
    const now = Array.from({ length: 20 }, (_, i) => `k${i}`)
    assert.strictEqual(cached(cache, now).length, 10)
    assert.deepStrictEqual(cached(cache, now), ["k0", ...Array.from({ length: 9 }, (_, i) => `k${i + 11}`)])
    cache.set("k20", Option.some("k20"))
    assert.notInclude(cached(cache, [...now, "k20"]), "k0", "k0 goes once it is the oldest without a new write")
  })

  it("when every key was written again, eviction still makes room (within two passes)", () => {
    const cache = makeStateCache(100)
    const keys = Array.from({ length: 100 }, (_, i) => `k${i}`)
    for (const key of keys) cache.set(key, Option.some(0))
    for (const key of keys) cache.set(key, Option.some(1))
    cache.set("new", Option.some(2))
    const left = cached(cache, [...keys, "new"])
    assert.strictEqual(left.length, 91, "a tenth evicted (100 + 1 - 10)")
    assert.include(left, "new")
    assert.deepStrictEqual(cache.get(left[0]!), Option.some(1))
  })
})
