/**
 * A co-partitioning assignor: partition N of every subscribed topic goes to
 * the same member, so one member owns the whole task N. kafkajs's default
 * round-robin assignor does not co-partition.
 *
 * It also keeps one owner per group. Every member announces what it runs (a
 * transformer's name) and since when in its subscription's `userData`. Two
 * transformers under one `applicationId` share the group and the
 * transactional ids `{applicationId}-{partition}`, so they would fence each
 * other forever; the leader gives the partitions only to the members of the
 * owner that joined first (the incumbent) and hands every other owner's
 * member a marker instead, on which it fails (see `rejectionOf`). A member
 * without `userData` (an older Skein) is accepted as any owner.
 *
 * Warm copies: each member also announces the changelog offset of every
 * local store it keeps (`stores`), and the leader gives a partition to the
 * member whose copy is the most caught up, within a balanced assignment
 * (`place`). With `standbyReplicas` above 0 it also picks, per partition,
 * members to keep a standby copy warm, and tells each its standbys through a
 * second marker topic (`standbysOf`).
 *
 * Query routes: a member with a query endpoint announces it (`endpoint`,
 * Kafka Streams' `application.server`), and the leader sends every member
 * the endpoint of each partition's owner and standbys through a third marker
 * topic (`queryRoutesOf`), so that any instance can forward a query.
 *
 * @internal
 */
import type { AssignerProtocol as KafkaAssignerProtocol, PartitionAssigner } from "kafkajs"
import { ConfigurationError } from "../../SkeinError.ts"
import * as QueryRoutes from "../query/QueryRoutes.ts"

/** kafkajs's codec of the consumer protocol's subscriptions and assignments. */
export type AssignerProtocol = typeof KafkaAssignerProtocol

export const NAME = "SkeinCoPartitioned"

/** What a member runs, as announced in its subscription. */
export interface Membership {
  /** The transformer (or other owner) this member runs. */
  readonly owner: string
  /** When this member's run started (epoch ms): the earliest owner is the incumbent. */
  readonly since: number
  /**
   * The local stores this member keeps, by partition: the changelog offset
   * each reflects (its next offset to read). Empty for an older Skein or a
   * stateless transformer.
   */
  readonly stores?: ReadonlyMap<number, number> | undefined
  /**
   * The member's query endpoint (`host:port`, Kafka Streams'
   * `application.server`): the leader sends every member the endpoint of
   * each partition's owner. Unset: no endpoint (or an older Skein).
   */
  readonly endpoint?: string | undefined
}

/** A member of a join, with what it announced (`undefined`: nothing, e.g. an older Skein). */
export interface Member {
  readonly memberId: string
  readonly membership: Membership | undefined
}

/** Encodes a membership as subscription `userData`. */
export const encodeMembership = (membership: Membership): Buffer => {
  const stores: Record<string, number> = {}
  for (const [partition, offset] of membership.stores ?? []) stores[String(partition)] = offset
  return Buffer.from(
    JSON.stringify({
      skein: {
        owner: membership.owner,
        since: membership.since,
        stores,
        ...(membership.endpoint === undefined ? {} : { endpoint: membership.endpoint })
      }
    }),
    "utf8"
  )
}

/** The `stores` of an announcement: partitions (non-negative integers) to offsets (non-negative integers); anything else is left out. */
const decodeStores = (value: unknown): ReadonlyMap<number, number> => {
  const stores = new Map<number, number>()
  if (typeof value !== "object" || value === null) return stores
  for (const [key, offset] of Object.entries(value)) {
    const partition = Number(key)
    if (!Number.isSafeInteger(partition) || partition < 0 || String(partition) !== key) continue
    if (typeof offset !== "number" || !Number.isSafeInteger(offset) || offset < 0) continue
    stores.set(partition, offset)
  }
  return stores
}

const decodeUserData = (userData: Buffer | null | undefined): Membership | undefined => {
  if (userData === null || userData === undefined || userData.length === 0) return undefined
  try {
    const parsed: unknown = JSON.parse(userData.toString("utf8"))
    if (typeof parsed !== "object" || parsed === null || !("skein" in parsed)) return undefined
    const skein: unknown = parsed.skein
    if (typeof skein !== "object" || skein === null || !("owner" in skein) || typeof skein.owner !== "string") {
      return undefined
    }
    const since = "since" in skein && typeof skein.since === "number" ? skein.since : 0
    // A member of an older Skein announces no stores: it has none to prefer.
    const stores = decodeStores("stores" in skein ? skein.stores : undefined)
    const endpoint = "endpoint" in skein && typeof skein.endpoint === "string" &&
        QueryRoutes.invalidEndpoint(skein.endpoint) === undefined
      ? skein.endpoint
      : undefined
    return endpoint === undefined ? { owner: skein.owner, since, stores } : { owner: skein.owner, since, stores, endpoint }
  } catch {
    // Not JSON: a member of another client, accepted as announcing nothing.
    return undefined
  }
}

