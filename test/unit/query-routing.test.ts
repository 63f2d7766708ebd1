/**
 * Routing queries to a partition's owner without a broker: the routes'
 * codec; each member's endpoint announced in its subscription and the
 * leader's routes marker, sent to every member, naming each partition's
 * owner and standbys; and two query endpoints on this machine, one
 * forwarding to the other (once, with its token), `x-skein-forward: no`
 * answered with `NotHere` naming the owner, an owner that does not answer a
 * typed retry, and `/metadata`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import type { Scope } from "effect"
import kafkajs from "kafkajs"
import * as Net from "node:net"
import * as CommitReceipt from "../../src/internal/runtime/CommitReceipt.ts"
import * as Assignor from "../../src/internal/kafka/assignor.ts"
import * as MemoryStore from "../../src/internal/stores/memoryStore.ts"
import { partitionOf } from "../../src/internal/query/partitioner.ts"
import type * as Queries from "../../src/internal/query/Queries.ts"
import * as QueryServer from "../../src/internal/query/queryServer.ts"
import * as QueryRoutes from "../../src/internal/query/QueryRoutes.ts"
import { namespace } from "../../src/internal/stores/keys.ts"

const { AssignerProtocol } = kafkajs

describe("query routes", () => {
  it("round trip through their text; text that is not theirs reads as none", () => {
    const routes: QueryRoutes.QueryRoutes = {
      active: ["a:1", "b:2", null, "a:1"],
      standbys: [["b:2"], ["a:1", "c:3"], [], []]
    }
    assert.deepStrictEqual(QueryRoutes.decode(QueryRoutes.encode(routes)), routes)
    assert.deepStrictEqual(QueryRoutes.decode(QueryRoutes.encode(routes, false)), { ...routes, standbys: [[], [], [], []] })
    for (const text of ["", "{", "[]", '{"e":[1],"a":[]}', '{"e":["a:1"],"a":["x"]}', '{"e":[],"a":[],"s":[["x"]]}']) {
      assert.isUndefined(QueryRoutes.decode(text), text)
    }
    assert.deepStrictEqual(QueryRoutes.byEndpoint(routes), [
      { endpoint: "a:1", active: [0, 3], standbys: [1] },
      { endpoint: "b:2", active: [1], standbys: [0] },
      { endpoint: "c:3", active: [], standbys: [1] }
    ])
    assert.strictEqual(QueryRoutes.activeOf(routes, 2), undefined)
    assert.strictEqual(QueryRoutes.activeOf(routes, 9), undefined)
  })

  it("an endpoint is host:port", () => {
    for (const ok of ["localhost:8081", "10.0.0.7:1", "[::1]:8081", "app-0.app.svc.cluster.local:65535"]) {
      assert.isUndefined(QueryRoutes.invalidEndpoint(ok), ok)
    }
    for (const bad of ["localhost", ":8081", "host:0", "host:70000", "http://host:1", "a b:1", "::1:8081", "host:1/x"]) {
      assert.include(QueryRoutes.invalidEndpoint(bad), "host:port", bad)
    }
  })
})

describe("the assignor's routes", () => {
  it("each member announces its endpoint; the leader sends every member each partition's owner and standbys", () => {
    const endpoints: Record<string, string | undefined> = { m1: "one:1", m2: "two:2", m3: undefined }
    const members = Object.entries(endpoints).map(([memberId, endpoint]) => ({
      memberId,
      memberMetadata: Assignor.subscription(AssignerProtocol, ["in"], { owner: "count", since: 0, endpoint })
    }))
    assert.strictEqual(Assignor.decodeMembership(AssignerProtocol, members[0]?.memberMetadata)?.endpoint, "one:1")
    assert.isUndefined(Assignor.decodeMembership(AssignerProtocol, members[2]?.memberMetadata)?.endpoint)
    const sent = Assignor.leaderAssignment(AssignerProtocol, members, new Map([["in", 6]]), 1)
    const received = sent.map(({ memberId, memberAssignment }) => ({
      memberId,
      assignment: AssignerProtocol.MemberAssignment.decode(memberAssignment)?.assignment ?? {}
    }))
    const routesOf = received.map(({ assignment }) => Assignor.queryRoutesOf(Object.keys(assignment)))
    // Every member gets the same routes, and they name each member's partitions.
    const [routes] = routesOf
    if (routes === undefined) return assert.fail("no routes")
    for (const other of routesOf) assert.deepStrictEqual(other, routes)
    for (const { memberId, assignment } of received) {
      for (const partition of assignment["in"] ?? []) assert.strictEqual(routes.active[partition], endpoints[memberId] ?? null)
      for (const partition of Assignor.standbysOf(Object.keys(assignment))) {
        const endpoint = endpoints[memberId]
        if (endpoint !== undefined) assert.include(routes.standbys[partition], endpoint)
      }
    }
    assert.strictEqual(routes.active.length, 6)
    assert.strictEqual(routes.active.filter((e) => e === null).length, 2, "m3's two partitions have no endpoint")
  })

  it("no endpoint announced: no routes marker; routes too long drop their standbys", () => {
    const plan = Assignor.plan([{ memberId: "a", membership: { owner: "c", since: 0 } }], new Map([["in", 2]]))
    assert.deepStrictEqual(Assignor.routesOf(plan, new Map()), { active: [null, null], standbys: [[], []] })
    assert.isUndefined(Assignor.queryRoutesOf(["in", Assignor.standbyTopic([1])]))
    const many: QueryRoutes.QueryRoutes = {
      active: Array.from({ length: 3000 }, (_, p) => `host-${p % 50}.example:8081`),
      standbys: Array.from({ length: 3000 }, (_, p) => [`host-${(p + 1) % 50}.example:8081`, `host-${(p + 2) % 50}.example:8081`])
    }
    const topic = Assignor.routesTopic(many)
    if (topic === undefined) return assert.fail("no marker")
    assert.isAtMost(Buffer.byteLength(topic), 30_000)
    assert.deepStrictEqual(Assignor.queryRoutesOf([topic])?.active, many.active)
    assert.deepStrictEqual(Assignor.queryRoutesOf([topic])?.standbys[0], [])
  })
})

const partitions = 4
const keyOn = (partition: number, prefix: string): string => {
  for (let i = 0; ; i++) if (partitionOf(`${prefix}${i}`, partitions) === partition) return `${prefix}${i}`
}

/** A source running `stores` (partition to committed entries), with `routes` and itself at `self`. */
const sourceOf = (
  stores: ReadonlyMap<number, Queries.PartitionState>,
  routes: () => QueryRoutes.QueryRoutes,
  self: () => string | undefined
): Queries.Source => ({
  transformer: "count",
  stateful: true,
  keyValueStores: ["totals"],
  otherStores: new Map(),
  partitions,
  partition: (p) => stores.get(p) ?? "absent",
  assigned: () => [...stores.keys()].sort(),
  routes,
  self,
  inputs: ["in"],
  position: () => new Map(),
  nextPositionChange: () => Effect.never,
  standby: () => undefined
})

