/**
 * A standby promoted after a SIGKILL (standby.test.ts covers graceful
 * stops): the per-key aggregate (test/apps/aggregate.ts) runs as a child
 * process next to an instance in this process, both with
 * `standbyReplicas: 1`. Once this instance's standby of the child's partition
 * is warm, input keeps flowing and the child is SIGKILLed right after it
 * committed some of it, its last transaction possibly open. When its session
 * expires this instance takes the partition: its task must restore only the
 * tail past its standby copy (not the changelog from its start), and every
 * key's outputs, read back read_committed, must be exactly the reference
 * aggregate after each of its input records, once each, in order: no output
 * lost or doubled, no state value off.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { aggregate } from "../apps/model.ts"
import type { Aggregate, InputValue } from "../apps/model.ts"
import { aggregator } from "../apps/transformers.ts"
import { Health, Transformer } from "../../src/index.ts"
import {
  brokers,
  caughtUp,
  createTopics,
  eventually,
  groupOffsets,
  offsets,
  produceRaw,
  readCommitted,
  sleep,
  startInstance,
  unique
} from "../helpers/kafka.ts"

const app = path.join(import.meta.dirname, "..", "apps", "aggregate.ts")

const PARTITIONS = 2
const KEYS = 100
/** Rounds (one record per key each) before the kill, all processed with the standby warm. */
const WARM_ROUNDS = 10
/** Rounds produced after the kill, on top of those in flight at it. */
const ROUNDS_AFTER_KILL = 3

const key = (k: number) => `k-${String(k).padStart(3, "0")}`

/** The child process: its output, the partitions of its last status line, and how it ended. */
const spawnApp = (env: Readonly<Record<string, string>>) =>
  Effect.gen(function*() {
    const child = spawn(process.execPath, ["--import", "tsx", app], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    let assigned: ReadonlyArray<number> = []
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8")
      for (const line of chunk.toString("utf8").split("\n")) {
        if (!line.startsWith("{\"event\":\"stats\"")) continue
        const stats: { readonly assigned: ReadonlyArray<number> } = JSON.parse(line)
        assigned = stats.assigned
      }
    })
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
    const exited = new Promise<string>((resolve) => child.on("exit", (code, signal) => resolve(signal ?? `exit ${code}`)))
    yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGKILL")))
    return {
      kill: Effect.sync(() => child.kill("SIGKILL")),
      exited: Effect.promise(() => exited),
      assigned: () => assigned,
      output: () => output
    }
  })

const tempDir = (prefix: string) =>
  Effect.gen(function*() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
    yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
    return dir
  })

