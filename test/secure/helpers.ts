/**
 * Helpers for the tests against a secured broker: a super-user kafkajs client
 * (topics, ACLs, input records), a read_committed reader that authenticates
 * as the ordinary user, and a runner whose log lines are captured.
 */
import { Cause, Effect, Fiber, HashMap, Layer, Logger, LogLevel } from "effect"
import type { Scope } from "effect"
import kafkajs from "kafkajs"
import type { Kafka, ResourcePatternTypes } from "kafkajs"
import * as fs from "node:fs"
import { randomUUID } from "node:crypto"
import { Health, Runner, SkeinConfig } from "../../src/index.ts"
import type { SkeinError, Topic, Transformer } from "../../src/index.ts"
import type { LocalKafka } from "../../src/testing/index.ts"

type Security = LocalKafka.SecurityInfo

export const unique = (prefix: string): string => `${prefix}-${randomUUID().slice(0, 8)}`

/** A kafkajs client of the super user (SCRAM-SHA-512 over SASL_SSL). */
export const adminKafka = (security: Security): Kafka =>
  new kafkajs.Kafka({
    clientId: "skein-secure-test",
    brokers: [...security.saslSslBrokers],
    ssl: { ca: [fs.readFileSync(security.caFile, "utf8")] },
    sasl: { mechanism: "scram-sha-512", username: security.admin.username, password: security.admin.password },
    logLevel: kafkajs.logLevel.NOTHING
  })

const withAdmin = <A>(security: Security, f: (admin: kafkajs.Admin) => Promise<A>): Effect.Effect<A> =>
  Effect.promise(async () => {
    const admin = adminKafka(security).admin()
    await admin.connect()
    try {
      return await f(admin)
    } finally {
      await admin.disconnect()
    }
  })

export const createTopics = (security: Security, topics: ReadonlyArray<{ readonly name: string; readonly partitions: number }>) =>
  withAdmin(security, (admin) =>
    admin.createTopics({
      waitForLeaders: true,
      topics: topics.map((t) => ({ topic: t.name, numPartitions: t.partitions, replicationFactor: 1 }))
    }))

type ResourceType = "topic" | "group" | "transactional-id"
type Operation = "READ" | "WRITE" | "DESCRIBE" | "CREATE" | "DESCRIBE_CONFIGS"

export interface Acl {
  readonly principal: string
  readonly resource: ResourceType
  readonly name: string
  readonly prefixed?: boolean
  readonly operation: Operation
}

/** An ACL as kafkajs's admin takes it (an ALLOW entry for any host). */
const kafkajsAcl = (acl: Acl) => ({
  resourceType: acl.resource === "topic"
    ? kafkajs.AclResourceTypes.TOPIC
    : acl.resource === "group"
    ? kafkajs.AclResourceTypes.GROUP
    : kafkajs.AclResourceTypes.TRANSACTIONAL_ID,
  resourceName: acl.name,
  resourcePatternType: (acl.prefixed === true
    ? kafkajs.ResourcePatternTypes.PREFIXED
    : kafkajs.ResourcePatternTypes.LITERAL) as ResourcePatternTypes,
  principal: acl.principal,
  host: "*",
  operation: kafkajs.AclOperationTypes[acl.operation],
  permissionType: kafkajs.AclPermissionTypes.ALLOW
})

export const createAcls = (security: Security, acls: ReadonlyArray<Acl>) =>
  withAdmin(security, (admin) => admin.createAcls({ acl: acls.map(kafkajsAcl) }))

/** Deletes ACLs, each matched exactly. */
export const deleteAcls = (security: Security, acls: ReadonlyArray<Acl>) =>
  withAdmin(security, (admin) => admin.deleteAcls({ filters: acls.map(kafkajsAcl) }))

/**
 * What an application needs, as in docs/security.md: Read on its inputs, Write on its
 * outputs, all on its own prefix (changelogs), Read on its groups (prefix) and
 * Write on its transactional ids (prefix). `omit` leaves some out.
 */
export const applicationAcls = (options: {
  readonly principal: string
  readonly applicationId: string
  readonly inputs: ReadonlyArray<string>
  readonly outputs: ReadonlyArray<string>
  readonly omit?: ReadonlyArray<"output-write" | "transactional-id" | "changelog-create">
}): ReadonlyArray<Acl> => {
  const { applicationId, principal } = options
  const omit = new Set(options.omit ?? [])
  return [
    ...options.inputs.map((name): Acl => ({ principal, resource: "topic", name, operation: "READ" })),
    ...(omit.has("output-write")
      ? []
      : options.outputs.map((name): Acl => ({ principal, resource: "topic", name, operation: "WRITE" }))),
    // Changelogs: docs/security.md's list, exactly.
    ...(["CREATE", "READ", "WRITE", "DESCRIBE", "DESCRIBE_CONFIGS"] as const).filter((operation) =>
      operation !== "CREATE" || !omit.has("changelog-create")
    ).map((operation): Acl => ({
      principal,
      resource: "topic",
      name: applicationId,
      prefixed: true,
      operation
    })),
    { principal, resource: "group", name: applicationId, prefixed: true, operation: "READ" },
    ...(omit.has("transactional-id")
      ? []
      : [{ principal, resource: "transactional-id", name: applicationId, prefixed: true, operation: "WRITE" } as const])
  ]
}

