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
 * @internal
 */
import type { AssignerProtocol as KafkaAssignerProtocol, PartitionAssigner } from "kafkajs"
import { ConfigurationError } from "../../SkeinError.ts"

/** kafkajs's codec of the consumer protocol's subscriptions and assignments. */
export type AssignerProtocol = typeof KafkaAssignerProtocol

export const NAME = "SkeinCoPartitioned"

/** What a member runs, as announced in its subscription. */
export interface Membership {
  /** The transformer (or other owner) this member runs. */
  readonly owner: string
  /** When this member's run started (epoch ms): the earliest owner is the incumbent. */
  readonly since: number
}

/** A member of a join, with what it announced (`undefined`: nothing, e.g. an older Skein). */
export interface Member {
  readonly memberId: string
  readonly membership: Membership | undefined
}

/** Encodes a membership as subscription `userData`. */
export const encodeMembership = (membership: Membership): Buffer =>
  Buffer.from(JSON.stringify({ skein: { owner: membership.owner, since: membership.since } }), "utf8")

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
    return { owner: skein.owner, since }
  } catch {
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
    return undefined
  }
}

/** Assigns partition numbers to the sorted members round-robin, by number. */
export const assign = (
  memberIds: ReadonlyArray<string>,
  partitionCounts: ReadonlyMap<string, number>
): Map<string, Record<string, Array<number>>> => {
  const members = [...memberIds].sort()
  const result = new Map<string, Record<string, Array<number>>>(members.map((m) => [m, {}]))
  if (members.length === 0) return result
  for (const [topic, count] of partitionCounts) {
    for (let partition = 0; partition < count; partition++) {
      const member = members[partition % members.length]
      if (member === undefined) continue
      const assignment = result.get(member)
      if (assignment === undefined) continue
      const list = assignment[topic] ?? []
      list.push(partition)
      assignment[topic] = list
    }
  }
  return result
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

/** A join's plan: the partitions of the accepted members, and the incumbent owner for each rejected one. */
export interface Plan {
  readonly assignments: Map<string, Record<string, Array<number>>>
  readonly rejected: ReadonlyMap<string, { readonly owner: string; readonly incumbent: string }>
}

/** Plans a join: co-partitioned assignments among the incumbent's members (and members without an owner). */
export const plan = (members: ReadonlyArray<Member>, partitionCounts: ReadonlyMap<string, number>): Plan => {
  const owner = incumbent(members)
  const rejected = new Map<string, { readonly owner: string; readonly incumbent: string }>()
  const accepted: Array<string> = []
  for (const { memberId, membership } of members) {
    if (owner !== undefined && membership !== undefined && membership.owner !== owner) {
      rejected.set(memberId, { owner: membership.owner, incumbent: owner })
    } else {
      accepted.push(memberId)
    }
  }
  return { assignments: assign(accepted, partitionCounts), rejected }
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

/**
 * The assignor of a group run by `owner` (a transformer's name; `undefined`
 * announces nothing), started at `since` (epoch ms).
 */
export const make = (
  protocol: AssignerProtocol,
  owner: string | undefined,
  since: number = Date.now()
): PartitionAssigner =>
({ cluster }) => ({
  name: NAME,
  version: 1,
  async assign({ members, topics }) {
    const counts = new Map<string, number>()
    for (const topic of topics) {
      counts.set(topic, cluster.findTopicPartitionMetadata(topic).length)
    }
    const decided = plan(
      members.map((m) => ({ memberId: m.memberId, membership: decodeMembership(protocol, m.memberMetadata) })),
      counts
    )
    const encode = (assignment: Record<string, Array<number>>) =>
      protocol.MemberAssignment.encode({ version: 1, assignment, userData: Buffer.alloc(0) })
    return [
      ...[...decided.assignments].map(([memberId, assignment]) => ({ memberId, memberAssignment: encode(assignment) })),
      ...[...decided.rejected].map(([memberId, { incumbent }]) => ({
        memberId,
        memberAssignment: encode({ [rejectionTopic(incumbent)]: [] })
      }))
    ]
  },
  protocol({ topics }) {
    return { name: NAME, metadata: subscription(protocol, topics, owner === undefined ? undefined : { owner, since }) }
  }
})
