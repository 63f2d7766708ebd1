/**
 * `Runner.runAll`'s shared query endpoint, without a broker: which
 * transformer's run a request goes to (`SharedSources`): a state query by
 * its transformer, a store query by the one transformer declaring the
 * store or by `?transformer=`, `/metadata` by `?transformer=` or `?store=`;
 * an ambiguous store name or `/metadata` without either is a 400 naming the
 * transformers, an unknown name a 404 with the known ones, a run not
 * registered yet (or gone) a `NotReady`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import type * as Queries from "../../src/internal/query/Queries.ts"
import * as QueryError from "../../src/internal/query/QueryError.ts"
import * as SharedSources from "../../src/internal/query/SharedSources.ts"
import * as QueryRoutes from "../../src/internal/query/QueryRoutes.ts"

const sourceOf = (transformer: string): Queries.Source => ({
  transformer,
  stateful: true,
  keyValueStores: [],
  otherStores: new Map(),
  partitions: 1,
  partition: () => "absent",
  assigned: () => [],
  routes: () => QueryRoutes.empty,
  self: () => undefined,
  inputs: [],
  position: () => new Map(),
  nextPositionChange: () => Effect.never,
  standby: () => undefined
})

const declared: ReadonlyArray<SharedSources.Declared> = [
  { name: "count", stateful: true, stores: [{ name: "latest", kind: "KeyValueStore" }] },
  { name: "length", stateful: true, stores: [{ name: "latest", kind: "KeyValueStore" }, { name: "steps", kind: "WindowStore" }] },
  { name: "route", stateful: false, stores: [] }
]

/** The transformer a request goes to, or its error's status and body. */
const picked = (shared: SharedSources.SharedSources, url: string): string | Record<string, unknown> =>
  Either.match(shared.pick(url), {
    onLeft: (error): Record<string, unknown> => ({ status: QueryError.status(error), ...QueryError.body(error) }),
    onRight: (source) => source.transformer
  })

describe("runAll's shared query endpoint", () => {
  it("picks each request's transformer; ambiguous, unknown and not-started ones are typed errors", () => {
    const shared = SharedSources.make(declared)
    const notReady = picked(shared, "/state/count/a")
    assert.deepInclude(notReady, { status: 503, error: "NotReady" })
    const unregister = [shared.register(sourceOf("count")), shared.register(sourceOf("length")), shared.register(sourceOf("route"))]
    assert.strictEqual(picked(shared, "/state/count/a"), "count")
    assert.strictEqual(picked(shared, "/state/length/a"), "length")
    assert.strictEqual(picked(shared, "/stores/steps/windows/a?from=0"), "length")
    assert.strictEqual(picked(shared, "/stores/latest/keys/a?transformer=count"), "count")
    assert.strictEqual(picked(shared, "/stores/latest/range?transformer=length"), "length")
    assert.strictEqual(picked(shared, "/metadata?transformer=route"), "route")
    assert.strictEqual(picked(shared, "/metadata?store=steps&key=a"), "length")
    const ambiguous = picked(shared, "/stores/latest/keys/a")
    assert.deepInclude(ambiguous, { status: 400, error: "InvalidParameter" })
    assert.include(JSON.stringify(ambiguous), `store \\"latest\\" is declared by transformers \\"count\\", \\"length\\"`)
    assert.deepInclude(picked(shared, "/metadata"), { status: 400, error: "InvalidParameter" })
    assert.deepInclude(picked(shared, "/stores/nope/keys/a"), { status: 404, error: "UnknownStore", known: ["latest", "steps"] })
    // "route" keeps no state: not a /state transformer.
    assert.deepInclude(picked(shared, "/state/route/a"), { status: 404, error: "UnknownTransformer", known: ["count", "length"] })
    assert.deepInclude(picked(shared, "/state/count/a?transformer=other"), { status: 404, error: "UnknownTransformer" })
    // A run that stopped: its queries are NotReady again.
    unregister[0]?.()
    assert.deepInclude(picked(shared, "/state/count/a"), { status: 503, error: "NotReady" })
    assert.strictEqual(picked(shared, "/state/length/a"), "length")
  })

  it("with one transformer, /metadata needs no parameter", () => {
    const shared = SharedSources.make([declared[0]!])
    shared.register(sourceOf("count"))
    assert.strictEqual(picked(shared, "/metadata"), "count")
    assert.strictEqual(picked(shared, "/stores/latest/keys/a"), "count")
  })
})