const storeWith = (p: number, entries: ReadonlyArray<readonly [string, string]>) =>
  Effect.gen(function*() {
    const store = MemoryStore.make(`memory-${p}`, p)
    yield* store.write(CommitReceipt.issue(p, []), entries.map(([key, value]) => ({ key, value })))
    return store
  })

const get = (port: number, path: string, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers })
    return { status: response.status, headers: response.headers, json: await response.json() as Record<string, unknown> }
  })

describe("forwarding between two query endpoints", () => {
  const token = Redacted.make("shared-token")
  const bearer = { authorization: "Bearer shared-token" }
  const onA = keyOn(0, "a")
  const onB = keyOn(2, "b")

  /** Instance A runs partitions 0 and 1, B runs 2 and 3; both know it from their routes. */
  const twoInstances: Effect.Effect<{ readonly a: number; readonly b: number }, unknown, Scope.Scope> = Effect.gen(function*() {
    let endpoints = { a: "", b: "" }
    const routes = (): QueryRoutes.QueryRoutes => ({
      active: [endpoints.a, endpoints.a, endpoints.b, endpoints.b],
      standbys: [[endpoints.b], [], [endpoints.a], []]
    })
    const a = yield* QueryServer.serve(
      sourceOf(new Map<number, Queries.PartitionState>([[0, yield* storeWith(0, [[onA, "1"]])], [1, "restoring"]]), routes, () => endpoints.a),
      { port: 0, host: "127.0.0.1", token }
    )
    const b = yield* QueryServer.serve(
      sourceOf(new Map([[2, yield* storeWith(2, [[onB, "22"]])], [3, yield* storeWith(3, [])]]), routes, () => endpoints.b),
      { port: 0, host: "127.0.0.1", token }
    )
    endpoints = { a: `127.0.0.1:${a.port}`, b: `127.0.0.1:${b.port}` }
    return { a: a.port, b: b.port }
  })

  it.scopedLive("a key owned by B asked at A: B's answer; NotHere naming B when A is told not to forward", () =>
    Effect.gen(function*() {
      const { a, b } = yield* twoInstances
      const forwarded = yield* get(a, `/state/count/${onB}`, bearer)
      assert.strictEqual(forwarded.status, 200)
      assert.deepStrictEqual(forwarded.json, { transformer: "count", key: onB, partition: 2, found: true, value: 22 })
      assert.strictEqual(forwarded.headers.get(QueryServer.headers.servedBy), `127.0.0.1:${b}`)
      const local = yield* get(a, `/state/count/${onA}`, bearer)
      assert.deepStrictEqual([local.json.value, local.headers.get(QueryServer.headers.servedBy)], [1, `127.0.0.1:${a}`])

      const redirect = yield* get(a, `/state/count/${onB}`, { ...bearer, [QueryServer.headers.forward]: "no" })
      assert.strictEqual(redirect.status, 404)
      assert.deepStrictEqual(
        [redirect.json.error, redirect.json.partition, redirect.json.owner, redirect.json.standbys],
        ["NotHere", 2, `127.0.0.1:${b}`, [`127.0.0.1:${a}`]]
      )
      assert.include(redirect.json.message, `ask 127.0.0.1:${b}`)
      // A forwarded request is never forwarded again: B asked for A's key answers NotHere naming A.
      const once = yield* get(b, `/state/count/${onA}`, { ...bearer, [QueryServer.headers.forwardedBy]: "elsewhere:1" })
      assert.deepStrictEqual([once.status, once.json.owner], [404, `127.0.0.1:${a}`])
      // B's NotReady comes back through A as it is, with its Retry-After.
      const restoring = yield* get(b, `/state/count/${keyOn(1, "r")}`, bearer)
      assert.deepStrictEqual([restoring.status, restoring.json.reason, restoring.headers.get("retry-after")], [503, "restoring", "1"])
      // Without the token A refuses before it forwards anything.
      assert.strictEqual((yield* get(a, `/state/count/${onB}`)).status, 401)
    }))

  it.scopedLive("a scan asked at one instance merges every owner's page in key order; x-skein-forward: no reads its own", () =>
    Effect.gen(function*() {
      let endpoints = { a: "", b: "" }
      const routes = (): QueryRoutes.QueryRoutes => ({ active: [endpoints.a, endpoints.a, endpoints.b, endpoints.b], standbys: [] })
      const entry = (n: number) => [`${namespace("totals")}n${String(n).padStart(2, "0")}`, String(n)] as const
      // Entry n on partition n % 4: A holds 0 and 1, B 2 and 3.
      const storesOf = (own: ReadonlyArray<number>) =>
        Effect.map(
          Effect.forEach(own, (p) => Effect.map(storeWith(p, Array.from({ length: 20 }, (_, n) => n).filter((n) => n % 4 === p).map(entry)), (store) => [p, store] as const)),
          (pairs) => new Map<number, Queries.PartitionState>(pairs)
        )
      const a = yield* QueryServer.serve(sourceOf(yield* storesOf([0, 1]), routes, () => endpoints.a), { port: 0, host: "127.0.0.1", token })
      const b = yield* QueryServer.serve(sourceOf(yield* storesOf([2, 3]), routes, () => endpoints.b), { port: 0, host: "127.0.0.1", token })
      endpoints = { a: `127.0.0.1:${a.port}`, b: `127.0.0.1:${b.port}` }
      const keys: Array<string> = []
      let after: string | null = null
      for (let page = 0; page < 10; page++) {
        const answer: { json: Record<string, unknown> } = yield* get(a.port, `/stores/totals/range?limit=7${after === null ? "" : `&after=${after}`}`, bearer)
        assert.deepStrictEqual([answer.json.partitions, answer.json.complete], [[0, 1, 2, 3], true])
        const entries = answer.json.entries
        if (!Array.isArray(entries)) return assert.fail("no entries")
        keys.push(...entries.map((e: { key: string }) => e.key))
        after = typeof answer.json.next === "string" ? answer.json.next : null
        if (after === null) break
      }
      assert.deepStrictEqual(keys, Array.from({ length: 20 }, (_, n) => `n${String(n).padStart(2, "0")}`))
      const own = yield* get(a.port, "/stores/totals/prefix?prefix=n", { ...bearer, [QueryServer.headers.forward]: "no" })
      assert.deepStrictEqual([own.json.partitions, own.json.complete, (own.json.entries as Array<unknown>).length], [[0, 1], false, 10])
    }))

  it.effect("allowStandby=true: a partition not active here is answered from the standby copy kept here, with its lag", () =>
    Effect.gen(function*() {
      const standbyStore = yield* storeWith(2, [[onB, "21"]])
      const source: Queries.Source = {
        ...sourceOf(new Map(), () => ({ active: [null, null, "b:2", null], standbys: [] }), () => "a:1"),
        standby: (p) => p === 2 ? { store: standbyStore, position: 40, lag: 3 } : undefined
      }
      const respond = (url: string) =>
        Effect.map(QueryServer.respond(source, url), (response) => ({
          status: response.status,
          json: response.body._tag === "Uint8Array" ? JSON.parse(new TextDecoder().decode(response.body.body)) : undefined
        }))
      const stale = yield* respond(`/state/count/${onB}?allowStandby=true`)
      assert.deepStrictEqual(stale.json, {
        transformer: "count",
        key: onB,
        partition: 2,
        found: true,
        value: 21,
        standby: { position: 40, lag: 3 }
      })
      assert.deepStrictEqual((yield* respond(`/state/count/${onB}`)).json.error, "NotHere")
      assert.deepStrictEqual((yield* respond(`/state/count/${onA}?allowStandby=true`)).json.error, "NotHere")
      for (const url of [`/state/count/${onB}?allowStandby=yes`, `/state/count/${onB}?allowStandby=true&position=in:1`]) {
        assert.deepStrictEqual((yield* respond(url)).status, 400, url)
      }
    }))

  it.scopedLive("/metadata names every partition's owner and standbys, and a key's", () =>
    Effect.gen(function*() {
      const { a, b } = yield* twoInstances
      const all = yield* get(b, "/metadata", bearer)
      assert.deepStrictEqual(all.json, {
        self: `127.0.0.1:${b}`,
        partitions,
        here: [2, 3],
        instances: [
          { endpoint: `127.0.0.1:${a}`, active: [0, 1], standbys: [2] },
          { endpoint: `127.0.0.1:${b}`, active: [2, 3], standbys: [0] }
        ].sort((x, y) => (x.endpoint < y.endpoint ? -1 : 1)),
        unrouted: []
      })
      const key = yield* get(a, `/metadata?key=${onB}`, bearer)
      assert.deepStrictEqual(key.json, { key: onB, partition: 2, active: `127.0.0.1:${b}`, standbys: [`127.0.0.1:${a}`], here: false })
      const partition = yield* get(a, "/metadata?partition=0", bearer)
      assert.deepStrictEqual(partition.json, { partition: 0, active: `127.0.0.1:${a}`, standbys: [`127.0.0.1:${b}`], here: true })
    }))

  it.scopedLive("an owner that does not answer (refused, or silent past the forward's timeout) is a 503 NotReady (unreachable), naming it", () =>
    Effect.gen(function*() {
      // Partition 2's route names a port nothing listens on.
      const { port: gone } = yield* Effect.scoped(QueryServer.serve(sourceOf(new Map(), () => QueryRoutes.empty, () => undefined), { port: 0, host: "127.0.0.1" }))
      const routes = (): QueryRoutes.QueryRoutes => ({ active: [null, null, `127.0.0.1:${gone}`, null], standbys: [] })
      const { port } = yield* QueryServer.serve(sourceOf(new Map(), routes, () => "127.0.0.1:1"), { port: 0, host: "127.0.0.1" })
      const answer = yield* get(port, `/state/count/${onB}`)
      assert.deepStrictEqual(
        [answer.status, answer.json.error, answer.json.reason, answer.json.owner, answer.headers.get("retry-after")],
        [503, "NotReady", "unreachable", `127.0.0.1:${gone}`, "1"]
      )
      // An owner that accepts the connection and never answers: the same, once the forward's timeout passes.
      const silent = yield* Effect.acquireRelease(
        Effect.async<Net.Server>((resume) => {
          const server = Net.createServer(() => undefined)
          server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
        }),
        (server) => Effect.sync(() => server.close())
      )
      const silentPort = (() => {
        const address = silent.address()
        return typeof address === "object" && address !== null ? address.port : 0
      })()
      const slow = yield* QueryServer.serve(
        sourceOf(new Map(), () => ({ active: [null, null, `127.0.0.1:${silentPort}`, null], standbys: [] }), () => "127.0.0.1:1"),
        { port: 0, host: "127.0.0.1", forwardTimeout: "300 millis" }
      )
      const timedOut = yield* get(slow.port, `/state/count/${onB}`)
      assert.deepStrictEqual([timedOut.status, timedOut.json.reason, timedOut.json.owner], [503, "unreachable", `127.0.0.1:${silentPort}`])
      // No owner known: NotHere without one, saying so.
      const unknown = yield* get(port, `/state/count/${onA}`)
      assert.deepStrictEqual([unknown.status, unknown.json.error, unknown.json.owner], [404, "NotHere", null])
      assert.include(unknown.json.message, "not known here")
    }))
})