/** What a member's subscription metadata announces; `undefined` for none or for metadata that does not decode. */
export const decodeMembership = (
  protocol: AssignerProtocol,
  memberMetadata: Buffer | null | undefined
): Membership | undefined => {
  if (memberMetadata === null || memberMetadata === undefined || memberMetadata.length === 0) return undefined
  try {
    return decodeUserData(protocol.MemberMetadata.decode(memberMetadata)?.userData)
  } catch {
    // Undecodable metadata: the member announces nothing (accepted as any owner).
    return undefined
  }
}

/** Where each partition number runs: its active member, and the members keeping a standby of it. */
export interface Placement {
  /** Partition number to its active member. */
  readonly active: ReadonlyMap<number, string>
  /** Partition number to the members keeping a standby copy of its store (never its active member). */
  readonly standbys: ReadonlyMap<number, ReadonlyArray<string>>
}

/**
 * Places `partitions` partition numbers on the members, preferring warm copies.
 *
 * A member's lag for a partition is the highest offset any member announced
 * for it minus its own; a member without a copy has none. The active member
 * of each partition: pairs (member with a copy, partition) in order of
 * increasing lag (ties: smaller member id, then partition) while the member
 * has room; then every partition left goes to the least-loaded member (ties:
 * smaller member id), in partition order. Room keeps the assignment balanced:
 * every member gets `floor(partitions / members)` or one more. With no copies
 * announced it is round-robin over the sorted member ids.
 *
 * Standbys: for each partition, up to `standbyReplicas` members other than
 * its active one (never more than members - 1), preferring a smaller lag
 * (a copy over none), then fewer standbys held, then the smaller member id.
 */
export const place = (
  members: ReadonlyArray<{ readonly memberId: string; readonly stores: ReadonlyMap<number, number> }>,
  partitions: number,
  standbyReplicas: number
): Placement => {
  const sorted = [...members].sort((a, b) => (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0))
  const active = new Map<number, string>()
  const standbys = new Map<number, Array<string>>()
  if (sorted.length === 0 || partitions <= 0) return { active, standbys }
  const highest = new Map<number, number>()
  for (const { stores } of sorted) {
    for (const [partition, offset] of stores) {
      if (partition < partitions) highest.set(partition, Math.max(highest.get(partition) ?? 0, offset))
    }
  }
  const lagOf = (stores: ReadonlyMap<number, number>, partition: number): number => {
    const offset = stores.get(partition)
    return offset === undefined ? Infinity : Math.max(0, (highest.get(partition) ?? 0) - offset)
  }
  // Balance: floor(partitions / members) each, and `extra` members one more.
  const base = Math.floor(partitions / sorted.length)
  let extra = partitions % sorted.length
  const load = new Map<string, number>(sorted.map((m) => [m.memberId, 0]))
  const hasRoom = (memberId: string): boolean => {
    const n = load.get(memberId) ?? 0
    return n < base || (n === base && extra > 0)
  }
  const take = (memberId: string, partition: number): void => {
    const n = load.get(memberId) ?? 0
    if (n === base) extra--
    load.set(memberId, n + 1)
    active.set(partition, memberId)
  }
  const warm: Array<{ readonly memberId: string; readonly partition: number; readonly lag: number }> = []
  for (const { memberId, stores } of sorted) {
    for (const partition of stores.keys()) {
      if (partition < partitions) warm.push({ memberId, partition, lag: lagOf(stores, partition) })
    }
  }
  warm.sort((a, b) =>
    a.lag - b.lag || (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0) || a.partition - b.partition
  )
  for (const { memberId, partition } of warm) {
    if (!active.has(partition) && hasRoom(memberId)) take(memberId, partition)
  }
  for (let partition = 0; partition < partitions; partition++) {
    if (active.has(partition)) continue
    let least: string | undefined = undefined
    for (const { memberId } of sorted) {
      if (least === undefined || (load.get(memberId) ?? 0) < (load.get(least) ?? 0)) least = memberId
    }
    if (least !== undefined) take(least, partition)
  }
  const replicas = Math.min(Math.max(0, Math.floor(standbyReplicas)), sorted.length - 1)
  if (replicas > 0) {
    const held = new Map<string, number>(sorted.map((m) => [m.memberId, 0]))
    for (let partition = 0; partition < partitions; partition++) {
      const owner = active.get(partition)
      const chosen = sorted
        .filter((m) => m.memberId !== owner)
        .map((m) => ({ memberId: m.memberId, lag: lagOf(m.stores, partition) }))
        .sort((a, b) =>
          (a.lag === b.lag ? 0 : a.lag < b.lag ? -1 : 1) ||
          (held.get(a.memberId) ?? 0) - (held.get(b.memberId) ?? 0) ||
          (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0)
        )
        .slice(0, replicas)
        .map((m) => m.memberId)
      for (const memberId of chosen) held.set(memberId, (held.get(memberId) ?? 0) + 1)
      standbys.set(partition, chosen)
    }
  }
  return { active, standbys }
}

