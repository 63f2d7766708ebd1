/**
 * Resource leaks across rebalances: one runner (the aggregate app, stateful,
 * in this process) owns all 6 tasks while records flow; a second instance
 * (a bun process) joins the group and leaves it again, 25 times: 50
 * rebalances, each tearing down and rebuilding tasks (producers, LevelDB
 * stores, changelog restores). Whenever the runner owns all 6 tasks again,
 * its open file descriptors, LevelDB files and store folders, sockets and
 * live fibers must be back at the baseline; and once it is stopped,
 * everything it opened must be closed.
 *
 * The baseline is taken after one warm-up join/leave: the first rebalance
 * opens one more socket once for good (kafkajs connects lazily; it stays at
 * +1 through all later rebalances, so it is not a per-rebalance leak).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Supervisor } from "effect"
import kafkajs from "kafkajs"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { inject } from "vitest"
import { Runner, SkeinConfig } from "../../src/index.ts"
import { aggregator } from "../apps/transformers.ts"
import { commandFor } from "../chaos/instances.ts"

declare module "vitest" {
  export interface ProvidedContext {
    kafkaBrokers: string
  }
}

const CYCLES = 25
const PARTITIONS = 6
const root = Path.resolve(import.meta.dirname, "..", "..")

interface Sample {
  readonly fds: number
  readonly sockets: number
  readonly levelDbFiles: number
  readonly storeFolders: number
  readonly fibers: number
}

const openFiles = (): ReadonlyArray<string> =>
  Fs.readdirSync("/proc/self/fd").flatMap((fd) => {
    try {
      return [Fs.readlinkSync(`/proc/self/fd/${fd}`)]
    } catch {
      return [] // the directory listing's own descriptor, already closed
    }
  })

/** Store folders: `<stateDir>/<applicationId>/<transformer>/<partition>`. */
const storeFolders = (stateDir: string): number =>
  Fs.existsSync(stateDir)
    ? Fs.readdirSync(stateDir).reduce(
      (n, application) =>
        Fs.readdirSync(Path.join(stateDir, application)).reduce(
          (m, transformer) => m + Fs.readdirSync(Path.join(stateDir, application, transformer)).length,
          n
        ),
      0
    )
    : 0

const sample = (stateDir: string, supervisor: Supervisor.Supervisor<ReadonlyArray<Fiber.Fiber<unknown, unknown>>>) =>
  Effect.map(supervisor.value, (fibers): Sample => {
    const files = openFiles()
    return {
      fds: files.length,
      sockets: files.filter((f) => f.startsWith("socket:")).length,
      levelDbFiles: files.filter((f) => f.startsWith(stateDir)).length,
      storeFolders: storeFolders(stateDir),
      fibers: fibers.length
    }
  })

/** What the runner shows of itself, for a failure's message. */
const describeRunner = (stats: Runner.Stats) =>
  JSON.stringify({
    phase: stats.phase,
    assigned: [...stats.assigned],
    pending: [...stats.pending],
    stopped: [...stats.stopped],
    inFlightTransactions: stats.inFlightTransactions,
    rebalances: stats.rebalances,
    commits: stats.commits,
    aborts: stats.aborts
  })

/**
 * Waits until `condition` holds, checking every 100 ms; fails at once with the runner's exit if it
 * ended, and after `timeout` with what the runner shows of itself.
 */
const waitUntil = (
  what: string,
  condition: () => boolean,
  runner: { readonly fiber: Fiber.RuntimeFiber<unknown, unknown>; readonly stats: Runner.Stats },
  timeout: Duration.DurationInput = Duration.seconds(90)
) =>
  Effect.gen(function*() {
    const deadline = Date.now() + Duration.toMillis(Duration.decode(timeout))
    while (!condition()) {
      const ended = yield* Fiber.poll(runner.fiber)
      if (ended._tag === "Some") {
        return yield* Effect.dieMessage(`waiting until ${what}, the runner ended: ${String(ended.value)}`)
      }
      if (Date.now() > deadline) {
        return yield* Effect.dieMessage(`timed out waiting until ${what}; the runner: ${describeRunner(runner.stats)}`)
      }
      yield* Effect.sleep(Duration.millis(100))
    }
  })

