/**
 * Helpers for the extractor tests: topics, a read_committed reader of whole
 * topics, and the extractor app run as a child process (SIGKILL, SIGSTOP).
 */
import { Deferred, Duration, Effect, Queue, Schedule } from "effect"
import type { Scope } from "effect"
import * as ChildProcess from "node:child_process"
import { randomUUID } from "node:crypto"
import * as Path from "node:path"
import * as Readline from "node:readline"
import { fileURLToPath } from "node:url"
import kafkajs from "kafkajs"
import type { Kafka } from "kafkajs"

const { Kafka: KafkaClass, logLevel } = kafkajs

export const kafka = (brokerList: ReadonlyArray<string>): Kafka =>
  new KafkaClass({ clientId: "extract-test", brokers: [...brokerList], logLevel: logLevel.NOTHING })

/** A name no other test run uses. */
export const unique = (prefix: string): string => `${prefix}-${randomUUID().slice(0, 8)}`

const promise = <A>(operation: string, f: () => Promise<A>) =>
  Effect.tryPromise({ try: f, catch: (cause) => new Error(`${operation}: ${String(cause)}`, { cause }) })

export const createTopic = (brokerList: ReadonlyArray<string>, topic: string, partitions: number) =>
  Effect.acquireUseRelease(
    promise("admin.connect", async () => {
      const admin = kafka(brokerList).admin()
      await admin.connect()
      return admin
    }),
    (admin) => promise("createTopics", () => admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: partitions }] })),
    (admin) => Effect.promise(() => admin.disconnect())
  )

export interface ConsumedRecord {
  readonly partition: number
  readonly offset: number
  readonly key: string | null
  readonly value: string | null
}

/**
 * Every committed record of `topic`, read_committed up to the last stable
 * offsets as they are now (call it once the writers are done or stopped).
 */
export const readCommitted = (brokerList: ReadonlyArray<string>, topic: string) =>
  Effect.scoped(Effect.gen(function*() {
    const client = kafka(brokerList)
    const admin = yield* Effect.acquireRelease(
      promise("admin.connect", async () => {
        const admin = client.admin()
        await admin.connect()
        return admin
      }),
      (admin) => Effect.promise(() => admin.disconnect())
    )
    const ends = new Map<number, number>()
    for (const entry of yield* promise("fetchTopicOffsets", () => admin.fetchTopicOffsets(topic))) {
      if (Number(entry.high) > Number(entry.low)) ends.set(entry.partition, Number(entry.high))
    }
    const records: Array<ConsumedRecord> = []
    if (ends.size === 0) return records
    const positions = new Map<number, number>()
    const done = yield* Deferred.make<void>()
    const check = () => {
      if ([...ends].every(([partition, end]) => (positions.get(partition) ?? 0) >= end)) {
        Deferred.unsafeDone(done, Effect.void)
      }
    }
    const consumer = client.consumer({ groupId: unique("extract-test-reader"), readUncommitted: false, maxWaitTimeInMs: 100 })
    consumer.on(consumer.events.END_BATCH_PROCESS, (event) => {
      positions.set(event.payload.partition, Number(event.payload.lastOffset) + 1)
      check()
    })
    yield* Effect.acquireRelease(
      promise("consumer.run", async () => {
        await consumer.connect()
        await consumer.subscribe({ topics: [topic], fromBeginning: true })
        await consumer.run({
          eachBatch: async ({ batch }) => {
            for (const message of batch.messages) {
              const offset = Number(message.offset)
              if (offset < (ends.get(batch.partition) ?? 0)) {
                records.push({
                  partition: batch.partition,
                  offset,
                  key: message.key?.toString("utf8") ?? null,
                  value: message.value?.toString("utf8") ?? null
                })
              }
            }
          }
        })
      }),
      () => Effect.promise(() => consumer.disconnect())
    )
    yield* Deferred.await(done).pipe(Effect.timeoutFail({
      duration: Duration.seconds(60),
      onTimeout: () => new Error(`reading ${topic} up to its last stable offsets timed out`)
    }))
    return records.sort((a, b) => a.partition - b.partition || a.offset - b.offset)
  }))

/** Writes raw records (non-transactionally) to explicit partitions. */
export const produce = (
  brokerList: ReadonlyArray<string>,
  topic: string,
  messages: ReadonlyArray<{ readonly partition: number; readonly key: string | null; readonly value: string | null }>
) =>
  Effect.acquireUseRelease(
    promise("producer.connect", async () => {
      const producer = kafka(brokerList).producer()
      await producer.connect()
      return producer
    }),
    (producer) => promise("send", () => producer.send({ topic, messages: messages.map((m) => ({ ...m })) })),
    (producer) => Effect.promise(() => producer.disconnect())
  )

