/**
 * A co-partitioning assignor: partition N of every subscribed topic goes to
 * the same member, so one member owns the whole task N. kafkajs's default
 * round-robin assignor does not co-partition.
 *
 * @internal
 */
import kafkajs from "kafkajs"
import type { PartitionAssigner } from "kafkajs"

const { AssignerProtocol } = kafkajs

export const NAME = "SkeinCoPartitioned"

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

export const CoPartitionedAssigner: PartitionAssigner = ({ cluster }) => ({
  name: NAME,
  version: 1,
  async assign({ members, topics }) {
    const counts = new Map<string, number>()
    for (const topic of topics) {
      counts.set(topic, cluster.findTopicPartitionMetadata(topic).length)
    }
    const assignments = assign(members.map((m) => m.memberId), counts)
    return [...assignments].map(([memberId, assignment]) => ({
      memberId,
      memberAssignment: AssignerProtocol.MemberAssignment.encode({ version: 1, assignment, userData: Buffer.alloc(0) })
    }))
  },
  protocol({ topics }) {
    return {
      name: NAME,
      metadata: AssignerProtocol.MemberMetadata.encode({ version: 1, topics, userData: Buffer.alloc(0) })
    }
  }
})
