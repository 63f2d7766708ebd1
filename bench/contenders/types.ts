/**
 * The contender interface of the benchmark.
 *
 * A processing contender is a PROCESS. The harness gives it, on its command line:
 *   --brokers host:port[,...]  --input <topic>  --output <topic>  --group <consumer group / app id>
 *   --state-dir <empty or existing dir>  --commit-interval-ms <n>
 * It must consume <input> from the earliest offset and, for every input record (key K), write
 * one record to <output> with key K and value = the running count of K as a decimal UTF-8
 * string ("1", "2", ...), committing its input offsets to <group>. It runs until the harness
 * stops it (SIGTERM = clean stop, SIGKILL = crash). Completion is judged by the harness (group
 * offsets at the input's end, then a read_committed check of the output), not by the process.
 *
 * Optionally it prints JSON lines on stdout (other lines are only logged):
 *   {"event":"started","ts":<epoch ms>}        the runtime is up and the app's code runs (the
 *                                               restart phase reports spawn → started)
 *   {"event":"first-read","ts":<epoch ms>}     first input record seen (throughput starts here;
 *                                               without it the harness uses the spawn time)
 *   {"event":"restore-start","ts":<epoch ms>}  state restore from the changelog begins
 *   {"event":"restore-end","ts":<epoch ms>,"records":<changelog records applied>}
 *                                               (Skein adds "tailTasks"/"fullTasks": tasks
 *                                               restored from a kept checkpoint / in full)
 */
import type { Command } from "../lib/proc.ts"
import type { ClientConfigFiles } from "../lib/security.ts"

export interface AppSpec {
  readonly brokers: string
  readonly input: string
  readonly output: string
  readonly group: string
  readonly stateDir: string
  readonly commitIntervalMs: number
  /**
   * A secured cluster's connection settings for JVM and Python peers (from SKEIN_*, see
   * bench/lib/security.ts); absent for PLAINTEXT. Node apps read the SKEIN_* environment
   * they inherit instead.
   */
  readonly clientConfig?: ClientConfigFiles | undefined
}

/**
 * The windowed job's app (bench/lib/windowed.ts): `AppSpec`'s arguments plus `--grace-ms`. It
 * groups the input by the text of the value before its first `;`, counts per that key in tumbling
 * one-minute windows of event time (the records' timestamps) with that grace, and writes each
 * window's final result once, key `<second key>@<window start ms>`, value the count as a decimal
 * string.
 */
export interface WindowedAppSpec extends AppSpec {
  readonly graceMs: number
}

/**
 * The Postgres job's app (bench/lib/postgresRun.ts): `AppSpec`'s arguments plus `--table`, and
 * DATABASE_URL in its environment (the harness sets it; a URL may hold a password, so it is never
 * on a command line). It inserts one row (k, v, p, o) per input record into the table: the
 * record's key, value, partition and offset.
 */
export interface PostgresAppSpec extends AppSpec {
  readonly table: string
}

/**
 * The enrichment job's app (bench/lib/enrichment.ts): `AppSpec`'s arguments plus `--table T`. It
 * reads `T` (a compacted topic) as a table and left-joins each record of the input (read from the
 * earliest offset) with the table's value for its key, writing to the output the record's key and
 * `<the input value before its first ';'>|<the table value, or '-' when none>`, exactly-once.
 */
export interface EnrichmentAppSpec extends AppSpec {
  readonly table: string
}

export type Availability = { readonly ok: true } | { readonly ok: false; readonly reason: string }

export interface SetupContext {
  /** Repository root. */
  readonly root: string
  /** Cache dir outside git: jars, compiled classes. */
  readonly cache: string
  readonly log: (msg: string) => void
}

export interface ProcessContender {
  readonly kind: "process"
  readonly name: string
  /** One line for the report: guarantee, threads, notable settings. */
  readonly description: string
  /** Has a changelog-backed store, so a restore after a kill can be measured. */
  readonly hasState: boolean
  /**
   * Takes part in the restart phase (bench/README.md): keeps its local state across a graceful
   * restart, and its restart cold (state dir wiped) and warm (kept) is measured.
   */
  readonly restartPhase?: boolean
  /** Idempotent, cached setup (install, compile). Says why not when it cannot run. */
  readonly setup: (ctx: SetupContext) => Promise<Availability>
  readonly command: (spec: AppSpec) => Command
  /** The windowed job's command (`npm run bench -- --job windowed`); absent: no windowed app. */
  readonly windowed?: (spec: WindowedAppSpec) => Command
  /** The windowed app, in one line for the report (as `description`). */
  readonly windowedDescription?: string
  /** The enrichment job's command (`npm run bench -- --job enrichment`); absent: no enrichment app. */
  readonly enrichment?: (spec: EnrichmentAppSpec) => Command
  /** The enrichment app, in one line for the report (as `description`). */
  readonly enrichmentDescription?: string
  /** The Postgres job's command (`npm run bench -- --job postgres`); absent: not in that job. */
  readonly postgres?: (spec: PostgresAppSpec) => Command
}

export interface CeilingResult {
  readonly throughput?: number
  readonly p50?: number
  readonly p99?: number
  readonly peakRssMiB?: number
  readonly note?: string
}

/** A contender measured by its own tool rather than by the harness (Kafka's perf tools). */
export interface CeilingContender {
  readonly kind: "ceiling"
  readonly name: string
  readonly description: string
  readonly setup: (ctx: SetupContext) => Promise<Availability>
  readonly run: (args: {
    readonly brokers: string
    readonly topic: string
    readonly records: number
    readonly valueBytes: number
    readonly partitions: number
    readonly rate: number
    readonly latencySeconds: number
    readonly logFile: string
    /** As `AppSpec.clientConfig`. */
    readonly clientConfig?: ClientConfigFiles | undefined
    readonly createTopic: (name: string) => Promise<void>
  }) => Promise<CeilingResult>
}

export type Contender = ProcessContender | CeilingContender

/**
 * The command-line arguments every contender app takes: where to read and
 * write, its group, and (for stateful apps) its state directory and commit
 * interval.
 */
export const appArgs = (s: AppSpec, options: { readonly stateful: boolean }): ReadonlyArray<string> => [
  "--brokers",
  s.brokers,
  "--input",
  s.input,
  "--output",
  s.output,
  "--group",
  s.group,
  ...(options.stateful ? ["--state-dir", s.stateDir, "--commit-interval-ms", String(s.commitIntervalMs)] : [])
]
