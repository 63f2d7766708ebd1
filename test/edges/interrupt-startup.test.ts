import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Schema } from "effect"
import * as Fs from "node:fs"
import { Runner, SkeinConfig, Topic, Transformer } from "../../src/index.ts"
import { brokers, createTopics, produce, sleep, unique } from "../helpers/kafka.ts"

/** Files this process holds open under `dir` (a store's LevelDB files while it is open). */
const openFilesUnder = (dir: string): number =>
  Fs.readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return Fs.readlinkSync(`/proc/self/fd/${fd}`).startsWith(dir)
    } catch {
      return false
    }
  }).length

/** Open sockets of this process. */
const sockets = (): number =>
  Fs.readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return Fs.readlinkSync(`/proc/self/fd/${fd}`).startsWith("socket:")
    } catch {
      return false
    }
  }).length

// Issue 11, defect 7: an interruption between a task's start and its
// registration leaked its producer, store and resumed partitions. Now a task's
// scope is registered before anything is acquired in it and the runner's
// teardown closes it wherever the start was. Interrupting runs at many points of
// their startup (joining, fencing, restoring, seeking) leaves nothing open.
describe("interrupting a starting runner", () => {
  it.scopedLive("leaks no producer, store or socket at any point of the startup", () =>
    Effect.gen(function*() {
      const input = unique("int-in")
      const output = unique("int-out")
      const applicationId = unique("int-app")
      const stateDir = Fs.mkdtempSync("/tmp/skein-int-")
      yield* createTopics([{ name: input, partitions: 4 }, { name: output, partitions: 1 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Topic.json(Schema.Number) })
      const count = Transformer.make({
        name: "int-count",
        inputs: [In],
        state: Schema.Number,
        transform: (record, state) => {
          const next = Option.getOrElse(state, () => 0) + 1
          return Effect.succeed({ emit: [Topic.record(Out, record.key, next)], state: Transformer.set(next) })
        }
      })
      const config = Layer.succeed(
        SkeinConfig.SkeinConfig,
        SkeinConfig.make({ applicationId, brokers: brokers(), stateDir })
      )
      // A changelog to restore, so interruptions also land inside restores.
      yield* produce(input, Array.from({ length: 4000 }, (_, i) => ({ key: `k${i}`, value: `v${i}`, partition: i % 4 })))
      const first = yield* Effect.forkDaemon(Effect.provide(Runner.run(count), config))
      yield* sleep(6_000)
      yield* Fiber.interrupt(first)
      yield* sleep(500)
      const baseline = sockets()
      for (const delay of [0, 50, 150, 300, 500, 800, 1200, 1700, 2300, 3000]) {
        const fiber = yield* Effect.forkDaemon(Effect.provide(Runner.run(count), config))
        yield* sleep(delay)
        yield* Fiber.interrupt(fiber)
        yield* sleep(300)
        // Closing takes a moment, longer on a loaded machine (CI once saw 2 sockets still open
        // 300 ms after an interruption 50 ms into the startup, with the whole suite running; a run
        // at a load of 60 one still open after 5 s): give them up to 30 s more to close. A leaked
        // socket never closes (the broker drops an idle connection only after 10 minutes).
        let open = sockets()
        for (let waited = 0; open > baseline && waited < 30_000; waited += 100) {
          yield* sleep(100)
          open = sockets()
        }
        // Stores are kept on disk (closed) for the next start; none may stay open.
        const stores = openFilesUnder(stateDir)
        assert.deepStrictEqual({ delay, open: open <= baseline, stores }, { delay, open: true, stores: 0 },
          `after an interruption ${delay} ms into the startup: ${open} sockets open (baseline ${baseline}), ${stores} store files open`)
      }
    }), { timeout: 420_000 })
})
