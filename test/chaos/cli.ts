/**
 * The chaos harness: exactly-once under SIGKILLs, bounces and broker kills.
 *
 *   npm run chaos -- --app extract [--kills N] [--instances N]   (extractors: test/apps/extractChaos.ts)
 *   npm run chaos -- [--app echo|aggregate|pipeline|windowed|enrichment|postgres|all[,...]] [--instances N] [--kills N] [--bounces N]
 *                    [--broker-kills N] [--records N] [--runtimes node,bun,deno]
 *                    [--rate R] [--max-poll-records N] [--partitions N] [--keys N] [--seed S]
 *                    [--catch-up-timeout SECONDS] [--pauses N] [--txn-kills N]
 *                    [--window SECONDS] [--grace SECONDS] [--groups N] [--customers N] [--update-every N]
 *                    [--region-revisions N]
 *
 * Defaults: --app all --instances 3 --records 10000 --runtimes node, rate
 * records/60 per second (50..400), --max-poll-records 50 (500 above 50,000
 * records), 6 partitions, 20,000 keys, --catch-up-timeout 300 (seconds
 * without any progress after the driver is done). The windowed app
 * (`--app windowed`, or `--app all,windowed` with the others; not part of
 * `all`): --window 10, --grace half the driving time (at least 30), --groups 50. The enrichment
 * app (`--app enrichment`, not part of `all`; its own driver writes orders and customers, the
 * orders counting as --records): --customers 200, --update-every 10 (one customer update per
 * that many orders), --region-revisions 1000 (revisions of each of the 24 regions' names in the
 * global table, written before the apps start). The Postgres app (`--app postgres`, not part of
 * `all`, not with the apps of the shared input, whose records of truth its poison records are not:
 * it runs alone or with the enrichment app): a `DatabaseSink` into a database it starts (see
 * `postgres.ts`).
 *
 * It starts what it needs: a local single-node broker (a 3-node cluster when
 * --broker-kills > 0) unless KAFKA_BROKERS is set; the input and output
 * topics; N instances of every app (runtimes mixed round-robin, rotated at
 * every restart); the driver; the faults, spread over the driving time. Then
 * it waits until every app has caught up, stops them (SIGTERM), waits until
 * the groups are empty and no transaction is open, reads every topic raw and
 * checks the outputs against the input. It ends with one line per app:
 *
 *   EOS <app>: records=<n> duplicates=<n> lost=<n> state_mismatches=<n> kills=<n> bounces=<n> broker_kills=<n> -> PASS|FAIL
 *
 * and exits 1 if any app fails.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Deferred, Duration, Effect, Either, Exit, Fiber, Option, Ref, Schedule } from "effect"
import kafkajs from "kafkajs"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { LocalKafka } from "../../src/testing/index.ts"
import * as Driver from "./driver.ts"
import * as Faults from "./faults.ts"
import { Topology } from "../../src/index.ts"
import { windowedTopology } from "../apps/windowedTopology.ts"
import type { EnrichmentSettings } from "../apps/enrichmentTopology.ts"
import { enrichmentTopology } from "../apps/enrichmentTopology.ts"
import * as EnrichmentDriver from "./enrichmentDriver.ts"
import * as EnrichmentVerifier from "./enrichmentVerifier.ts"
import { applicationIdOf } from "../../src/internal/runtime/runAll.ts"
import { Transformer } from "../../src/index.ts"
import type { WindowedSettings } from "../apps/windowedTopology.ts"
import type { AppSpec, Fleet, RuntimeName } from "./instances.ts"
import { makeFleet, runtimeNames, statusOf } from "./instances.ts"
import * as DatabaseTask from "../../src/internal/database/DatabaseTask.ts"
import * as Postgres from "./postgres.ts"
import * as PostgresVerifier from "./postgresVerifier.ts"
import * as Verifier from "./verifier.ts"
import * as WindowedVerifier from "./windowedVerifier.ts"
import * as Wire from "./wire.ts"

export type AppName = "echo" | "aggregate" | "pipeline" | "windowed" | "enrichment" | "postgres"

/** The apps `--app all` runs. */
export const allApps: ReadonlyArray<AppName> = ["echo", "aggregate", "pipeline"]

export interface ChaosOptions {
  readonly apps: ReadonlyArray<AppName>
  readonly instances: number
  readonly kills: number
  readonly bounces: number
  readonly brokerKills: number
  /** SIGSTOP/SIGCONT of instances, frozen past the session timeout (zombies). */
  readonly pauses: number
  /** SIGKILLs of a group's instances while one of its transactions is open (found by event, not by chance). */
  readonly transactionKills: number
  readonly records: number
  readonly runtimes: ReadonlyArray<RuntimeName>
  /** Records per second written by the driver. */
  readonly rate: number
  readonly maxPollRecords: number
  readonly partitions: number
  readonly keys: number
  readonly seed: number
  readonly catchUpTimeout: Duration.Duration
  /** Existing brokers (KAFKA_BROKERS): nothing is started. */
  readonly brokers: Option.Option<ReadonlyArray<string>>
  /** The windowed app's tumbling windows: their size and grace (event time), and its second keys. */
  readonly windowed: { readonly windowMs: number; readonly graceMs: number; readonly groups: number }
  /** The enrichment app's customers, and how many orders per customer update (about). */
  readonly enrichment: { readonly customers: number; readonly updateEvery: number; readonly regionRevisions: number }
}

/** The verdict on one app. */
export interface AppResult {
  readonly app: AppName
  readonly records: number
  readonly duplicates: number
  readonly lost: number
  readonly stateMismatches: number
  readonly kills: number
  readonly bounces: number
  readonly brokerKills: number
  readonly pass: boolean
}

export const summaryLine = (r: AppResult): string =>
  `EOS ${r.app}: records=${r.records} duplicates=${r.duplicates} lost=${r.lost} ` +
  `state_mismatches=${r.stateMismatches} kills=${r.kills} bounces=${r.bounces} broker_kills=${r.brokerKills} -> ` +
  (r.pass ? "PASS" : "FAIL")

// ---------------------------------------------------------------------------
// arguments

