/**
 * The co-partitioning assignor's placement: warm copies preferred, balanced,
 * deterministic; standbys chosen per partition; members of an older Skein
 * (no `stores`) accepted; the standby marker read back.
 */
import { assert, describe, it } from "@effect/vitest"
import kafkajs from "kafkajs"
import * as Assignor from "../../src/internal/kafka/assignor.ts"

const { AssignerProtocol } = kafkajs

const stores = (entries: Record<number, number> = {}): ReadonlyMap<number, number> =>
  new Map(Object.entries(entries).map(([p, o]) => [Number(p), o]))

const member = (memberId: string, entries?: Record<number, number>): Assignor.Member => ({
  memberId,
  membership: { owner: "count", since: 0, stores: stores(entries) }
})

/** Partition to active member, as a plain object. */
const actives = (plan: Assignor.Plan): Record<number, string> => {
  const out: Record<number, string> = {}
  for (const [memberId, assignment] of plan.assignments) {
    for (const partition of assignment["in"] ?? []) out[partition] = memberId
  }
  return out
}

describe("assignor placement", () => {
  const counts = new Map([["in", 4]])

  it("without stores: balanced round-robin over the sorted member ids, the same every time", () => {
    const plan = Assignor.plan([member("m2"), member("m1")], counts)
    assert.deepStrictEqual(plan.assignments.get("m1"), { in: [0, 2] })
    assert.deepStrictEqual(plan.assignments.get("m2"), { in: [1, 3] })
    assert.deepStrictEqual(actives(Assignor.plan([member("m1"), member("m2")], counts)), actives(plan))
    assert.strictEqual(plan.standbys.size, 0)
  })

  it("a partition goes to the member with the warmest copy", () => {
    // m1 has no copy of anything; m2 has copies of 0 (caught up) and 1 (far behind); m3 a fresher 1.
    const plan = Assignor.plan([member("m1"), member("m2", { 0: 1000, 1: 10 }), member("m3", { 1: 990 })], counts)
    const placed = actives(plan)
    assert.strictEqual(placed[0], "m2")
    assert.strictEqual(placed[1], "m3")
  })

  it("stays balanced: every member gets floor(partitions / members) or one more, warm or not", () => {
    // m1 holds warm copies of every partition, m2 and m3 none: m1 still takes only 2 (4 = 2 + 1 + 1).
    const plan = Assignor.plan([member("m1", { 0: 5, 1: 5, 2: 5, 3: 5 }), member("m2"), member("m3")], counts)
    const loads = [...plan.assignments.values()].map((a) => (a["in"] ?? []).length).sort()
    assert.deepStrictEqual(loads, [1, 1, 2])
    assert.deepStrictEqual(plan.assignments.get("m1"), { in: [0, 1] })
    // Two members that both keep warm copies of all four never leave a third without work.
    const three = Assignor.plan([member("a", { 0: 9, 1: 9 }), member("b", { 2: 9, 3: 9 }), member("c")], counts)
    assert.deepStrictEqual([...three.assignments.values()].map((a) => (a["in"] ?? []).length).sort(), [1, 1, 2])
  })

  it("is deterministic whatever the order members arrive in", () => {
    const members = [member("m3", { 1: 7 }), member("m1", { 0: 3, 2: 3 }), member("m2", { 1: 7, 3: 1 })]
    const a = Assignor.plan(members, counts, 1)
    const b = Assignor.plan([...members].reverse(), counts, 1)
    assert.deepStrictEqual(actives(a), actives(b))
    assert.deepStrictEqual([...a.standbys].sort(), [...b.standbys].sort())
  })

  it("co-partitions: partition N of every input topic goes to one member", () => {
    const plan = Assignor.plan([member("m1", { 3: 100 }), member("m2")], new Map([["a", 4], ["b", 4]]))
    for (const assignment of plan.assignments.values()) assert.deepStrictEqual(assignment["a"], assignment["b"])
    assert.include(plan.assignments.get("m1")?.["a"] ?? [], 3)
  })

  it("standbys: up to standbyReplicas per partition, never on its active member, warmest first, spread out", () => {
    const plan = Assignor.plan([member("m1", { 0: 50, 1: 50 }), member("m2", { 2: 50, 3: 50, 0: 40 }), member("m3")], counts, 1)
    const placed = actives(plan)
    const holders = new Map<number, Array<string>>()
    for (const [memberId, partitions] of plan.standbys) {
      for (const p of partitions) holders.set(p, [...(holders.get(p) ?? []), memberId])
    }
    for (let p = 0; p < 4; p++) {
      assert.strictEqual(holders.get(p)?.length, 1, `partition ${p}`)
      assert.notInclude(holders.get(p) ?? [], placed[p])
    }
    // Partition 0 is active on m1: its standby is m2, whose copy is warm (lag 10) while m3 has none.
    assert.strictEqual(placed[0], "m1")
    assert.deepStrictEqual(holders.get(0), ["m2"])
    // Never more standbys than other members: two members, three replicas asked for, one standby each.
    const two = Assignor.plan([member("m1"), member("m2")], counts, 3)
    assert.deepStrictEqual(two.standbys.get("m1"), [1, 3])
    assert.deepStrictEqual(two.standbys.get("m2"), [0, 2])
    // One member alone: no standby anywhere.
    assert.strictEqual(Assignor.plan([member("m1")], counts, 2).standbys.size, 0)
  })

  it("members of an older Skein (no stores announced) are placed like members without copies", () => {
    const old: Assignor.Member = { memberId: "old", membership: undefined }
    const plan = Assignor.plan([old, member("m1", { 0: 10, 1: 10 })], counts, 1)
    assert.deepStrictEqual(plan.assignments.get("m1"), { in: [0, 1] })
    assert.deepStrictEqual(plan.assignments.get("old"), { in: [2, 3] })
    // Its subscription without `stores` decodes as having none.
    const legacy = AssignerProtocol.MemberMetadata.encode({
      version: 1,
      topics: ["in"],
      userData: Buffer.from(JSON.stringify({ skein: { owner: "count", since: 7 } }))
    })
    assert.deepStrictEqual(Assignor.decodeMembership(AssignerProtocol, legacy), { owner: "count", since: 7, stores: new Map() })
  })

  it("announces its stores in the subscription and reads them back; a malformed entry is left out", () => {
    const metadata = Assignor.subscription(AssignerProtocol, ["in"], { owner: "count", since: 1, stores: stores({ 0: 12, 3: 40 }) })
    assert.deepStrictEqual(Assignor.decodeMembership(AssignerProtocol, metadata), { owner: "count", since: 1, stores: stores({ 0: 12, 3: 40 }) })
    const odd = AssignerProtocol.MemberMetadata.encode({
      version: 1,
      topics: ["in"],
      userData: Buffer.from(JSON.stringify({ skein: { owner: "count", since: 1, stores: { "0": 5, "x": 1, "1": -2, "2": "9" } } }))
    })
    assert.deepStrictEqual(Assignor.decodeMembership(AssignerProtocol, odd)?.stores, stores({ 0: 5 }))
  })

  it("the standby marker round trip: partitions in, partitions out; none without a marker", () => {
    const topic = Assignor.standbyTopic([1, 3, 10])
    assert.strictEqual(topic, "__skein_standby__:1,3,10")
    assert.deepStrictEqual(Assignor.standbysOf(["in", topic]), [1, 3, 10])
    assert.deepStrictEqual(Assignor.standbysOf(["in"]), [])
    assert.deepStrictEqual(Assignor.standbysOf([Assignor.rejectionTopic("other")]), [])
    assert.isUndefined(Assignor.rejectionOf([topic]))
    // Through kafkajs's assignment codec, as the leader sends it: a topic with no partitions survives.
    const encoded = AssignerProtocol.MemberAssignment.encode({ version: 1, assignment: { in: [0, 2], [topic]: [] }, userData: Buffer.alloc(0) })
    const decoded = AssignerProtocol.MemberAssignment.decode(encoded)
    assert.deepStrictEqual(Assignor.standbysOf(Object.keys(decoded?.assignment ?? {})), [1, 3, 10])
  })
})
