/**
 * What a run acquires before its poll loop starts, in order: settings
 * checked, the health endpoint, the Kafka client (kafkajs patch checked),
 * the topics validated (the changelog created), the group's ownership
 * checked, the kept stores read (announced to the group), the changelog
 * readers (made in the background, so that they join their groups while
 * the run joins its own), the query endpoint (`queryPort` set: it listens
 * before the join, which announces its address to the group), the group
 * joined, the standby replicas (`standbyReplicas` above 0; their reader made at the first
 * standby), and the task manager. Everything is released with the run's scope.
 *
 * @internal
 */
import { Deferred, Duration, Effect, Option, Scope } from "effect"
import type { Semaphore } from "effect/Effect"
import { randomUUID } from "node:crypto"
import * as os from "node:os"
import * as path from "node:path"
import type { ProcessingGuarantee, SkeinConfig } from "../../SkeinConfig.ts"
import type { KafkaError, RunnerError } from "../../SkeinError.ts"
import type * as Topic from "../../Topic.ts"
import type { Transformer } from "../../Transformer.ts"
import { changelogTopic } from "../../Transformer.ts"
import * as Faults from "./faults.ts"
import * as GroupOwnership from "./GroupOwnership.ts"
import * as HealthServerModule from "./healthServerModule.ts"
import * as Admin from "../kafka/admin.ts"
import * as ChangelogReader from "../kafka/changelogReader.ts"
import * as ChangelogTail from "../kafka/changelogTail.ts"
import * as RunStore from "../workflow/RunStore.ts"
import { makeKafka } from "../kafka/client.ts"
import * as Consumer from "../kafka/consumer.ts"
import { memoizeScoped } from "../util/memoizeSuccess.ts"
import * as Outputs from "./outputs.ts"
import * as PartitionCounts from "./partitionCounts.ts"
import * as LocalStores from "./LocalStores.ts"
import * as Standbys from "./Standbys.ts"
import * as SourceChangelog from "../stores/SourceChangelog.ts"
import * as StoreCleanup from "../stores/StoreCleanup.ts"
import * as DatabaseTask from "../database/DatabaseTask.ts"
import * as PollBuffer from "./PollBuffer.ts"
import * as Positions from "../query/Positions.ts"
import * as QueryTls from "../query/queryTls.ts"
import type * as SharedSources from "../query/SharedSources.ts"
import type * as Queries from "../query/Queries.ts"
import * as QueryRoutes from "../query/QueryRoutes.ts"
import type { RunnerStats } from "./RunnerStats.ts"
import * as StateKeyCheck from "./StateKeyCheck.ts"
import * as Task from "./Task.ts"
import * as TaskManager from "./TaskManager.ts"
import * as TransactionalIds from "./TransactionalIds.ts"
import { validateConfig, validateTopics } from "./validation.ts"

/** What the poll loop works with. */
export interface RunnerResources {
  readonly consumer: Consumer.GroupConsumer
  readonly manager: TaskManager.TaskManager
  readonly buffer: PollBuffer.PollBuffer
  /** The changelog topic, for a stateful transformer. */
  readonly changelog: Option.Option<string>
  readonly messageLimits: Outputs.MessageLimits
  readonly partitionCounts: PartitionCounts.PartitionCounts
  readonly deadLetterTopic: Option.Option<string>
  /** Permits for transform calls (`maxConcurrency`). */
  readonly permits: Option.Option<Semaphore>
  readonly stateKeys: StateKeyCheck.StateKeyCheck | undefined
  /** How far each task's committed store reflects its inputs: the runner records each commit's offsets (queries wait on them). */
  readonly positions: Positions.Positions
  /** An input partition's end offset (ListOffsets, read_committed), for timestamp-ordered tasks (`TaskIdle`). */
  readonly endOffset: (topic: string, partition: number) => Effect.Effect<number, KafkaError>
}

/**
 * Hooks of a run: `reader` (Skein's own tests only) wraps each changelog
 * reader a run makes (e.g. to hold one partition's restore on a
 * `Deferred`); `sharedQuery` (set by `runAll`) is the query endpoint several
 * runs share: the run registers its source there and announces its
 * endpoint instead of listening on its own.
 */
export interface RunnerHooks {
  readonly reader?: ((topic: string, reader: ChangelogReader.ChangelogReader) => ChangelogReader.ChangelogReader) | undefined
  readonly sharedQuery?: {
    readonly endpoint: string
    readonly port: number
    readonly sources: SharedSources.SharedSources
  } | undefined
}