describe("resource leaks", () => {
  it.live(`one runner through ${CYCLES * 2} rebalances returns to its baseline`, () =>
    Effect.gen(function*() {
      const brokers = (process.env["KAFKA_BROKERS"] ?? inject("kafkaBrokers")).split(",")
      const id = `leaks-${Date.now().toString(36)}`
      const names = { input: `${id}-input`, output: `${id}-output` }
      const stateDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-leaks-"))
      const childStateDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-leaks-child-"))
      const kafka = new kafkajs.Kafka({ brokers, logLevel: kafkajs.logLevel.NOTHING })

      // The producer feeding the input lives in this process: open before the baseline, closed after the end.
      const producer = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const admin = kafka.admin()
          await admin.connect()
          // A broker just started may answer the new topics' leader metadata with
          // UNKNOWN_TOPIC_OR_PARTITION, which kafkajs's waitForLeaders does not retry.
          for (let attempt = 1; ; attempt++) {
            try {
              await admin.createTopics({
                waitForLeaders: true,
                topics: [
                  { topic: names.input, numPartitions: PARTITIONS },
                  { topic: names.output, numPartitions: PARTITIONS }
                ]
              })
              break
            } catch (error) {
              if (attempt >= 30 || !String(error).includes("does not host this topic-partition")) throw error
              await new Promise((resolve) => setTimeout(resolve, 1000))
            }
          }
          await admin.disconnect()
          const p = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
          await p.connect()
          return p
        }),
        (p) => Effect.promise(() => p.disconnect())
      )
      let next = 0
      const produce = (n: number) =>
        Effect.promise(() =>
          producer.send({
            topic: names.input,
            acks: -1,
            messages: Array.from({ length: n }, () => {
              const i = next++
              return { key: `k${i % 200}`, value: JSON.stringify({ id: i, seq: 0, v: i % 7 }), partition: i % PARTITIONS }
            })
          })
        )

      const before = openFiles()
      const stats = Runner.makeStats()
      const supervisor = yield* Supervisor.track
      const runner = yield* Runner.runWithStats(aggregator(names), stats).pipe(
        Effect.provide(SkeinConfig.layer({
          applicationId: id,
          brokers,
          stateDir,
          maxPollRecords: 50,
          sessionTimeout: Duration.seconds(6),
          heartbeatInterval: Duration.millis(500)
        })),
        Effect.fork,
        Effect.supervised(supervisor)
      )

      const watched = { fiber: runner, stats }
      const ownsAll = () => stats.assigned.size === PARTITIONS && stats.inFlightTransactions === 0
      // Settled: owns every task and the last records are committed (a commit a second ago at most).
      const settle = Effect.gen(function*() {
        yield* waitUntil("the runner owns all tasks", ownsAll, watched)
        const commits = stats.commits
        yield* produce(60)
        yield* waitUntil("the runner committed again", () => stats.commits > commits && ownsAll(), watched)
        yield* Effect.sleep(Duration.seconds(2))
        yield* waitUntil("the runner owns all tasks", ownsAll, watched)
      })

      yield* produce(300)
      yield* settle
      const first = yield* sample(stateDir, supervisor)
      yield* Effect.log(`after the first start ${JSON.stringify(first)}`)
      const bun = commandFor(root, "bun", "test/apps/aggregate.ts", [])
      /** A second instance joins (the runner gives up half its tasks), then leaves (it owns all again). */
      const joinAndLeave = (cycle: number) =>
        Effect.gen(function*() {
          yield* produce(60)
          const child = ChildProcess.spawn(bun.command, [...bun.args], {
            cwd: root,
            stdio: "ignore",
            env: {
              ...process.env,
              KAFKA_BROKERS: brokers.join(","),
              SKEIN_APPLICATION_ID: id,
              CHAOS_INPUT_TOPIC: names.input,
              CHAOS_OUTPUT_TOPIC: names.output,
              SKEIN_STATE_DIR: childStateDir,
              SKEIN_MAX_POLL_RECORDS: "50",
              SKEIN_SESSION_TIMEOUT: "6 seconds",
              SKEIN_HEARTBEAT_INTERVAL: "500 millis"
            }
          })
          const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()))
          yield* waitUntil(`cycle ${cycle}: the second instance took tasks`, () =>
            stats.assigned.size > 0 && stats.assigned.size < PARTITIONS, watched)
          yield* produce(60)
          child.kill("SIGTERM")
          yield* Effect.promise(() => exited)
          yield* waitUntil(`cycle ${cycle}: the runner owns all tasks again`, ownsAll, watched)
        })

      yield* joinAndLeave(0)
      yield* settle
      const baseline = yield* sample(stateDir, supervisor)
      yield* Effect.log(`baseline ${JSON.stringify(baseline)}`)
      assert.strictEqual(baseline.storeFolders, PARTITIONS)
      assert.isAbove(baseline.levelDbFiles, 0)
      // The run's fiber, its main loop (idle, it waits on its one queue), the two fibers forwarding
      // the consumer's events and the task manager's wakeups to that queue, the watcher of the next
      // rebalance (its batches' grace) and the timer of the kept stores' sweep
      // (`stateCleanupDelay`): nothing else lives between batches.
      assert.strictEqual(baseline.fibers, 6)

      let rebalances = 0
      const started = Date.now()
      for (let cycle = 1; cycle <= CYCLES; cycle++) {
        yield* joinAndLeave(cycle)
        rebalances += 2
        if (cycle % 5 === 0) {
          yield* Effect.log(
            `cycle ${cycle}: ${rebalances} rebalances in ${Math.round((Date.now() - started) / 1000)} s, ` +
              `now ${JSON.stringify(yield* sample(stateDir, supervisor))}`
          )
        }
      }
      yield* settle
      const after = yield* sample(stateDir, supervisor)
      yield* Effect.log(`after ${rebalances} rebalances: ${JSON.stringify(after)} (runner stats ${JSON.stringify({ ...stats, assigned: [...stats.assigned] })})`)
      assert.isAtLeast(rebalances, CYCLES * 2)
      assert.isAtLeast(stats.rebalances, CYCLES * 2)
      assert.isAtLeast(stats.tasksStarted, PARTITIONS + (CYCLES + 1) * PARTITIONS)
      assert.deepStrictEqual(after, baseline)

      // Stopped, the runner leaves nothing open behind.
      const exit = yield* Fiber.interrupt(runner)
      assert.isTrue(Exit.isInterrupted(exit) || Exit.isSuccess(exit))
      yield* Effect.sleep(Duration.millis(500))
      const left = openFiles()
      const stopped = yield* sample(stateDir, supervisor)
      yield* Effect.log(`stopped: ${JSON.stringify(stopped)}`)
      assert.strictEqual(stopped.levelDbFiles, 0)
      // Closed and kept for the next start: one folder per partition, none more.
      assert.strictEqual(stopped.storeFolders, PARTITIONS)
      assert.strictEqual(stopped.fibers, 0)
      assert.strictEqual(
        left.filter((f) => f.startsWith("socket:")).length,
        before.filter((f) => f.startsWith("socket:")).length
      )
      assert.strictEqual(left.length, before.length)
      Fs.rmSync(stateDir, { recursive: true, force: true })
      Fs.rmSync(childStateDir, { recursive: true, force: true })
    }).pipe(Effect.scoped), 20 * 60_000)
})