describe("standby replicas under SIGKILL", () => {
  it.scopedLive("the active instance SIGKILLed mid-stream: the warm standby takes over with only its tail to restore, and every aggregate is exact", () =>
    Effect.gen(function*() {
      const input = unique("sbk-in")
      const output = unique("sbk-out")
      const applicationId = unique("sbk-app")
      yield* createTopics([{ name: input, partitions: PARTITIONS }, { name: output, partitions: PARTITIONS }])
      const transformer = aggregator({ input, output })
      const changelog = Transformer.changelogTopic(applicationId, transformer)

      let id = 0
      const produceRound = (round: number) =>
        produceRaw(
          input,
          Array.from({ length: KEYS }, (_, k) => {
            id++
            return { key: key(k), value: JSON.stringify({ id, seq: round + 1, v: (id * 37) % 101 }), partition: k % PARTITIONS }
          })
        )

      const child = yield* spawnApp({
        SKEIN_APPLICATION_ID: applicationId,
        KAFKA_BROKERS: brokers().join(","),
        CHAOS_INPUT_TOPIC: input,
        CHAOS_OUTPUT_TOPIC: output,
        SKEIN_STATE_DIR: yield* tempDir("skein-sbk-child-"),
        SKEIN_STANDBY_REPLICAS: "1",
        SKEIN_MAX_POLL_RECORDS: "50",
        // A SIGKILLed member leaves the group when its session expires: the broker's minimum.
        SKEIN_SESSION_TIMEOUT: "6 seconds",
        SKEIN_HEARTBEAT_INTERVAL: "1 second"
      })
      const childOutputOnFailure = Effect.tapError(() => Effect.logError(`the child's output:\n${child.output().slice(-3000)}`))
      const survivor = yield* startInstance(transformer, {
        applicationId,
        standbyReplicas: 1,
        maxPollRecords: 50,
        stateDir: yield* tempDir("skein-sbk-survivor-")
      })
      yield* eventually(
        Effect.sync(() =>
          survivor.stats.assigned.size === 1 && survivor.stats.pending.size === 0 && child.assigned().length === 1 &&
          !survivor.stats.assigned.has(child.assigned()[0] ?? -1)
        ),
        { what: "the child and this instance to run one task each", timeout: 90_000 }
      ).pipe(childOutputOnFailure)
      const victim = child.assigned()[0] ?? -1

      for (let round = 0; round < WARM_ROUNDS; round++) yield* produceRound(round)
      yield* caughtUp(applicationId, input, 90_000)
      // The standby of the child's partition reflects the changelog up to its end.
      yield* eventually(
        Effect.zipWith(Health.snapshot(survivor.stats), offsets(changelog), (snapshot, ends) => {
          const standby = snapshot.standbys.find((s) => s.partition === victim)
          const end = ends.find((e) => e.partition === victim)?.lastStable
          return standby !== undefined && standby.lag === 0 && standby.position === end
        }),
        { what: `this instance's standby of partition ${victim} to reach its changelog's end`, timeout: 90_000 }
      )
      const warmPosition = (yield* Health.snapshot(survivor.stats)).standbys.find((s) => s.partition === victim)?.position ?? 0
      const warmInputEnd = (yield* offsets(input)).find((o) => o.partition === victim)?.lastStable ?? 0

      // Input keeps flowing, before the kill and after it.
      let killed = false
      const producer = yield* Effect.fork(Effect.gen(function*() {
        let after = 0
        for (let round = WARM_ROUNDS; after < ROUNDS_AFTER_KILL; round++) {
          if (killed) after++
          yield* produceRound(round)
          yield* sleep(100)
        }
      }))
      // Killed right after it committed some of the new input.
      yield* eventually(
        Effect.map(groupOffsets(applicationId, input), (committed) => (committed.get(victim) ?? 0) > warmInputEnd),
        { what: "the child to commit records past the warm rounds", timeout: 60_000 }
      ).pipe(childOutputOnFailure)
      yield* child.kill
      killed = true
      const ending = yield* child.exited
      const committedAtKill = (yield* groupOffsets(applicationId, input)).get(victim) ?? 0
      assert.strictEqual(ending, "SIGKILL", child.output().slice(-3000))

      yield* eventually(
        Effect.sync(() =>
          survivor.stats.assigned.size === PARTITIONS && survivor.stats.pending.size === 0 &&
          survivor.stats.restores.has(victim)
        ),
        { what: "this instance to run both tasks", timeout: 90_000 }
      )
      yield* Fiber.join(producer)
      yield* caughtUp(applicationId, input, 90_000)
      const restore = survivor.stats.restores.get(victim)
      yield* survivor.stop

      if (restore === undefined) return assert.fail(`partition ${victim} has a restore`)
      // What a restore from scratch would have read: the partition's committed changelog records before `until`.
      const changelogRecords = (yield* readCommitted(changelog)).filter((r) => r.partition === victim && r.offset < restore.until)
      const fromScratch = changelogRecords.length
      const pastCopy = changelogRecords.filter((r) => r.offset >= restore.from).length
      yield* Effect.log(
        `partition ${victim}: the child had committed input up to ${committedAtKill} when killed (the warm rounds ` +
          `ended at ${warmInputEnd}); the standby was at changelog offset ${warmPosition} when warm; the promoted ` +
          `task restored ${restore.records} records (${restore.mode}: ${restore.reason}) from ${restore.from} to ` +
          `${restore.until}; from scratch it would have read ${fromScratch}`
      )
      assert.strictEqual(restore.mode, "tail", `restored from the standby copy: ${JSON.stringify(restore)}`)
      assert.isAbove(warmPosition, 0, "the standby copy held the warm rounds")
      assert.isAtLeast(restore.from, warmPosition, "from the standby copy's position, at least where it was warm")
      assert.isAtMost(restore.records, pastCopy, "only the committed records past the copy's position")
      assert.isBelow(restore.records, fromScratch, "fewer than a restore from scratch reads")
      assert.strictEqual(survivor.stats.standbyFailures, 0)

      // Each key's outputs: the reference aggregate after each of its input records, once each, in order.
      const reference = new Map<string, Array<Aggregate>>()
      for (const r of [...yield* readCommitted(input)].sort((a, b) => a.offset - b.offset)) {
        const states = reference.get(r.key ?? "") ?? []
        const value: InputValue = JSON.parse(r.value ?? "null")
        states.push(aggregate(states.at(-1), value))
        reference.set(r.key ?? "", states)
      }
      const seen = new Map<string, Array<Aggregate>>()
      for (const r of [...yield* readCommitted(output)].sort((a, b) => a.partition - b.partition || a.offset - b.offset)) {
        seen.set(r.key ?? "", [...(seen.get(r.key ?? "") ?? []), JSON.parse(r.value ?? "null")])
      }
      assert.strictEqual(reference.size, KEYS)
      assert.deepStrictEqual([...seen.keys()].sort(), [...reference.keys()].sort())
      for (const [k, states] of reference) {
        assert.deepStrictEqual(seen.get(k), states, `${k}: its aggregates, each once, in order`)
      }
    }), { timeout: 240_000 })
})