const usage =
  "usage: npm run chaos -- [--app echo|aggregate|pipeline|windowed|enrichment|postgres|all[,...]] [--instances N] [--kills N] [--bounces N] " +
  "[--broker-kills N] [--records N] [--runtimes node,bun,deno] [--rate R] [--max-poll-records N] " +
  "[--partitions N] [--keys N] [--seed S] [--catch-up-timeout SECONDS] [--pauses N] [--txn-kills N] " +
  "[--window SECONDS] [--grace SECONDS] [--groups N] [--customers N] [--update-every N] [--region-revisions N]"

export const parseArgs = (argv: ReadonlyArray<string>, env: NodeJS.ProcessEnv): ChaosOptions => {
  const values = new Map<string, string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? ""
    if (!arg.startsWith("--")) throw new Error(`unexpected argument ${arg}\n${usage}`)
    const [name = "", inline] = arg.slice(2).split("=", 2)
    const value = inline ?? argv[++i]
    if (value === undefined) throw new Error(`--${name} needs a value\n${usage}`)
    values.set(name, value)
  }
  const known = [
    "app",
    "instances",
    "kills",
    "bounces",
    "broker-kills",
    "records",
    "runtimes",
    "rate",
    "max-poll-records",
    "partitions",
    "keys",
    "seed",
    "catch-up-timeout",
    "pauses",
    "txn-kills",
    "window",
    "grace",
    "groups",
    "customers",
    "update-every",
    "region-revisions"
  ]
  for (const name of values.keys()) if (!known.includes(name)) throw new Error(`unknown option --${name}\n${usage}`)
  const int = (name: string, fallback: number, min = 0) => {
    const raw = values.get(name)
    if (raw === undefined) return fallback
    const n = Number(raw)
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, got ${raw}`)
    return n
  }
  // One app, `all`, or a comma-separated list (`all,windowed`: every app).
  const appsOf = (app: string): ReadonlyArray<AppName> => {
    if (app === "all") return allApps
    if (
      app === "echo" || app === "aggregate" || app === "pipeline" || app === "windowed" || app === "enrichment" || app === "postgres"
    ) return [app]
    throw new Error(`--app takes echo, aggregate, pipeline, windowed, enrichment, postgres or all (or a comma-separated list), got ${app}`)
  }
  const apps: ReadonlyArray<AppName> = [...new Set((values.get("app") ?? "all").split(",").map((a) => a.trim()).flatMap(appsOf))]
  // The shared input carries poison records for the Postgres app: the other apps reading it take every record as one to check.
  const sharing = apps.filter((a) => a !== "postgres" && a !== "enrichment")
  if (apps.includes("postgres") && sharing.length > 0) {
    throw new Error(`--app postgres runs alone or with enrichment (its input has poison records), not with ${sharing.join(", ")}`)
  }
  const runtimes = (values.get("runtimes") ?? "node").split(",").map((r) => r.trim()).filter((r) => r !== "")
  const badRuntime = runtimes.find((r) => !runtimeNames.some((n) => n === r))
  if (badRuntime !== undefined || runtimes.length === 0) {
    throw new Error(`--runtimes takes node,bun,deno; got ${values.get("runtimes")}`)
  }
  const records = int("records", 10_000, 1)
  const rate = int("rate", Math.max(50, Math.min(400, Math.ceil(records / 60))), 1)
  const brokers = (env["KAFKA_BROKERS"] ?? "").split(",").map((b) => b.trim()).filter((b) => b !== "")
  return {
    apps,
    instances: int("instances", 3, 1),
    kills: int("kills", 0),
    bounces: int("bounces", 0),
    brokerKills: int("broker-kills", 0),
    pauses: int("pauses", 0),
    transactionKills: int("txn-kills", 0),
    records,
    runtimes: runtimes as ReadonlyArray<RuntimeName>,
    rate,
    // Small batches keep a transaction open nearly all the time (kills land inside one);
    // long runs take bigger ones to get through in time on a small machine.
    maxPollRecords: int("max-poll-records", records > 50_000 ? 500 : 50, 1),
    partitions: int("partitions", 6, 1),
    keys: int("keys", 20_000, 1),
    seed: int("seed", Math.floor(Math.random() * 1_000_000)),
    catchUpTimeout: Duration.seconds(int("catch-up-timeout", 300, 1)),
    brokers: brokers.length > 0 ? Option.some(brokers) : Option.none(),
    windowed: {
      windowMs: int("window", 10, 1) * 1000,
      // Covers how far apart in event time the upstream tasks get (a killed or frozen instance's
      // tasks stall while the others go on): a record later than that is late, and fails the run.
      graceMs: int("grace", Math.max(30, Math.ceil(records / rate / 2))) * 1000,
      groups: int("groups", 50, 1)
    },
    enrichment: {
      customers: int("customers", 200, 1),
      updateEvery: int("update-every", 10, 1),
      regionRevisions: int("region-revisions", 1000, 1)
    }
  }
}

// ---------------------------------------------------------------------------
// the run

const say = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

interface Group {
  readonly spec: AppSpec
  readonly input: string
  readonly output: string
  readonly changelog: Option.Option<string>
  /** Its consumer groups and the topics each reads: all consumed means caught up. */
  readonly consumers: ReadonlyArray<{ readonly groupId: string; readonly topics: ReadonlyArray<string> }>
  /** Topics it writes in transactions besides the output and the changelog (repartition, dead letters). */
  readonly internal: ReadonlyArray<string>
  /** The windowed app's settings and the topics only it has. */
  readonly windowed: Option.Option<WindowedGroup>
  /** The enrichment app's settings and the topics only it has. */
  readonly enrichment: Option.Option<EnrichmentGroup>
  /** The Postgres app's database (its progress and its check are there). */
  readonly postgres: Option.Option<Postgres.PostgresRun>
}

interface EnrichmentGroup {
  readonly settings: EnrichmentSettings
  readonly deadLetters: string
  /** The join's sub-topology's changelog (the customers table) and the aggregation's. */
  readonly tableChangelog: string
  readonly totalsChangelog: string
  readonly repartitions: ReadonlyArray<string>
}

/**
 * The enrichment app's consumer groups (one per sub-topology), repartition topics and changelogs
 * (the table's: the sub-topology reading the customers topic; the aggregation's: the other
 * stateful one), as its topology compiles under `applicationId`.
 */
const enrichmentLayout = (settings: EnrichmentSettings, applicationId: string) =>
  Either.map(Topology.compile(enrichmentTopology(settings), applicationId), (compiled) => {
    const stateful = compiled.subTopologies.filter((sub) =>
      "state" in sub.transformer && Option.isOption(sub.transformer.state) && Option.isSome(sub.transformer.state)
    )
    const changelogOf = (sub: (typeof stateful)[number]) => Transformer.changelogTopic(applicationIdOf(applicationId, sub), sub)
    const table = stateful.find((sub) => sub.transformer.inputs.some((topic) => topic.name === settings.customers))
    const totals = stateful.find((sub) => sub !== table)
    return {
      consumers: compiled.subTopologies.map((sub) => ({
        groupId: `${applicationId}-${sub.name}`,
        topics: sub.transformer.inputs.map((topic) => topic.name)
      })),
      repartitions: compiled.internalTopics.map((topic) => topic.name),
      tableChangelog: table === undefined ? "" : changelogOf(table),
      totalsChangelog: totals === undefined ? "" : changelogOf(totals)
    }
  })

interface WindowedGroup {
  readonly settings: WindowedSettings
  readonly deadLetters: string
  readonly changelogs: ReadonlyArray<string>
}

/**
 * The windowed app's consumer groups (one per sub-topology, `{applicationId}-{sub-topology}`),
 * internal topics and changelogs, as its topology compiles under `applicationId`.
 */
const windowedLayout = (settings: WindowedSettings, applicationId: string) =>
  Either.map(Topology.compile(windowedTopology(settings), applicationId), (compiled) => ({
    consumers: compiled.subTopologies.map((sub) => ({
      groupId: `${applicationId}-${sub.name}`,
      topics: sub.transformer.inputs.map((topic) => topic.name)
    })),
    repartitions: compiled.internalTopics.map((topic) => topic.name),
    changelogs: compiled.subTopologies.flatMap((sub) =>
      // A stateful sub-topology (its transformer's `state` is Some) has a changelog.
      "state" in sub.transformer && Option.isOption(sub.transformer.state) && Option.isSome(sub.transformer.state)
        ? [`${applicationId}-${sub.name}-${sub.transformer.name}-changelog`]
        : []
    )
  }))

/**
 * The event time the driver stamps record `id` with for the windowed app: `base` plus the
 * record's place in the driving schedule, up to 2 s earlier (out of order within a partition).
 */
const eventTimeOf = (base: number, rate: number) => (id: number): number =>
  base + Math.floor((id * 1000) / rate) - (Math.imul(id + 1, 0x9e3779b1) >>> 0) % 2000

const createTopics = (
  brokers: ReadonlyArray<string>,
  topics: ReadonlyArray<string>,
  partitions: number,
  replication: number
) =>
  Effect.tryPromise(async () => {
    const admin = new kafkajs.Kafka({ brokers: [...brokers], logLevel: kafkajs.logLevel.NOTHING }).admin()
    await admin.connect()
    try {
      await admin.createTopics({
        waitForLeaders: true,
        topics: topics.map((topic) => ({
          topic,
          numPartitions: partitions,
          replicationFactor: replication,
          configEntries: [{ name: "min.insync.replicas", value: replication >= 3 ? "2" : "1" }]
        }))
      })
      // Created by an earlier attempt, createTopics does not wait for the leaders: wait here.
      const meta = await admin.fetchTopicMetadata({ topics: [...topics] })
      if (meta.topics.some((t) => t.partitions.length < partitions || t.partitions.some((p) => p.leader < 0))) {
        throw new Error("topic leaders not elected yet")
      }
    } finally {
      await admin.disconnect()
    }
  }).pipe(
    // A cluster just started may answer the leaders' metadata with UNKNOWN_TOPIC_OR_PARTITION, which
    // kafkajs's waitForLeaders does not retry: try again (topics that exist are left as they are).
    Effect.retry(Schedule.spaced(Duration.seconds(1)).pipe(Schedule.intersect(Schedule.recurs(30)))),
    Effect.orDie
  )

/**
 * Closes the windowed app's last windows: one record per second key (a group's records are in
 * one repartition partition, so every partition holding a window gets one), stamped past the
 * last window's end plus the grace, on the closers topic (keys `closer-<g>`, `v` = g). The
 * closers' own windows never close: they emit nothing. Returns their event time.
 */
const sendClosers = (brokers: ReadonlyArray<string>, topic: string, options: ChaosOptions, lastEventTime: number) =>
  Effect.promise(async () => {
    const { windowMs, graceMs, groups } = options.windowed
    const closeAt = Math.floor(lastEventTime / windowMs) * windowMs + windowMs + graceMs + 1000
    const producer = new kafkajs.Kafka({ brokers: [...brokers], logLevel: kafkajs.logLevel.NOTHING })
      .producer({ idempotent: true, maxInFlightRequests: 1 })
    await producer.connect()
    try {
      // One send per partition (FINDINGS.md #2).
      for (let p = 0; p < options.partitions; p++) {
        const messages = Array.from({ length: groups }, (_, g) => g).filter((g) => g % options.partitions === p).map((g) => ({
          key: `closer-${g}`,
          value: JSON.stringify({ id: -1 - g, seq: 1, v: g }),
          partition: p,
          timestamp: String(closeAt)
        }))
        if (messages.length > 0) await producer.send({ topic, acks: -1, messages })
      }
    } finally {
      await producer.disconnect()
    }
    return closeAt
  })

/** Occurrences of `text` in the log files of `dir` whose name starts with `prefix`. */
const countInLogs = (dir: string, prefix: string, text: string): number =>
  Fs.readdirSync(dir).filter((f) => f.startsWith(prefix)).reduce(
    (n, f) => n + Fs.readFileSync(Path.join(dir, f), "utf8").split(text).length - 1,
    0
  )

const elapsed = (since: number) => `${String(Math.round((Date.now() - since) / 1000)).padStart(5)}s`

/** Runs one chaos run and returns the verdict per app. */
export const runChaos = (options: ChaosOptions): Effect.Effect<ReadonlyArray<AppResult>, unknown> =>
  Effect.scoped(Effect.gen(function*() {
    const t0 = Date.now()
    const root = Path.resolve(Path.dirname(new URL(import.meta.url).pathname), "..", "..")
    const runId = `chaos-${Date.now().toString(36)}`
    const runDir = Path.join(Os.tmpdir(), "skein-chaos", runId)
    Fs.mkdirSync(runDir, { recursive: true })
    const random = Driver.prng(options.seed)
    yield* say(
      `chaos ${runId}: apps=${options.apps.join(",")} instances=${options.instances} kills=${options.kills} ` +
        `bounces=${options.bounces} broker_kills=${options.brokerKills} pauses=${options.pauses} txn_kills=${options.transactionKills} ` +
        `records=${options.records} ` +
        `rate=${options.rate}/s runtimes=${options.runtimes.join(",")} max_poll_records=${options.maxPollRecords} ` +
        `seed=${options.seed}\n  logs: ${runDir}`
    )

    // -- brokers
    const cluster = yield* Option.match(options.brokers, {
      onSome: () => Effect.succeed(Option.none<LocalKafka.LocalKafkaCluster>()),
      onNone: () =>
        Effect.map(
          LocalKafka.start({
            nodes: options.brokerKills > 0 ? 3 : 1,
            dataDir: Path.join(runDir, "kafka"),
            // Kept for a post-mortem; removed below when every app passes.
            keepData: true,
            // A 3-node cluster on a loaded 2-core machine (load average 32) was not ready within the default 180 s, twice.
            startTimeout: Duration.minutes(10)
          }),
          Option.some
        )
    })
    if (options.brokerKills > 0 && Option.isNone(cluster)) {
      return yield* Effect.fail(new Error("--broker-kills needs the harness's own cluster: unset KAFKA_BROKERS"))
    }
    const brokers = Option.match(cluster, {
      onSome: (c) => c.brokers,
      onNone: () => Option.getOrElse(options.brokers, () => [])
    })
    const replication = Math.min(3, brokers.length)
    yield* say(`[${elapsed(t0)}] brokers ${brokers.join(",")} (replication ${replication})`)

    // -- topics and apps
    const input = `${runId}-input`
    const groups: Array<Group> = []
    const common = {
      KAFKA_BROKERS: brokers.join(","),
      SKEIN_MAX_POLL_RECORDS: String(options.maxPollRecords),
      SKEIN_SESSION_TIMEOUT: "6 seconds",
      SKEIN_HEARTBEAT_INTERVAL: "1 second",
      SKEIN_TRANSACTION_TIMEOUT: "20 seconds",
      SKEIN_CHANGELOG_REPLICATION_FACTOR: String(replication)
    }
    const group = (label: string, app: AppName, file: string, args: ReadonlyArray<string>, from: string, to: string, store: Option.Option<string>) => {
      const applicationId = `${runId}-${label}`
      groups.push({
        spec: {
          label,
          app,
          file,
          args,
          env: { ...common, SKEIN_APPLICATION_ID: applicationId, CHAOS_INPUT_TOPIC: from, CHAOS_OUTPUT_TOPIC: to }
        },
        input: from,
        output: to,
        changelog: Option.map(store, (name) => `${applicationId}-${name}-changelog`),
        consumers: [{ groupId: applicationId, topics: [from] }],
        internal: [],
        windowed: Option.none(),
        enrichment: Option.none(),
        postgres: Option.none()
      })
    }
    for (const app of options.apps) {
      if (app === "echo") group("echo", "echo", "test/apps/echo.ts", [], input, `${runId}-echo-out`, Option.none())
      if (app === "aggregate") {
        group("aggregate", "aggregate", "test/apps/aggregate.ts", [], input, `${runId}-aggregate-out`, Option.some("aggregate"))
      }
      if (app === "pipeline") {
        group("pipeline-1", "pipeline", "test/apps/pipeline.ts", ["--stage", "1"], input, `${runId}-pipeline-mid`, Option.some("aggregate"))
        group("pipeline-2", "pipeline", "test/apps/pipeline.ts", ["--stage", "2"], `${runId}-pipeline-mid`, `${runId}-pipeline-out`, Option.some("audit"))
      }
      if (app === "windowed") {
        const applicationId = `${runId}-windowed`
        const settings: WindowedSettings = {
          input,
          closers: `${runId}-windowed-closers`,
          output: `${runId}-windowed-out`,
          ...options.windowed
        }
        const deadLetters = `${runId}-windowed-dead-letters`
        const layout = yield* windowedLayout(settings, applicationId)
        groups.push({
          spec: {
            label: "windowed",
            app,
            file: "test/apps/windowed.ts",
            args: [],
            env: {
              ...common,
              SKEIN_APPLICATION_ID: applicationId,
              SKEIN_DEAD_LETTER_TOPIC: deadLetters,
              CHAOS_INPUT_TOPIC: settings.input,
              CHAOS_CLOSERS_TOPIC: settings.closers,
              CHAOS_OUTPUT_TOPIC: settings.output,
              CHAOS_WINDOW_MS: String(settings.windowMs),
              CHAOS_GRACE_MS: String(settings.graceMs),
              CHAOS_GROUPS: String(settings.groups)
            }
          },
          input,
          output: settings.output,
          changelog: Option.none(),
          consumers: layout.consumers,
          internal: [...layout.repartitions, ...layout.changelogs, deadLetters],
          windowed: Option.some({ settings, deadLetters, changelogs: layout.changelogs }),
          enrichment: Option.none(),
          postgres: Option.none()
        })
      }
      if (app === "enrichment") {
        const applicationId = `${runId}-enrichment`
        const settings: EnrichmentSettings = {
          orders: `${runId}-enrichment-orders`,
          customers: `${runId}-enrichment-customers`,
          regions: `${runId}-enrichment-regions`,
          enriched: `${runId}-enrichment-enriched`,
          totals: `${runId}-enrichment-totals`
        }
        const deadLetters = `${runId}-enrichment-dead-letters`
        const layout = yield* enrichmentLayout(settings, applicationId)
        groups.push({
          spec: {
            label: "enrichment",
            app,
            file: "test/apps/enrichment.ts",
            args: [],
            env: {
              ...common,
              SKEIN_APPLICATION_ID: applicationId,
              SKEIN_DEAD_LETTER_TOPIC: deadLetters,
              CHAOS_ORDERS_TOPIC: settings.orders,
              CHAOS_CUSTOMERS_TOPIC: settings.customers,
              CHAOS_REGIONS_TOPIC: settings.regions,
              CHAOS_ENRICHED_TOPIC: settings.enriched,
              CHAOS_TOTALS_TOPIC: settings.totals
            }
          },
          input: settings.orders,
          output: settings.enriched,
          changelog: Option.none(),
          consumers: layout.consumers,
          internal: [settings.totals, ...layout.repartitions, layout.tableChangelog, layout.totalsChangelog, deadLetters],
          windowed: Option.none(),
          enrichment: Option.some({
            settings,
            deadLetters,
            tableChangelog: layout.tableChangelog,
            totalsChangelog: layout.totalsChangelog,
            repartitions: layout.repartitions
          }),
          postgres: Option.none()
        })
      }
      if (app === "postgres") {
        const applicationId = `${runId}-postgres`
        const deadLetters = `${runId}-postgres-dead-letters`
        const database = yield* Postgres.start(runId)
        yield* say(`[${elapsed(t0)}] postgres: ${database.kind} server, table ${database.table} (no unique constraint)`)
        groups.push({
          spec: {
            label: "postgres",
            app,
            file: "test/apps/postgres.ts",
            args: [],
            env: {
              ...common,
              SKEIN_APPLICATION_ID: applicationId,
              SKEIN_DEAD_LETTER_TOPIC: deadLetters,
              CHAOS_INPUT_TOPIC: input,
              CHAOS_OUTPUT_TOPIC: deadLetters,
              CHAOS_TABLE: database.table,
              DATABASE_URL: Postgres.urlForApps(database)
            }
          },
          input,
          // The sink writes no topic but its dead letters (in Kafka transactions, after the database's).
          output: deadLetters,
          changelog: Option.none(),
          consumers: [{ groupId: applicationId, topics: [input] }],
          internal: [],
          windowed: Option.none(),
          enrichment: Option.none(),
          postgres: Option.some(database)
        })
      }
    }
    const enrichmentGroup = groups.find((g) => Option.isSome(g.enrichment))
    // The shared input's driver runs when an app reads it (the enrichment app has a driver of its own).
    const drivesInput = groups.some((g) => g.input === input)
    const windowedGroup = groups.find((g) => Option.isSome(g.windowed))
    yield* createTopics(
      brokers,
      [
        input,
        ...groups.map((g) => g.output),
        ...groups.flatMap((g) => Option.match(g.windowed, { onNone: () => [], onSome: (w) => [w.settings.closers, w.deadLetters] })),
        ...groups.flatMap((g) =>
          Option.match(g.enrichment, {
            onNone: () => [],
            onSome: (e) => [e.settings.orders, e.settings.customers, e.settings.regions, e.settings.totals, e.deadLetters]
          })
        )
      ],
      options.partitions,
      replication
    )
    if (windowedGroup !== undefined) {
      const { windowMs, graceMs, groups: keys } = options.windowed
      yield* say(
        `[${elapsed(t0)}] windowed: tumbling ${windowMs / 1000} s windows of event time, grace ${graceMs / 1000} s, ` +
          `${keys} second keys; final results only`
      )
    }

    if (enrichmentGroup !== undefined) {
      for (const e of Option.toArray(enrichmentGroup.enrichment)) {
        const written = yield* EnrichmentDriver.writeRegions(brokers, e.settings.regions, options.partitions, options.enrichment.regionRevisions)
        yield* say(`[${elapsed(t0)}] enrichment: the global table of regions written before the apps start (${written} records)`)
      }
    }
    const wire = yield* Wire.make(brokers)
    const admin = yield* Verifier.groupAdmin(brokers)
    const fleet: Fleet = yield* makeFleet({
      root,
      logDir: Path.join(runDir, "logs"),
      runtimes: options.runtimes,
      envFor: (instance) => ({
        SKEIN_STATE_DIR: Path.join(runDir, "state", instance.id),
        SKEIN_CLIENT_ID: instance.id
      })
    })
    const onExit = () => fleet.killAllNow()
    process.on("exit", onExit)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        fleet.killAllNow()
        process.off("exit", onExit)
      })
    )
    for (const g of groups) {
      for (let i = 0; i < options.instances; i++) yield* fleet.add(g.spec, false)
    }
    yield* Effect.forEach(fleet.instances, fleet.start, { discard: true })
    yield* say(`[${elapsed(t0)}] started ${fleet.instances.length} instances`)

    // -- drive, inject faults, report progress
    const progress = yield* Ref.make<Driver.DriverProgress>({ acked: 0, retries: 0 })
    const driveSeconds = options.records / options.rate
    // The windowed app's event time: the driving schedule, from the window boundary before now.
    const eventBase = Math.floor(Date.now() / options.windowed.windowMs) * options.windowed.windowMs
    const eventTime = eventTimeOf(eventBase, options.rate)
    const driver = yield* Effect.fork(
      drivesInput
        ? Driver.drive({
          brokers,
          topic: input,
          partitions: options.partitions,
          records: options.records,
          rate: options.rate,
          keys: options.keys,
          seed: options.seed,
          ...(windowedGroup === undefined ? {} : { eventTime }),
          ...(groups.some((g) => Option.isSome(g.postgres)) ? { poison: Postgres.isPoison } : {})
        }, progress)
        : Ref.get(progress)
    )
    const enrichmentProgress = yield* Ref.make<EnrichmentDriver.EnrichmentProgress>({ acked: 0, updates: 0, retries: 0 })
    const ordering = yield* Deferred.make<void>()
    const enrichmentDriver = yield* Effect.fork(Option.match(Option.fromNullable(enrichmentGroup).pipe(Option.flatMap((g) => g.enrichment)), {
      onNone: () => Ref.get(enrichmentProgress),
      onSome: (e) =>
        EnrichmentDriver.drive({
          brokers,
          wire,
          orders: e.settings.orders,
          customers: e.settings.customers,
          changelog: e.tableChangelog,
          partitions: options.partitions,
          records: options.records,
          rate: options.rate,
          customerCount: options.enrichment.customers,
          updateEvery: options.enrichment.updateEvery,
          seed: options.seed,
          say: (line) => say(`[${elapsed(t0)}] ${line}`),
          ordering
        }, enrichmentProgress)
    }))
    // The faults spread over the driving time: with the enrichment app, from its first order on
    // (before, its instances load the global table and the customers: the driver waits for that).
    if (enrichmentGroup !== undefined) yield* Effect.raceFirst(Deferred.await(ordering), Effect.asVoid(Fiber.await(enrichmentDriver)))
    const faults = yield* Effect.fork(Faults.run({
      fleet,
      specs: groups.map((g) => g.spec),
      transactionalTopics: (spec) =>
        groups.filter((g) => g.spec === spec).flatMap((g) => [g.output, ...Option.toArray(g.changelog), ...g.internal]),
      wire,
      cluster,
      plan: {
        kills: options.kills,
        bounces: options.bounces,
        brokerKills: options.brokerKills,
        pauses: options.pauses,
        transactionKills: options.transactionKills,
        // Past the 6 s session timeout, so the group moves the frozen instance's tasks away.
        pauseFor: Duration.seconds(10),
        window: Duration.seconds(driveSeconds)
      },
      // The Postgres app's zombies are frozen inside an open database transaction, thawed once their partitions moved.
      pauseHook: (spec) =>
        Option.match(groups.find((g) => g.spec === spec)?.postgres ?? Option.none(), {
          onNone: () => undefined,
          onSome: (run) => Postgres.pauseHook(run, `${runId}-postgres`, input)
        }),
      random,
      say: (line) => say(`[${elapsed(t0)}] ${line}`)
    }))

    // Per consumer group (the windowed app has one per sub-topology: `<label>.<i>`), what it has not consumed yet.
    const lags = Effect.forEach(
      groups.flatMap((g) =>
        g.consumers.map((c, i) => ({
          label: g.consumers.length === 1 ? g.spec.label : `${g.spec.label}.${i}`,
          consumer: c,
          database: g.postgres
        }))
      ),
      ({ consumer, database, label }) =>
        Effect.forEach(consumer.topics, (topic) =>
          Option.match(database, {
            onNone: () => Verifier.lag(admin, wire, consumer.groupId, topic),
            // A database sink's progress is its offsets table (its Kafka offsets follow only now and then).
            onSome: (run) => Postgres.lag(run, wire, consumer.groupId, topic)
          })).pipe(
          Effect.map((ns) => [label, ns.reduce((a, b) => a + b, 0)] as const),
          Effect.orElseSucceed(() => [label, -1] as const)
        )
    )
    const report = Effect.gen(function*() {
      const p = drivesInput ? yield* Ref.get(progress) : yield* Ref.get(enrichmentProgress)
      const l = yield* lags
      const crashes = [...fleet.crashes().values()].reduce((a, b) => a + b, 0)
      yield* say(
        `[${elapsed(t0)}] driven ${p.acked}/${options.records}${p.retries > 0 ? ` (retries ${p.retries})` : ""} | lag ` +
          l.map(([label, n]) => `${label}=${n < 0 ? "?" : n}`).join(" ") +
          ` | crashes ${crashes} | ${fleet.instances.filter((i) => i.phase !== "exited" || !i.extra).map(statusOf).join(" ")}`
      )
      return l
    })
    const reporter = yield* Effect.fork(
      Effect.forever(Effect.sleep(Duration.seconds(options.records > 20_000 ? 15 : 5)).pipe(Effect.zipRight(report)))
    )
    const driven = yield* Fiber.join(driver)
    if (drivesInput) yield* say(`[${elapsed(t0)}] driver done: ${driven.acked} records acknowledged`)
    const enrichmentDriven = yield* Fiber.join(enrichmentDriver)
    if (enrichmentGroup !== undefined) {
      yield* say(
        `[${elapsed(t0)}] enrichment driver done: ${enrichmentDriven.acked} orders and ${enrichmentDriven.updates} customer versions acknowledged` +
          (enrichmentDriven.retries > 0 ? ` (retries ${enrichmentDriven.retries})` : "")
      )
    }
    const counts = yield* Fiber.join(faults)
    yield* say(`[${elapsed(t0)}] faults done: ${counts.errors.length === 0 ? "no errors" : counts.errors.join("; ")}`)

    // -- catch up: every group has consumed all of its input (stage 2 after stage 1); then the
    // windowed app gets its closers, and everything has consumed them too
    const closersAt = new Map<number, number>()
    const caughtUp = yield* Effect.gen(function*() {
      // Wait as long as the apps make progress; give up after catchUpTimeout without any.
      const stall = Duration.toMillis(options.catchUpTimeout)
      let best = Number.POSITIVE_INFINITY
      let progressAt = Date.now()
      let zeros = 0
      let closersSent = windowedGroup === undefined
      while (Date.now() - progressAt < stall) {
        for (const instance of fleet.instances) if (!instance.extra && instance.phase === "killed") yield* fleet.start(instance)
        const l = yield* lags
        const total = l.reduce((n, [, x]) => n + Math.max(0, x), 0)
        // A lag that could not be read (-1) is no progress: counted as 0 it would set a best that
        // the next reads never beat, and a run still catching up would time out.
        if (l.every(([, n]) => n >= 0) && total < best) {
          best = total
          progressAt = Date.now()
        }
        zeros = l.every(([, n]) => n === 0) ? zeros + 1 : 0
        if (zeros >= 2 && !closersSent && windowedGroup !== undefined) {
          // Every input record is in the repartition topic, committed: the closers come after all of them.
          for (const e of yield* wire.ends(windowedGroup.output)) closersAt.set(e.partition, e.highWatermark)
          const closers = Option.match(windowedGroup.windowed, { onNone: () => "", onSome: (w) => w.settings.closers })
          const closeAt = yield* sendClosers(brokers, closers, options, eventTime(options.records - 1) + 2000)
          yield* say(`[${elapsed(t0)}] windowed: input consumed; closers sent at event time ${closeAt}`)
          closersSent = true
          zeros = 0
          best = Number.POSITIVE_INFINITY
          progressAt = Date.now()
        }
        if (zeros >= 2) return true
        yield* Effect.sleep(Duration.seconds(1))
      }
      return false
    })
    yield* Fiber.interrupt(reporter)
    yield* report
    yield* say(`[${elapsed(t0)}] ${caughtUp ? "all apps caught up" : "TIMEOUT: apps did not catch up"}`)
    // A database sink's Kafka offsets (lag monitoring only) follow the database's within kafkaCommitInterval (5 s) once idle.
    for (const g of groups) {
      if (Option.isNone(g.postgres) || !caughtUp) continue
      const from = Date.now()
      let behind = -1
      while (behind !== 0 && Date.now() - from < 20_000) {
        behind = yield* Effect.orElseSucceed(Verifier.lag(admin, wire, g.consumers[0]?.groupId ?? "", input), () => -1)
        if (behind !== 0) yield* Effect.sleep(Duration.millis(500))
      }
      yield* say(
        `[${elapsed(t0)}] ${g.spec.label}: the group's Kafka offsets ` +
          (behind === 0
            ? `at the input's end ${((Date.now() - from) / 1000).toFixed(1)} s after the offsets table`
            : `still ${behind < 0 ? "?" : behind} records behind 20 s after the offsets table reached the end`)
      )
    }

    // -- stop everything cleanly, then wait for empty groups and no open transaction
    fleet.closeRestarts()
    const unclean = yield* Effect.forEach(
      fleet.instances,
      (i) => Effect.map(fleet.stop(i, Duration.seconds(30)), (clean) => (clean ? [] : [i.id])),
      { concurrency: "unbounded" }
    ).pipe(Effect.map((lists) => lists.flat()))
    if (unclean.length > 0) yield* say(`[${elapsed(t0)}] did not stop within 30 s of SIGTERM: ${unclean.join(", ")}`)
    const topics = [...new Set(groups.flatMap((g) => [g.output, ...Option.toArray(g.changelog), ...g.internal]))]
    const quiet = yield* Verifier.awaitQuiescence({
      admin,
      wire,
      groups: groups.flatMap((g) => g.consumers.map((c) => c.groupId)),
      topics,
      timeout: Duration.seconds(90)
    })
    yield* say(
      `[${elapsed(t0)}] ${quiet.quiet ? "quiescent" : "NOT quiescent"} after ${quiet.waitedMs} ms` +
        (quiet.blockers.length > 0 ? `: ${quiet.blockers.slice(0, 5).join("; ")}` : "")
    )

    // -- verify
    const inputLogs = yield* wire.read(input)
    // The Postgres app's poison records are its own check's (they are no record of truth of the others).
    const poisoned = PostgresVerifier.poisonIds(inputLogs)
    const truth = Verifier.readInput(PostgresVerifier.withoutPoison(inputLogs))
    if (drivesInput) yield* say(
      `[${elapsed(t0)}] input: ${truth.records} records, ${truth.byKey.size} keys` +
        (truth.repeated > 0 ? `, ${truth.repeated} written twice by driver retries` : "") +
        (truth.problems.length > 0 ? `; PROBLEMS: ${truth.problems.slice(0, 3).join("; ")}` : "")
    )
    const distinctIds = truth.idCounts.size + poisoned.size
    const inputProblems = !drivesInput ? [] : [
      ...truth.problems,
      ...(distinctIds < driven.acked ? [`input holds ${distinctIds} distinct ids but the driver had ${driven.acked} acknowledged`] : [])
    ]
    const results: Array<AppResult> = []
    for (const app of options.apps) {
      const mine = groups.filter((g) => g.spec.app === app)
      const checks: Array<Verifier.Check> = []
      for (const g of mine) {
        const logs = yield* wire.read(g.output)
        const label = g.spec.label
        if (Option.isSome(g.enrichment)) {
          const e = g.enrichment.value
          const others = new Map<string, ReadonlyArray<Wire.PartitionLog>>()
          others.set("table changelog", yield* wire.read(e.tableChangelog))
          for (const topic of e.repartitions) others.set(topic.slice(`${runId}-enrichment-`.length), yield* wire.read(topic))
          checks.push(...EnrichmentVerifier.checkEnrichment(label, {
            orders: yield* wire.read(e.settings.orders),
            customers: yield* wire.read(e.settings.customers),
            regions: yield* wire.read(e.settings.regions),
            enriched: logs,
            totals: yield* wire.read(e.settings.totals),
            deadLetters: yield* wire.read(e.deadLetters),
            totalsChangelog: yield* wire.read(e.totalsChangelog),
            others
          }, enrichmentDriven.acked))
          continue
        }
        if (Option.isSome(g.postgres)) {
          const check = yield* Postgres.verify(g.postgres.value, {
            name: label,
            groupId: g.consumers[0]?.groupId ?? "",
            inputTopic: input,
            input: inputLogs,
            deadLetters: logs
          })
          for (const line of check.summary) yield* say(`  ${line}`)
          // Not a check: the group's Kafka offsets follow the database's every kafkaCommitInterval after a batch (lag monitoring).
          const kafkaLag = yield* Effect.either(Verifier.lag(admin, wire, g.consumers[0]?.groupId ?? "", input))
          yield* say(
            `  ${label}: the group's Kafka offsets are ${Either.match(kafkaLag, { onLeft: () => "?", onRight: String })} records behind ` +
              "the input's end after the stop (they follow the database's every kafkaCommitInterval after a batch: lag monitoring only)"
          )
          checks.push(check)
          continue
        }
        if (Option.isSome(g.windowed)) {
          const w = g.windowed.value
          checks.push(WindowedVerifier.checkWindowed({
            name: label,
            expected: WindowedVerifier.expectedWindows(inputLogs, w.settings.windowMs, w.settings.groups),
            windowMs: w.settings.windowMs,
            output: logs,
            deadLetters: yield* wire.read(w.deadLetters),
            closersAt
          }))
          for (const changelog of w.changelogs) checks.push(Verifier.checkLog(`${label} changelog`, yield* wire.read(changelog)))
          continue
        }
        if (label === "echo") checks.push(Verifier.checkEcho(label, truth, logs))
        else if (label === "pipeline-2") checks.push(Verifier.checkAudited(label, truth, logs))
        else checks.push(Verifier.checkAggregate(label, truth, logs))
        if (Option.isSome(g.changelog)) {
          const changelog = yield* wire.read(g.changelog.value)
          checks.push(
            label === "pipeline-2"
              ? Verifier.checkChangelog(`${label} changelog`, truth, changelog, Verifier.finalAudit, Verifier.AUDIT_STATE_FIELDS)
              : Verifier.checkChangelog(`${label} changelog`, truth, changelog, Verifier.finalAggregate, Verifier.AGGREGATE_STATE_FIELDS)
          )
        }
      }
      // The app's verdict: its final output (pipeline: stage 2) for duplicates and losses, every check for state.
      const final = checks.find((c) => c.name === (app === "pipeline" ? "pipeline-2" : app))
      for (const c of checks) {
        yield* say(`  ${c.name}: ${c.records} records, duplicates=${c.duplicates} lost=${c.lost} mismatches=${c.stateMismatches}`)
        for (const d of c.details) yield* say(`    ${d}`)
      }
      const pauses = counts.pauses.get(app) ?? 0
      if (pauses > 0) yield* say(`    ${app}: ${pauses} instance(s) frozen 10 s (SIGSTOP) and resumed as zombies`)
      // The runtime logs a warning when a zombie's commit is rejected because a newer owner fenced it.
      const fencedCommits = mine.reduce((n, g) => n + countInLogs(Path.join(runDir, "logs"), `${g.spec.label}-`, "was fenced by a newer owner"), 0)
      if (fencedCommits > 0) yield* say(`    ${app}: ${fencedCommits} commit(s) of zombie tasks rejected by fencing`)
      if (app === "postgres") {
        // A database sink logs each batch transaction its owner epoch check rolled back (a newer owner took the partition).
        const rejected = countInLogs(Path.join(runDir, "logs"), "postgres-", DatabaseTask.epochRejected)
        const inTransaction = counts.pausesInTransaction.get(app) ?? 0
        yield* say(
          `    ${app}: ${inTransaction} of ${pauses} pause(s) froze an instance inside an open database transaction; ` +
            `${rejected} database transaction(s) rejected by the owner epoch check and rolled back`
        )
        // A zombie frozen inside its transaction, thawed after newer owners claimed its partitions: its late
        // transaction must have been rejected (a commit of it would also show as duplicated rows).
        if (inTransaction > 0 && rejected === 0) {
          const detail = `${inTransaction} zombie(s) frozen inside a transaction, and no late transaction rejected by the epoch check`
          yield* say(`    ${app}: ${detail}`)
          checks.push({ name: `${app} zombies`, records: 0, duplicates: 0, lost: 0, stateMismatches: 1, details: [detail] })
        }
      }
      if (app === "enrichment") {
        // The runtime logs the start and the end of every global table load: a start without an end was cut short.
        const loads = countInLogs(Path.join(runDir, "logs"), "enrichment-", "loading global table")
        const loaded = countInLogs(Path.join(runDir, "logs"), "enrichment-", "loaded global table")
        yield* say(`    ${app}: ${loads} global table loads, ${loads - loaded} of them cut short (a kill, a stop)`)
      }
      const crashes = mine.reduce((n, g) => n + (fleet.crashes().get(g.spec.label) ?? 0), 0)
      if (crashes > 0) yield* say(`    ${app}: ${crashes} unexpected exit(s) (restarted); see the logs`)
      const duplicates = (final?.duplicates ?? 0) + checks.filter((c) => c !== final).reduce((n, c) => n + c.duplicates, 0)
      const lost = (final?.lost ?? 0) + checks.filter((c) => c !== final).reduce((n, c) => n + c.lost, 0)
      const stateMismatches = checks.reduce((n, c) => n + c.stateMismatches, 0)
      const records = app === "enrichment" ? enrichmentDriven.acked : app === "postgres" ? (final?.records ?? 0) : truth.records
      const pass = duplicates === 0 && lost === 0 && stateMismatches === 0 && quiet.quiet && caughtUp &&
        (app === "enrichment" || inputProblems.length === 0) && records > 0
      results.push({
        app,
        records,
        duplicates,
        lost,
        stateMismatches,
        kills: counts.kills.get(app) ?? 0,
        bounces: counts.bounces.get(app) ?? 0,
        brokerKills: counts.brokerKills,
        pass
      })
    }
    for (const p of inputProblems) yield* say(`  input problem: ${p}`)
    yield* say(
      `[${elapsed(t0)}] ${counts.killsOfActive}/${[...counts.kills.values()].reduce((a, b) => a + b, 0)} kills hit an instance holding tasks`
    )
    if (options.transactionKills > 0) {
      yield* say(
        `[${elapsed(t0)}] ${counts.transactionKillsAborted}/${options.transactionKills} kills inside an open transaction ended in its abort`
      )
    }
    for (const r of results) yield* say(summaryLine(r))
    return { results, runDir }
  })).pipe(
    Effect.tap(({ results, runDir }) =>
      results.every((r) => r.pass)
        ? Effect.sync(() => {
          Fs.rmSync(Path.join(runDir, "kafka"), { recursive: true, force: true })
          Fs.rmSync(Path.join(runDir, "state"), { recursive: true, force: true })
        })
        : say(`kept for a post-mortem: ${runDir} (broker data and logs, app logs)`)
    ),
    Effect.map(({ results }) => results)
  )