/** What the query endpoint reads of a run, wired as the run acquires it (the endpoint listens before the group is joined). */
interface QueryWiring {
  /** The task manager, once made. */
  manager: TaskManager.TaskManager | undefined
  /** The group consumer, once it joined: its routes name each partition's owner. */
  consumer: Consumer.GroupConsumer | undefined
  /** This instance's announced endpoint, once it listens. */
  endpoint: string | undefined
  /** Each task's committed offsets. */
  readonly positions: Positions.Positions
  /** The standby replicas, once made (`standbyReplicas` above 0). */
  standbys: Standbys.Standbys | undefined
}

/** Addresses that listen on every interface: announced as this machine's host name. */
const wildcard: ReadonlySet<string> = new Set(["0.0.0.0", "::", "[::]"])

/** The `host:port` announced for an endpoint listening on `host` and `port` (IPv6 hosts bracketed). */
export const announcedEndpoint = (host: string, port: number): string => {
  const name = wildcard.has(host) ? os.hostname() : host
  return name.includes(":") && !name.startsWith("[") ? `[${name}]:${port}` : `${name}:${port}`
}

/** What the query endpoint reads of a run: its tasks' committed stores, by partition. */
const querySource = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  wiring: QueryWiring,
  stats: RunnerStats,
  partitions: number
): Queries.Source => {
  const stores = transformer.stores ?? []
  const taskOf = (partition: number) =>
    wiring.manager === undefined ? Option.none() : wiring.manager.task(partition)
  const assigned = (): ReadonlySet<number> => wiring.manager?.assigned() ?? new Set()
  return {
    transformer: transformer.name,
    stateful: Option.isSome(transformer.state),
    keyValueStores: stores.filter((store) => store.kind === "KeyValueStore").map((store) => store.name),
    otherStores: new Map(stores.filter((store) => store.kind !== "KeyValueStore").map((store) => [store.name, store.kind])),
    partitions,
    partition: (partition) =>
      Option.match(taskOf(partition), {
        // Assigned here and not running: stopped by a failure, or starting, restoring (or a rebalance in progress).
        onNone: () =>
          stats.stopped.has(partition) ? "stopped" : assigned().has(partition) ? "restoring" : "absent",
        // A running task of a stateless transformer has no store: nothing of it is queried.
        onSome: (task) => Option.getOrElse(task.store, () => "absent" as const)
      }),
    assigned: () => [...assigned()].sort((a, b) => a - b),
    routes: () => wiring.consumer?.routes() ?? QueryRoutes.empty,
    self: () => wiring.endpoint,
    inputs: transformer.inputs.map((topic) => topic.name),
    position: (partition) =>
      wiring.positions.of(
        partition,
        Option.match(taskOf(partition), { onNone: () => [], onSome: (task) => task.startOffsets })
      ),
    nextPositionChange: wiring.positions.nextChange,
    standby: (partition) => {
      const store = wiring.standbys?.readable(partition)
      const state = stats.standbys.get(partition)
      return store === undefined || state === undefined ? undefined : { store, position: state.position, lag: state.lag }
    }
  }
}