/**
 * Assigns partition N of every topic to one member (co-partitioning),
 * placed by `place`; returns each member's assignment and its standby partitions.
 */
export const assign = (
  members: ReadonlyArray<{ readonly memberId: string; readonly stores: ReadonlyMap<number, number> }>,
  partitionCounts: ReadonlyMap<string, number>,
  standbyReplicas: number = 0
): {
  readonly assignments: Map<string, Record<string, Array<number>>>
  readonly standbys: Map<string, Array<number>>
} => {
  const ids = [...members.map((m) => m.memberId)].sort()
  const assignments = new Map<string, Record<string, Array<number>>>(ids.map((m) => [m, {}]))
  const standbys = new Map<string, Array<number>>()
  const partitions = Math.max(0, ...partitionCounts.values())
  const placement = place(members, partitions, standbyReplicas)
  for (const [topic, count] of partitionCounts) {
    for (let partition = 0; partition < count; partition++) {
      const member = placement.active.get(partition)
      const assignment = member === undefined ? undefined : assignments.get(member)
      if (assignment === undefined) continue
      const list = assignment[topic] ?? []
      list.push(partition)
      assignment[topic] = list
    }
  }
  for (const [partition, holders] of [...placement.standbys].sort(([a], [b]) => a - b)) {
    for (const member of holders) standbys.set(member, [...(standbys.get(member) ?? []), partition])
  }
  return { assignments, standbys }
}

/** The owner whose members get the partitions: the one that joined first (ties: the smallest member id). */
export const incumbent = (members: ReadonlyArray<Member>): string | undefined => {
  let first: { readonly memberId: string; readonly membership: Membership } | undefined = undefined
  for (const { memberId, membership } of members) {
    if (membership === undefined) continue
    if (
      first === undefined || membership.since < first.membership.since ||
      (membership.since === first.membership.since && memberId < first.memberId)
    ) first = { memberId, membership }
  }
  return first?.membership.owner
}

/** A join's plan: the partitions and standbys of the accepted members, and the incumbent owner for each rejected one. */
export interface Plan {
  readonly assignments: Map<string, Record<string, Array<number>>>
  /** Standby partitions per accepted member (members without any are left out). */
  readonly standbys: ReadonlyMap<string, ReadonlyArray<number>>
  readonly rejected: ReadonlyMap<string, { readonly owner: string; readonly incumbent: string }>
}

const noStores: ReadonlyMap<number, number> = new Map()

/**
 * Plans a join: co-partitioned assignments among the incumbent's members (and
 * members without an owner), warm copies preferred, with up to
 * `standbyReplicas` standbys per partition.
 */
export const plan = (
  members: ReadonlyArray<Member>,
  partitionCounts: ReadonlyMap<string, number>,
  standbyReplicas: number = 0
): Plan => {
  const owner = incumbent(members)
  const rejected = new Map<string, { readonly owner: string; readonly incumbent: string }>()
  const accepted: Array<{ readonly memberId: string; readonly stores: ReadonlyMap<number, number> }> = []
  for (const { memberId, membership } of members) {
    if (owner !== undefined && membership !== undefined && membership.owner !== owner) {
      rejected.set(memberId, { owner: membership.owner, incumbent: owner })
    } else {
      accepted.push({ memberId, stores: membership?.stores ?? noStores })
    }
  }
  const { assignments, standbys } = assign(accepted, partitionCounts, standbyReplicas)
  return { assignments, standbys, rejected }
}