const isMain = process.argv[1] !== undefined && Path.resolve(process.argv[1]) === new URL(import.meta.url).pathname

/**
 * `--app extract` runs the extractor chaos (test/apps/extractChaos.ts): an HTTP
 * source instead of the Kafka driver, SIGKILLs between a page's fetch and its
 * commit. It takes --kills and --instances and prints the same summary line.
 */
const extractArgs = (argv: ReadonlyArray<string>): ReadonlyArray<string> | undefined => {
  const index = argv.findIndex((a) => a === "--app" || a === "--app=extract")
  if (index < 0) return undefined
  if (argv[index] !== "--app=extract" && argv[index + 1] !== "extract") return undefined
  return argv.filter((_, i) => i !== index && !(argv[index] === "--app" && i === index + 1))
}

const forwardedExtract = isMain ? extractArgs(process.argv.slice(2)) : undefined

if (forwardedExtract !== undefined) {
  const script = Path.join(Path.dirname(new URL(import.meta.url).pathname), "..", "apps", "extractChaos.ts")
  const child = ChildProcess.spawn(process.execPath, ["--import", "tsx", script, ...forwardedExtract], { stdio: "inherit" })
  child.on("exit", (code) => process.exit(code ?? 1))
} else if (isMain) {
  const options = Effect.try({
    try: () => parseArgs(process.argv.slice(2), process.env),
    catch: (e) => (e instanceof Error ? e : new Error(String(e)))
  })
  const program = options.pipe(
    Effect.flatMap(runChaos),
    Effect.exit,
    Effect.flatMap((exit) =>
      Effect.sync(() => {
        if (Exit.isSuccess(exit)) process.exit(exit.value.every((r) => r.pass) ? 0 : 1)
        process.stderr.write(`chaos: ${Cause.pretty(exit.cause)}\n`)
        process.exit(2)
      })
    )
  )
  NodeRuntime.runMain(program, { disableErrorReporting: true })
}