/** Produces records as the super user. */
export const produce = (
  security: Security,
  topic: string,
  records: ReadonlyArray<{ readonly key: string; readonly value: string; readonly partition: number }>
) =>
  Effect.promise(async () => {
    const producer = adminKafka(security).producer({ idempotent: true, maxInFlightRequests: 1 })
    await producer.connect()
    try {
      await producer.send({ topic, acks: -1, messages: records.map((r) => ({ ...r })) })
    } finally {
      await producer.disconnect()
    }
  })

/** A read_committed consumer of the ordinary user (SCRAM-SHA-512), reading `topic` until `count` records arrived. */
export const readCommitted = (security: Security, topic: string, count: number, timeoutMs = 30_000) =>
  Effect.promise(async () => {
    const groupId = unique("reader")
    const client = new kafkajs.Kafka({
      clientId: "skein-secure-reader",
      brokers: [...security.saslSslBrokers],
      ssl: { ca: [fs.readFileSync(security.caFile, "utf8")] },
      sasl: { mechanism: "scram-sha-512", username: security.user.username, password: security.user.password },
      logLevel: kafkajs.logLevel.NOTHING
    })
    const consumer = client.consumer({ groupId, readUncommitted: false, maxWaitTimeInMs: 200 })
    const records: Array<{ key: string; value: string; partition: number }> = []
    await consumer.connect()
    try {
      await consumer.subscribe({ topic, fromBeginning: true })
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`read ${records.length} of ${count} records of ${topic}`)), timeoutMs)
        consumer.run({
          eachMessage: async ({ message, partition }) => {
            records.push({ key: message.key?.toString() ?? "", value: message.value?.toString() ?? "", partition })
            if (records.length >= count) {
              clearTimeout(timer)
              // Linger a little: a duplicate would arrive now.
              setTimeout(resolve, 500)
            }
          }
        }).catch(reject)
      })
    } finally {
      await consumer.disconnect()
    }
    return records
  })

/** Log lines of a run, as logfmt text (message, annotations, cause), every level. */
export const captureLogs = (lines: Array<string>): Layer.Layer<never> =>
  Layer.merge(
    Logger.replace(
      Logger.defaultLogger,
      Logger.make((options) => {
        const annotations = HashMap.toEntries(options.annotations).map(([k, v]) => `${k}=${String(v)}`).join(" ")
        lines.push(
          `${options.logLevel.label} ${String(options.message)} ${annotations} ${
            Cause.isEmpty(options.cause) ? "" : Cause.pretty(options.cause)
          }`
        )
      })
    ),
    Logger.minimumLogLevel(LogLevel.All)
  )

export interface Instance {
  readonly stats: Runner.Stats
  readonly fiber: Fiber.RuntimeFiber<never, unknown>
  /** The health snapshot and the Prometheus text, as an operator would see them. */
  readonly observed: Effect.Effect<string>
}

/** Runs `transformer` with `config` in the background, capturing its logs into `lines`. */
export const startInstance = <Inputs extends ReadonlyArray<Topic.Any>, S, E>(
  transformer: Transformer.Transformer<Inputs, S, E, never>,
  config: SkeinConfig.Options,
  lines: Array<string>
): Effect.Effect<Instance, never, Scope.Scope> =>
  Effect.gen(function*() {
    const stats = Runner.makeStats()
    const fiber = yield* Effect.forkDaemon(
      Runner.runWithStats(transformer, stats).pipe(
        Effect.provide(Layer.merge(SkeinConfig.layer(config), captureLogs(lines)))
      )
    )
    yield* Effect.addFinalizer(() => Fiber.interrupt(fiber))
    return {
      stats,
      fiber,
      observed: Effect.map(
        Health.snapshot(stats),
        (snapshot) => JSON.stringify(snapshot) + "\n" + Health.prometheus(stats, { applicationId: config.applicationId })
      )
    }
  })

/** Runs `transformer` until it fails; the typed failure and how long it took. */
export const runToFailure = <Inputs extends ReadonlyArray<Topic.Any>, S, E>(
  transformer: Transformer.Transformer<Inputs, S, E, never>,
  config: SkeinConfig.Options,
  lines: Array<string>
): Effect.Effect<{ readonly error: SkeinError.RunnerError | E }> =>
  Effect.gen(function*() {
    const started = Date.now()
    const error = yield* Runner.run(transformer).pipe(
      Effect.provide(Layer.merge(SkeinConfig.layer(config), captureLogs(lines))),
      Effect.flip,
      // A guard against a hang (a run that retries a fatal setup error forever), not a measure.
      Effect.timeoutFail({ duration: "90 seconds", onTimeout: () => new Error("the run did not fail within 90 s: it retries?") }),
      Effect.orDie
    )
    // Printed, never asserted: tests do not assert on time.
    process.stderr.write(`runToFailure: the run failed after ${Date.now() - started} ms\n`)
    return { error }
  })