/**
 * The marker a rejected member receives in place of partitions: a topic name
 * no member subscribes to, which kafkajs reports as an unsubscribed topic
 * (its assignment's `userData` is not exposed).
 */
const REJECTED_PREFIX = "__skein_rejected__:"

/** The marker topic telling a member that the group belongs to `incumbent`. */
export const rejectionTopic = (incumbent: string): string => `${REJECTED_PREFIX}${incumbent}`

/** The incumbent owner named by a rejection marker among assigned topics, if any. */
export const rejectionOf = (topics: ReadonlyArray<string>): string | undefined => {
  const marker = topics.find((topic) => topic.startsWith(REJECTED_PREFIX))
  return marker === undefined ? undefined : marker.slice(REJECTED_PREFIX.length)
}

/**
 * The marker carrying a member's standby partitions: a topic name no member
 * subscribes to (`__skein_standby__:1,3`, with no partitions of its own),
 * which kafkajs reports as an unsubscribed topic during the group sync,
 * before the join completes, and leaves out of what it fetches.
 */
const STANDBY_PREFIX = "__skein_standby__:"

/** The marker topic giving a member the standbys of `partitions`. */
export const standbyTopic = (partitions: ReadonlyArray<number>): string => `${STANDBY_PREFIX}${partitions.join(",")}`

/** The standby partitions named by a standby marker among assigned topics; empty without one. */
export const standbysOf = (topics: ReadonlyArray<string>): ReadonlyArray<number> => {
  const marker = topics.find((topic) => topic.startsWith(STANDBY_PREFIX))
  if (marker === undefined) return []
  const body = marker.slice(STANDBY_PREFIX.length)
  if (body.length === 0) return []
  const partitions: Array<number> = []
  for (const part of body.split(",")) {
    const partition = Number(part)
    if (Number.isSafeInteger(partition) && partition >= 0 && String(partition) === part) partitions.push(partition)
  }
  return [...new Set(partitions)].sort((a, b) => a - b)
}

/**
 * The marker carrying the generation's query routes (`QueryRoutes`): which
 * member's endpoint runs each partition and keeps its standbys, a topic name
 * no member subscribes to, sent to every accepted member when any member
 * announced an endpoint.
 */
const ROUTES_PREFIX = "__skein_routes__:"

/** The longest marker sent: a topic name in the group protocol is at most 32,767 bytes. */
const maxMarkerLength = 30_000

/**
 * The query routes of a plan: each partition's active member's endpoint and
 * its standbys' endpoints (members without one left out).
 */
export const routesOf = (
  decided: Pick<Plan, "assignments" | "standbys">,
  endpoints: ReadonlyMap<string, string>
): QueryRoutes.QueryRoutes => {
  const active: Array<string | null> = []
  const standbys: Array<Array<string>> = []
  const grow = (partition: number) => {
    while (active.length <= partition) {
      active.push(null)
      standbys.push([])
    }
  }
  for (const [memberId, assignment] of decided.assignments) {
    const endpoint = endpoints.get(memberId) ?? null
    for (const list of Object.values(assignment)) {
      for (const partition of list) {
        grow(partition)
        active[partition] = endpoint
      }
    }
  }
  for (const [memberId, partitions] of decided.standbys) {
    const endpoint = endpoints.get(memberId)
    if (endpoint === undefined) continue
    for (const partition of partitions) {
      grow(partition)
      standbys[partition]?.push(endpoint)
    }
  }
  for (const list of standbys) list.sort()
  return { active, standbys }
}

/** The marker topic carrying `routes`; without standbys if too long, `undefined` if still too long. */
export const routesTopic = (routes: QueryRoutes.QueryRoutes): string | undefined => {
  const full = `${ROUTES_PREFIX}${QueryRoutes.encode(routes)}`
  if (Buffer.byteLength(full) <= maxMarkerLength) return full
  const activeOnly = `${ROUTES_PREFIX}${QueryRoutes.encode(routes, false)}`
  return Buffer.byteLength(activeOnly) <= maxMarkerLength ? activeOnly : undefined
}

/** The query routes named by a routes marker among assigned topics, if any. */
export const queryRoutesOf = (topics: ReadonlyArray<string>): QueryRoutes.QueryRoutes | undefined => {
  const marker = topics.find((topic) => topic.startsWith(ROUTES_PREFIX))
  return marker === undefined ? undefined : QueryRoutes.decode(marker.slice(ROUTES_PREFIX.length))
}