export const acquire = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(
  transformer: Transformer<Inputs, S, E, R>,
  config: SkeinConfig,
  stats: RunnerStats,
  hooks: RunnerHooks = {}
): Effect.Effect<RunnerResources, RunnerError, Scope.Scope> =>
  Effect.gen(function*() {
    yield* validateConfig(config, stats, transformer)
    yield* Faults.announce
    yield* stats.begin(config.applicationId, transformer.name)
    if (config.healthPort !== undefined) {
      const HealthServer = yield* HealthServerModule.load
      const server = yield* HealthServer.serve(stats, {
        port: config.healthPort,
        labels: { applicationId: config.applicationId, transformer: transformer.name }
      })
      stats.setHealthPort(server.port)
    }
    const kafka = yield* makeKafka(config)
    const admin = yield* Admin.make(kafka)
    const inputTopics = transformer.inputs.map((t) => t.name)
    // A table whose source topic is its changelog (`SourceChangelog.ts`): no changelog topic.
    const source = Option.flatMap(
      transformer.state,
      (codec) =>
        transformer.sourceChangelog === undefined
          ? Option.none()
          : Option.some({ topic: transformer.sourceChangelog.topic, toWrite: SourceChangelog.toWrite(codec, transformer.sourceChangelog) })
    )
    const changelog = Option.isSome(source)
      ? Option.none<string>()
      : Option.map(transformer.state, () => changelogTopic(config.applicationId, transformer))
    const partitions = yield* validateTopics(admin, inputTopics, changelog, {
      replicationFactor: config.changelogReplicationFactor,
      deadLetterTopic: config.deadLetterTopic
    })
    // Before any producer fences: no other run of this process uses these transactional ids.
    const kind = transformer.runStore === undefined ? "transformer" : "workflow"
    const inputPartitions = Array.from({ length: partitions }, (_, partition) => partition)
    if (config.processingGuarantee === "exactly-once") {
      yield* TransactionalIds.claim(
        { applicationId: config.applicationId, description: `the tasks of ${kind} "${transformer.name}"` },
        inputPartitions.map((partition) => Task.transactionalId(config.applicationId, partition))
      )
    }
    if (transformer.runStore !== undefined) {
      yield* TransactionalIds.claim(
        { applicationId: config.applicationId, description: `the run store of workflow "${transformer.name}"` },
        inputPartitions.map((partition) => RunStore.transactionalId(config.applicationId, partition))
      )
    }
    const runsTopic = transformer.runStore !== undefined
      ? Option.some(RunStore.topicOf(config.applicationId, transformer))
      : Option.none<string>()
    const retention = transformer.runStore?.retention ?? Duration.zero
    // The run store topic is created and checked like a changelog: compacted, co-partitioned.
    if (Option.isSome(runsTopic)) {
      yield* validateTopics(admin, inputTopics, runsTopic, {
        replicationFactor: config.changelogReplicationFactor,
        deadLetterTopic: undefined
      })
    }
    // A database sink: its tables are there (created when missing) before any task claims a partition.
    const database = yield* DatabaseTask.setup(transformer.database, transformer.name)
    // One applicationId, one transformer: a group already running another one is refused.
    yield* GroupOwnership.check(admin, { groupId: config.applicationId, owner: transformer.name })

    // Kept across runs: a task that finds its store restores only the changelog's tail.
    const storeDir = path.join(config.stateDir, encodeURIComponent(config.applicationId), encodeURIComponent(transformer.name))
    yield* StoreCleanup.atStart(storeDir, config.stateCleanupDelay)
    // The kept stores are announced to the group: its leader prefers members with a warm copy.
    const localStores = LocalStores.make()
    if (Option.isSome(changelog)) yield* LocalStores.scan(storeDir, changelog.value, localStores)
    if (Option.isSome(source)) yield* LocalStores.scan(storeDir, source.value.topic, localStores)
    const standbyReplicas = Option.isSome(changelog) || Option.isSome(source) ? config.standbyReplicas : 0
    const runnerScope = yield* Effect.scope
    // A topic's reader is made ahead of the first restore (below); a failed first connect is retried
    // by the next restore, and a reader whose consumer crashed (its group coordinator gone for longer
    // than its retries) is made again, so the restore is retried after a backoff instead of failing
    // forever. Each reader has a scope of its own: a crashed one is disconnected when it is replaced.
    // A run store is restored with its own fenced producer whatever the processing guarantee.
    const readerOf = (topic: string, guarantee: ProcessingGuarantee) =>
      memoizeScoped(
        ChangelogReader.make(kafka, {
          topic,
          groupId: `${config.applicationId}-restore-${randomUUID()}`,
          groupPrefix: config.applicationId,
          guarantee
        }).pipe(
          Effect.map((reader) => hooks.reader === undefined ? reader : hooks.reader(topic, reader))
        ),
        { discardWhen: (reader) => reader.isCrashed }
      )
    const restoreFrom = yield* Effect.transposeMapOption(
      changelog,
      (topic) => Effect.map(readerOf(topic, config.processingGuarantee), (reader) => ({ topic, reader }))
    )
    const sourceFrom = yield* Effect.transposeMapOption(
      source,
      (source) => Effect.map(readerOf(source.topic, config.processingGuarantee), (reader) => ({ ...source, reader }))
    )
    const runsFrom = yield* Effect.transposeMapOption(
      runsTopic,
      (topic) => Effect.map(readerOf(topic, "exactly-once"), (reader) => ({ topic, reader, retention }))
    )
    // The readers join their private groups while the runner joins its own: a new group's first join
    // waits out the broker's group.initial.rebalance.delay.ms (3 s by default), which the first
    // restore would otherwise wait again after the runner's join. A failure here is only logged: the
    // first restore makes the reader again and fails with the typed error.
    for (const source of [restoreFrom, runsFrom, sourceFrom]) {
      if (Option.isNone(source)) continue
      yield* Effect.forkIn(
        Effect.catchAll(
          source.value.reader,
          (error) => Effect.logWarning(`the reader of ${source.value.topic} was not made ahead of the first restore (the restore makes it again): ${error.message}`)
        ),
        runnerScope
      )
    }
    // The query endpoint listens before the group is joined: its address is announced at the first join.
    const wiring: QueryWiring = {
      manager: undefined,
      consumer: undefined,
      endpoint: undefined,
      positions: Positions.make(),
      standbys: undefined
    }
    const shared = hooks.sharedQuery
    if (shared !== undefined) {
      const unregister = shared.sources.register(querySource(transformer, wiring, stats, partitions))
      yield* Effect.addFinalizer(() => Effect.sync(unregister))
      wiring.endpoint = shared.endpoint
      stats.setQueryPort(shared.port)
    } else if (config.queryPort !== undefined) {
      const QueryServer = yield* Effect.promise(() => import("../query/queryServer.ts"))
      const tls = yield* QueryTls.read(config)
      const server = yield* QueryServer.serve(querySource(transformer, wiring, stats, partitions), {
        port: config.queryPort,
        host: config.queryHost,
        token: config.queryToken,
        tls
      })
      wiring.endpoint = config.queryEndpoint ?? announcedEndpoint(config.queryHost, server.port)
      stats.setQueryPort(server.port)
    }
    const consumer = yield* Consumer.make(kafka, {
      groupId: config.applicationId,
      topics: inputTopics,
      sessionTimeout: config.sessionTimeout,
      rebalanceTimeout: config.rebalanceTimeout,
      heartbeatInterval: config.heartbeatInterval,
      maxPollRecords: config.maxPollRecords,
      awaitRevocation: true,
      owner: transformer.name,
      stores: localStores.announced,
      standbyReplicas,
      endpoint: () => wiring.endpoint
    })
    wiring.consumer = consumer
    // Standby replicas: their reader is made at the first standby; with standbyReplicas 0 nothing runs.
    // A source-topic changelog's standbys follow the topic up to the task's committed offset (`Standbys.ts`).
    const followed = Option.orElse(
      Option.map(changelog, (topic) => ({ topic, source: undefined })),
      () =>
        Option.map(source, (source) => ({
          topic: source.topic,
          source: {
            toWrite: source.toWrite,
            committed: (partition: number) =>
              Effect.map(
                admin.committedOffsets(config.applicationId, [source.topic], partition),
                (committed) => Math.max(0, committed.get(source.topic) ?? 0)
              ),
            pollInterval: Duration.millis(500)
          }
        }))
    )
    const standbys = Option.isSome(followed) && standbyReplicas > 0
      ? yield* Standbys.make({
        changelog: followed.value.topic,
        source: followed.value.source,
        inputTopics,
        storeDir,
        admin,
        localStores,
        stats,
        tail: yield* memoizeScoped(
          ChangelogTail.make(kafka, { topic: followed.value.topic, groupId: `${config.applicationId}-standby-${randomUUID()}` }),
          { discardWhen: (tail) => Deferred.isDone(tail.crashed) }
        )
      })
      : undefined
    wiring.standbys = standbys
    const messageLimits = Outputs.makeMessageLimits(config.maxMessageBytes, admin.outputTopicConfig, yield* Effect.clock)
    const partitionCounts = PartitionCounts.make(admin.partitionCount)
    const buffer = PollBuffer.make()
    const manager = yield* TaskManager.make({
      config,
      stats,
      buffer,
      standbys,
      context: {
        kafka,
        admin,
        consumer,
        applicationId: config.applicationId,
        transformer: transformer.name,
        inputTopics,
        changelog: restoreFrom,
        source: Option.getOrUndefined(sourceFrom),
        runs: runsFrom,
        storeDir,
        transactionTimeout: config.transactionTimeout,
        processingGuarantee: config.processingGuarantee,
        maxMessageBytes: config.maxMessageBytes,
        limitOf: messageLimits.known,
        onRestoreProgress: (partition, restored, total) => {
          stats.setRestoreProgress(partition, restored, total)
        },
        localStores,
        onCheckpointLag: (partition, records) => {
          stats.setCheckpointLag(partition, records)
        },
        database: database === undefined
          ? undefined
          : { ...database, onPartition: (partition, state) => stats.setSinkPartition(partition, state) }
      }
    })
    wiring.manager = manager
    const permits = config.maxConcurrency === "unbounded"
      ? Option.none()
      : Option.some(yield* Effect.makeSemaphore(config.maxConcurrency))
    const stateKeys = StateKeyCheck.enabled(config.checkStateKeys, transformer) ? StateKeyCheck.make() : undefined
    return {
      consumer,
      manager,
      buffer,
      changelog,
      messageLimits,
      partitionCounts,
      deadLetterTopic: Option.fromNullable(config.deadLetterTopic),
      permits,
      stateKeys,
      positions: wiring.positions,
      endOffset: (topic, partition) => Effect.map(admin.offsetRange(topic, partition), (range) => range.end)
    }
  })