/** Polls `check` until it holds or the timeout passes. */
export const eventually = <E, R>(
  check: Effect.Effect<boolean, E, R>,
  options: { readonly timeout?: Duration.DurationInput; readonly what: string }
) =>
  check.pipe(
    Effect.filterOrFail((ok) => ok, () => new Error(`still waiting for: ${options.what}`)),
    Effect.retry(Schedule.spaced(Duration.millis(100))),
    Effect.timeoutFail({
      duration: options.timeout ?? Duration.seconds(60),
      onTimeout: () => new Error(`timed out waiting for: ${options.what}`)
    }),
    Effect.asVoid
  )

// ---------------------------------------------------------------------------------------------
// The extractor app as a child process

/** What `extract.ts` is told to run, passed as JSON in `EXTRACT_APP`. */
export interface AppConfig {
  readonly brokers: ReadonlyArray<string>
  readonly applicationId: string
  readonly name: string
  readonly tokens: ReadonlyArray<string>
  readonly source: string
  readonly output: string
  readonly pageSize: number
  readonly delayBeforeCommitMs: number
  readonly sessionTimeoutMs: number
  /** Load, print `Ready`, and wait for `App.start` before joining the group. */
  readonly waitForStart: boolean
}

/** A status line `extract.ts` prints every 100 ms, and its last words. */
export type AppEvent =
  | {
    readonly _tag: "Status"
    readonly owned: ReadonlyArray<string>
    readonly pagesCommitted: number
    readonly migrations: number
    readonly tokensStarted: number
  }
  | { readonly _tag: "Ready" }
  /** A page arrived: the app sleeps `delayBeforeCommitMs` before committing it. */
  | { readonly _tag: "Fetched"; readonly token: string; readonly after: number }
  | { readonly _tag: "Failed"; readonly error: string; readonly message: string }

export interface App {
  readonly pid: number
  readonly events: Queue.Dequeue<AppEvent>
  /** The last status printed. */
  readonly status: () => Extract<AppEvent, { _tag: "Status" }> | undefined
  /** Waits until the app is loaded (`waitForStart`), then lets it start. */
  readonly start: Effect.Effect<void>
  readonly kill: (signal: NodeJS.Signals) => Effect.Effect<void>
  /** Resolves when the process has exited. */
  readonly exited: Effect.Effect<number | null>
}

const appPath = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "extract.ts")
const root = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "..", "..")

/** Starts `extract.ts` (under `node --import tsx`); the scope SIGKILLs it if it still runs. */
export const spawnApp = (config: AppConfig): Effect.Effect<App, never, Scope.Scope> =>
  Effect.gen(function*() {
    const events = yield* Queue.unbounded<AppEvent>()
    const exit = yield* Deferred.make<number | null>()
    const ready = yield* Deferred.make<void>()
    let last: Extract<AppEvent, { _tag: "Status" }> | undefined
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        // `node --import tsx`, not the tsx CLI: the CLI runs the app in a child process of its own,
        // which a SIGKILL or SIGSTOP of the CLI would not reach.
        ChildProcess.spawn(process.execPath, ["--import", "tsx", appPath], {
          cwd: root,
          env: { ...process.env, EXTRACT_APP: JSON.stringify(config) },
          stdio: ["pipe", "pipe", process.env["EXTRACT_APP_LOG"] === "1" ? "inherit" : "ignore"]
        })
      ),
      (child) =>
        Effect.gen(function*() {
          if (child.exitCode === null && child.signalCode === null) {
            child.kill("SIGKILL")
            yield* Deferred.await(exit)
          }
        })
    )
    child.on("exit", (code) => Deferred.unsafeDone(exit, Effect.succeed(code)))
    Readline.createInterface({ input: child.stdout }).on("line", (line) => {
      if (!line.startsWith("{")) {
        if (process.env["EXTRACT_APP_LOG"] === "1") process.stderr.write(`[extract ${child.pid}] ${line}\n`)
        return
      }
      try {
        const event = JSON.parse(line) as AppEvent
        if (event._tag === "Status") last = event
        if (event._tag === "Ready") Deferred.unsafeDone(ready, Effect.void)
        Queue.unsafeOffer(events, event)
      } catch {
        // not a status line
      }
    })
    return {
      pid: child.pid ?? -1,
      events,
      status: () => last,
      start: Deferred.await(ready).pipe(Effect.zipRight(Effect.sync(() => child.stdin.write("go\n")))),
      kill: (signal) => Effect.sync(() => child.kill(signal)),
      exited: Deferred.await(exit)
    }
  })
