/**
 * Admin operations the runtime needs, behind Skein's own types.
 *
 * @internal
 */
import { Effect, Schedule } from "effect"
import type { Scope } from "effect"
import type { Admin } from "kafkajs"
import { KafkaError, TopicNotFound } from "../../SkeinError.ts"
import * as Assignor from "./assignor.ts"
import { connectOrDisconnect, explainGroupFailure } from "./client.ts"
import type { Kafka } from "./client.ts"
import { isUnknownTopic, lostBroker, securityFailure, toKafkaError } from "./errors.ts"
import type { Access } from "./errors.ts"
import * as PatchedKafkajs from "./patchedKafkajs.ts"

export interface KafkaAdmin {
  /** Partition count per topic; fails with `TopicNotFound` for a missing topic. */
  readonly partitionCounts: (
    topics: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyMap<string, number>, KafkaError | TopicNotFound>
  /** Partition count of a topic, or `undefined` when it does not exist. */
  readonly partitionCount: (topic: string) => Effect.Effect<number | undefined, KafkaError>
  /** Creates a compacted topic (no-op when it exists). */
  readonly createCompactedTopic: (
    topic: string,
    partitions: number,
    replicationFactor: number
  ) => Effect.Effect<void, KafkaError>
  /** Creates a topic with the broker's default configuration (no-op when it exists). */
  readonly createTopic: (
    topic: string,
    partitions: number,
    replicationFactor: number
  ) => Effect.Effect<void, KafkaError>
  /**
   * Creates a repartition topic (no-op when it exists): records are kept without
   * a time limit (`retention.ms` -1), since the time they carry is their event
   * time, and deleted once read (`deleteRecordsBefore`), as Kafka Streams does.
   */
  readonly createRepartitionTopic: (
    topic: string,
    partitions: number,
    replicationFactor: number
  ) => Effect.Effect<void, KafkaError>
  /** A topic's effective `retention.ms` (-1: no limit), or `undefined` when it may not be read. */
  readonly retentionMs: (topic: string) => Effect.Effect<number | undefined, KafkaError>
  /** A topic's effective `cleanup.policy` (`compact`, `delete`, `compact,delete`), or `undefined` when it may not be read. */
  readonly cleanupPolicy: (topic: string) => Effect.Effect<string | undefined, KafkaError>
  /** A group's committed offset per partition of `topic` (partitions without one left out). */
  readonly groupOffsets: (
    groupId: string,
    topic: string
  ) => Effect.Effect<ReadonlyArray<{ readonly partition: number; readonly offset: number }>, KafkaError>
  /** Deletes the records of `topic` below each offset given (DeleteRecords). */
  readonly deleteRecordsBefore: (
    topic: string,
    offsets: ReadonlyArray<{ readonly partition: number; readonly offset: number }>
  ) => Effect.Effect<void, KafkaError>
  /** Committed offsets of a group for one partition of several topics (-1: none). */
  readonly committedOffsets: (
    groupId: string,
    topics: ReadonlyArray<string>,
    partition: number
  ) => Effect.Effect<ReadonlyMap<string, number>, KafkaError>
  /**
   * The earliest offset and the end offset (high watermark: kafkajs's ListOffsets
   * is read_uncommitted) of a partition. Read after fencing a partition's only
   * transactional writer, no transaction of it is open, so the end is stable.
   */
  readonly offsetRange: (
    topic: string,
    partition: number
  ) => Effect.Effect<{ readonly low: number; readonly end: number; readonly partitions: number }, KafkaError>
  /**
   * What an output topic accepts (its `max.message.bytes` and timestamp
   * limits), or `undefined` when the topic does not exist (yet) or its
   * configuration may not be read.
   */
  readonly outputTopicConfig: (topic: string) => Effect.Effect<OutputTopicConfig | undefined, KafkaError>
  /**
   * The current members of a consumer group, with what each announced through
   * Skein's assignor (`undefined` for a member of an older Skein or another
   * client). Empty for a group with no members or none at all.
   */
  readonly groupMembers: (groupId: string) => Effect.Effect<ReadonlyArray<Assignor.Member>, KafkaError>
}

/**
 * The configuration of a topic that decides which records its broker
 * accepts; each value is the topic's effective one (its own, else the
 * broker's), absent when the broker did not return it.
 */
export interface OutputTopicConfig {
  readonly maxMessageBytes: number | undefined
  /** `message.timestamp.type`: with `LogAppendTime` the broker stamps records itself and checks no timestamp. */
  readonly timestampType: string | undefined
  /** `message.timestamp.after.max.ms`: how far ahead of the broker's clock a timestamp may be. */
  readonly timestampAfterMaxMs: number | undefined
  /** `message.timestamp.before.max.ms`: how far behind the broker's clock a timestamp may be. */
  readonly timestampBeforeMaxMs: number | undefined
}

const outputTopicConfigNames = [
  "max.message.bytes",
  "message.timestamp.type",
  "message.timestamp.after.max.ms",
  "message.timestamp.before.max.ms"
]

/** True for kafkajs errors the broker marks retriable (a leader moving, metadata not yet propagated). */
const isRetriable = (error: KafkaError): boolean => retriable(error.cause)

/**
 * kafkajs's answer may be retried: it says so, or it gathers answers that each say so (a
 * `KafkaJSAggregateError`, e.g. CreateTopics's REQUEST_TIMED_OUT per topic from a controller
 * that is starting up or busy).
 */
const retriable = (cause: unknown): boolean => {
  if (typeof cause !== "object" || cause === null) return false
  if ("retriable" in cause && cause.retriable === true) return true
  return "errors" in cause && Array.isArray(cause.errors) && cause.errors.length > 0 && cause.errors.every(retriable)
}

/** kafkajs's own retries cover requests, not a new topic whose leader metadata is still propagating: a few more seconds. */
const retries = Schedule.intersect(Schedule.exponential("100 millis"), Schedule.recurs(8))

const attempt = <A>(operation: string, f: () => Promise<A>, access?: Access): Effect.Effect<A, KafkaError> =>
  Effect.tryPromise({ try: f, catch: toKafkaError(operation, access) }).pipe(
    Effect.retry({ schedule: retries, while: isRetriable })
  )

/**
 * A call failed because a broker it needed is gone (never a security failure): kafkajs looks a
 * group's coordinator (or a partition's leader) up once a call and retries that broker until its
 * retries end, while a killed broker's coordinators and leaders move to the live ones within
 * seconds; a new call asks again.
 */
const brokerLost = (error: KafkaError): boolean => lostBroker(error.cause) && securityFailure(error) === undefined

/**
 * The retries of a call made again while a broker it needs is gone: bounded, so that a cluster
 * that stays unreachable fails the call about a minute (and kafkajs's retries of the last attempt) later.
 */
const pastLostBroker = retries.pipe(Schedule.upTo("60 seconds"))

/** `attempt`, made again while a broker it needs is gone too (`brokerLost`). */
const attemptPastLostBroker = <A>(operation: string, f: () => Promise<A>, access?: Access): Effect.Effect<A, KafkaError> =>
  Effect.tryPromise({ try: f, catch: toKafkaError(operation, access) }).pipe(
    Effect.retry({ schedule: pastLostBroker, while: (error) => isRetriable(error) || brokerLost(error) })
  )

/**
 * How long a topic that must exist is asked for again before it is `TopicNotFound`: about 3 s, for a
 * new topic's metadata to reach every broker. A topic that does not exist fails after it.
 */
const metadataSettles = Schedule.intersect(Schedule.exponential("100 millis"), Schedule.recurs(5))

/** The admin operations over a connected kafkajs admin client (tests give it one of their own). */
export const makeFrom = (kafkajs: PatchedKafkajs.KafkaJS, kafka: Kafka, admin: Admin): KafkaAdmin => {
  const partitionCount = (topic: string) =>
    // An unknown topic is an answer here, not a transient state: not asked again (a lost broker is).
    Effect.tryPromise({
      try: () => admin.fetchTopicMetadata({ topics: [topic] }),
      catch: toKafkaError("fetchTopicMetadata", { topics: [topic], topicOperation: "DESCRIBE" })
    }).pipe(
      // A broker killed or restarting while asked: its metadata is on every other one.
      Effect.retry({ schedule: pastLostBroker, while: brokerLost }),
      Effect.map((metadata): number | undefined => metadata.topics[0]?.partitions.length),
      Effect.catchIf((e) => isUnknownTopic(e.cause), () => Effect.succeed(undefined))
    )
  return {
    partitionCount,
    partitionCounts: (topics) =>
      Effect.forEach(topics, (topic) =>
        partitionCount(topic).pipe(
          Effect.flatMap((count) =>
            count === undefined ? Effect.fail(new TopicNotFound({ topic })) : Effect.succeed([topic, count] as const)
          ),
          // A topic just created (a repartition topic, by this instance or another) reaches each broker's
          // metadata a little after CreateTopics returns: the broker asked may not know it yet.
          Effect.retry({ schedule: metadataSettles, while: (error) => error._tag === "TopicNotFound" })
        )).pipe(Effect.map((entries) => new Map(entries))),
    createCompactedTopic: (topic, partitions, replicationFactor) =>
      attemptPastLostBroker("createTopics", () =>
        admin.createTopics({
          waitForLeaders: true,
          topics: [{
            topic,
            numPartitions: partitions,
            replicationFactor,
            configEntries: [{ name: "cleanup.policy", value: "compact" }]
          }]
        }), { topics: [topic], topicOperation: "CREATE", clusterOperation: "CREATE" }).pipe(Effect.asVoid),
    createTopic: (topic, partitions, replicationFactor) =>
      attemptPastLostBroker("createTopics", () =>
        admin.createTopics({
          waitForLeaders: true,
          topics: [{ topic, numPartitions: partitions, replicationFactor }]
        }), { topics: [topic], topicOperation: "CREATE", clusterOperation: "CREATE" }).pipe(Effect.asVoid),
    createRepartitionTopic: (topic, partitions, replicationFactor) =>
      attemptPastLostBroker("createTopics", () =>
        admin.createTopics({
          waitForLeaders: true,
          topics: [{
            topic,
            numPartitions: partitions,
            replicationFactor,
            configEntries: [{ name: "cleanup.policy", value: "delete" }, { name: "retention.ms", value: "-1" }]
          }]
        }), { topics: [topic], topicOperation: "CREATE", clusterOperation: "CREATE" }).pipe(Effect.asVoid),
    retentionMs: (topic) =>
      // kafkajs's describeConfigs gives up at once when the broker it asks is down (a broker
      // being restarted): retried here, as the other admin calls are.
      attempt("describeConfigs", () =>
        admin.describeConfigs({
          includeSynonyms: false,
          resources: [{ type: kafkajs.ConfigResourceTypes.TOPIC, name: topic, configNames: ["retention.ms"] }]
        }), { topics: [topic], topicOperation: "DESCRIBE_CONFIGS" }).pipe(
        Effect.map((result) => {
          const value = result.resources[0]?.configEntries.find((e) => e.configName === "retention.ms")?.configValue
          return value === undefined || value === null ? undefined : Number(value)
        }),
        Effect.catchIf((e) => securityFailure(e)?._tag === "AuthorizationFailed", () => Effect.succeed(undefined))
      ),
    cleanupPolicy: (topic) =>
      attempt("describeConfigs", () =>
        admin.describeConfigs({
          includeSynonyms: false,
          resources: [{ type: kafkajs.ConfigResourceTypes.TOPIC, name: topic, configNames: ["cleanup.policy"] }]
        }), { topics: [topic], topicOperation: "DESCRIBE_CONFIGS" }).pipe(
        Effect.map((result) => {
          const value = result.resources[0]?.configEntries.find((e) => e.configName === "cleanup.policy")?.configValue
          return value === undefined || value === null ? undefined : value
        }),
        Effect.catchIf((e) => securityFailure(e)?._tag === "AuthorizationFailed", () => Effect.succeed(undefined))
      ),
    groupOffsets: (groupId, topic) =>
      attempt("fetchOffsets", () => admin.fetchOffsets({ groupId, topics: [topic] }), {
        topics: [topic],
        topicOperation: "DESCRIBE",
        group: groupId,
        groupOperation: "READ"
      }).pipe(
        Effect.map((result) =>
          (result.find((entry) => entry.topic === topic)?.partitions ?? [])
            .map((p) => ({ partition: p.partition, offset: Number(p.offset) }))
            .filter((p) => p.offset >= 0)
        )
      ),
    deleteRecordsBefore: (topic, offsets) =>
      attempt("deleteTopicRecords", () =>
        admin.deleteTopicRecords({
          topic,
          partitions: offsets.map((o) => ({ partition: o.partition, offset: String(o.offset) }))
        }), { topics: [topic], topicOperation: "DELETE" }),
    committedOffsets: (groupId, topics, partition) =>
      attempt("fetchOffsets", () => admin.fetchOffsets({ groupId, topics: [...topics] }), {
        topics,
        topicOperation: "DESCRIBE",
        group: groupId,
        groupOperation: "READ"
      }).pipe(
        Effect.catchAll(explainGroupFailure(kafka, groupId)),
        Effect.map((result) => {
          const offsets = new Map<string, number>()
          for (const entry of result) {
            const found = entry.partitions.find((p) => p.partition === partition)
            offsets.set(entry.topic, found === undefined ? -1 : Number(found.offset))
          }
          return offsets
        })
      ),
    offsetRange: (topic, partition) =>
      attempt("fetchTopicOffsets", () => admin.fetchTopicOffsets(topic), { topics: [topic], topicOperation: "DESCRIBE" }).pipe(
        Effect.map((offsets) => {
          // A partition the topic does not have reads as empty: callers check `partitions`.
          const found = offsets.find((o) => o.partition === partition)
          return { low: Number(found?.low ?? 0), end: Number(found?.high ?? 0), partitions: offsets.length }
        })
      ),
    outputTopicConfig: (topic) =>
      attempt("describeConfigs", () =>
        admin.describeConfigs({
          includeSynonyms: false,
          resources: [{ type: kafkajs.ConfigResourceTypes.TOPIC, name: topic, configNames: outputTopicConfigNames }]
        }), { topics: [topic], topicOperation: "DESCRIBE_CONFIGS" }).pipe(
        Effect.map((result): OutputTopicConfig => {
          const entries = result.resources[0]?.configEntries ?? []
          const valueOf = (name: string) => entries.find((e) => e.configName === name)?.configValue
          const numberOf = (name: string) => {
            const value = valueOf(name)
            return value === undefined || value === null ? undefined : Number(value)
          }
          return {
            maxMessageBytes: numberOf("max.message.bytes"),
            timestampType: valueOf("message.timestamp.type") ?? undefined,
            timestampAfterMaxMs: numberOf("message.timestamp.after.max.ms"),
            timestampBeforeMaxMs: numberOf("message.timestamp.before.max.ms")
          }
        }),
        // Unknown, or not allowed (no DescribeConfigs ACL: an application needs only Write on
        // its outputs): the defaults apply, and the broker still enforces the topic's limits.
        Effect.catchIf(
          (e) => isUnknownTopic(e.cause) || securityFailure(e)?._tag === "AuthorizationFailed",
          () => Effect.succeed(undefined)
        )
      ),
    groupMembers: (groupId) =>
      attemptPastLostBroker("describeGroups", () => admin.describeGroups([groupId]), { group: groupId, groupOperation: "READ" }).pipe(
        Effect.catchAll(explainGroupFailure(kafka, groupId)),
        Effect.map(({ groups }) =>
          groups.filter((group) => group.groupId === groupId).flatMap((group) =>
            group.members.map((member): Assignor.Member => ({
              memberId: member.memberId,
              membership: group.protocol === Assignor.NAME ? Assignor.decodeMembership(kafkajs.AssignerProtocol, member.memberMetadata) : undefined
            }))
          )
        )
      )
  }
}

/** A connected admin client, disconnected when the scope closes. */
export const make = (kafka: Kafka): Effect.Effect<KafkaAdmin, KafkaError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => kafka.admin()).pipe(Effect.tap((admin) => attempt("admin.connect", () => connectOrDisconnect(admin)))),
    (admin) => Effect.promise(() => admin.disconnect().catch(() => undefined))
  ).pipe(Effect.zipWith(PatchedKafkajs.ofExistingClient, (admin, kafkajs) => makeFrom(kafkajs, kafka, admin)))