/** A member's subscription metadata: its topics, and what it runs (nothing when `undefined`). */
export const subscription = (
  protocol: AssignerProtocol,
  topics: ReadonlyArray<string>,
  membership: Membership | undefined
): Buffer =>
  protocol.MemberMetadata.encode({
    version: 1,
    topics: [...topics],
    userData: membership === undefined ? Buffer.alloc(0) : encodeMembership(membership)
  })

/** The error of a member whose group is run by another owner: the problem and the fix. */
export const ownerConflict = (groupId: string, incumbent: string, owner: string): ConfigurationError =>
  new ConfigurationError({
    problem: `Consumer group "${groupId}" (the applicationId) is in use by transformer "${incumbent}"; this instance ` +
      `runs transformer "${owner}". Two transformers under one applicationId share its consumer group and its ` +
      `transactional ids ${groupId}-{partition}, so they would fence each other forever`,
    fix: `Give each transformer its own applicationId (SKEIN_APPLICATION_ID), e.g. "${groupId}-${owner}"`
  })

/** What a member announces at each join, read synchronously when kafkajs joins the group. */
export interface Announcement {
  /** The owner (a transformer's name); `undefined` announces nothing. */
  readonly owner: string | undefined
  /** When this member's run started (epoch ms). */
  readonly since: number
  /** The local stores to announce now (partition to changelog offset); called at each join. */
  readonly stores: () => ReadonlyMap<number, number>
  /** Standbys per partition this member gives out when it leads the group (0: none). */
  readonly standbyReplicas: number
  /** This member's query endpoint to announce now (`host:port`); `undefined`: none. Called at each join. */
  readonly endpoint: () => string | undefined
}

/**
 * The leader's answer to a join: each member's encoded assignment (its
 * partitions, its standby marker, the routes marker when any member
 * announced a query endpoint), and a rejection marker for each member of
 * another owner.
 */
export const leaderAssignment = (
  protocol: AssignerProtocol,
  members: ReadonlyArray<{ readonly memberId: string; readonly memberMetadata: Buffer }>,
  counts: ReadonlyMap<string, number>,
  standbyReplicas: number
): Array<{ readonly memberId: string; readonly memberAssignment: Buffer }> => {
  const announced = members.map((m) => ({ memberId: m.memberId, membership: decodeMembership(protocol, m.memberMetadata) }))
  const decided = plan(announced, counts, standbyReplicas)
  const endpoints = new Map<string, string>()
  for (const { memberId, membership } of announced) {
    if (membership?.endpoint !== undefined) endpoints.set(memberId, membership.endpoint)
  }
  const routes = endpoints.size === 0 ? undefined : routesTopic(routesOf(decided, endpoints))
  const encode = (assignment: Record<string, Array<number>>) =>
    protocol.MemberAssignment.encode({ version: 1, assignment, userData: Buffer.alloc(0) })
  return [
    ...[...decided.assignments].map(([memberId, assignment]) => {
      const standbys = decided.standbys.get(memberId) ?? []
      const markers: Record<string, Array<number>> = {}
      if (standbys.length > 0) markers[standbyTopic(standbys)] = []
      if (routes !== undefined) markers[routes] = []
      return { memberId, memberAssignment: encode({ ...assignment, ...markers }) }
    }),
    ...[...decided.rejected].map(([memberId, { incumbent }]) => ({
      memberId,
      memberAssignment: encode({ [rejectionTopic(incumbent)]: [] })
    }))
  ]
}

/**
 * The assignor of a group run by `owner` (a transformer's name; `undefined`
 * announces nothing), started at `since` (epoch ms), announcing its local
 * stores and, as the leader, placing `standbyReplicas` standbys per partition.
 */
export const make = (
  protocol: AssignerProtocol,
  owner: string | undefined,
  since: number = Date.now(),
  options: Partial<Pick<Announcement, "stores" | "standbyReplicas" | "endpoint">> = {}
): PartitionAssigner =>
({ cluster }) => ({
  name: NAME,
  version: 1,
  async assign({ members, topics }) {
    const counts = new Map<string, number>()
    for (const topic of topics) {
      counts.set(topic, cluster.findTopicPartitionMetadata(topic).length)
    }
    return leaderAssignment(protocol, members, counts, options.standbyReplicas ?? 0)
  },
  protocol({ topics }) {
    const stores = options.stores?.() ?? noStores
    return {
      name: NAME,
      metadata: subscription(
        protocol,
        topics,
        owner === undefined ? undefined : { owner, since, stores, endpoint: options.endpoint?.() }
      )
    }
  }
})
