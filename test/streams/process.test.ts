/**
 * A process node with a store and a wall-clock timer on a broker (issue 31:
 * stores and timers in the DSL): each reading's id once (a dedup store), and
 * an alert when a device has sent nothing for a while (a timer per device,
 * its last reading in a store). The first instance is stopped mid-stream;
 * a second one, on an empty state directory, restores the stores and timers
 * from the changelog and finishes: every output read committed exactly once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { KeyValueStore, KStream, SkeinConfig, Timer, Topic, Topology } from "../../src/index.ts"
import { brokers, createTopics, eventually, produce, readCommitted, unique } from "../helpers/kafka.ts"

const Reading = Schema.Struct({ id: Schema.String, reading: Schema.Number })
const silence = 4_000

describe("KStream.process on a broker", () => {
  it.scopedLive("dedup and silence alerts: stores and timers restored on a new instance, each output once", () =>
    Effect.gen(function*() {
      const applicationId = unique("process-app")
      const input = unique("process-in")
      const output = unique("process-out")
      yield* createTopics([{ name: input, partitions: 2 }, { name: output, partitions: 2 }])
      const Readings = Topic.make({ name: input, key: Schema.String, value: Topic.json(Reading) })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const Seen = KeyValueStore.make({ name: "seen-ids", key: Schema.String, value: Schema.Boolean })
      const Last = KeyValueStore.make({ name: "last-reading", key: Schema.String, value: Schema.Number })
      const topology = Topology.make("watchdog", [
        KStream.from(Readings).pipe(
          KStream.process({
            name: "watchdog",
            stores: [Seen, Last],
            process: (record) =>
              Effect.gen(function*() {
                const device = record.key ?? ""
                if (Option.isSome(yield* Seen.get(record.value.id))) return {}
                yield* Seen.put(record.value.id, true)
                yield* Last.put(device, record.value.reading)
                const now = yield* Clock.currentTimeMillis
                return {
                  outputs: [{ key: device, value: `${record.value.id} reading ${record.value.reading}` }],
                  timers: [Timer.wallClock("silent", now + silence)]
                }
              }),
            onTimer: (timer) =>
              Effect.map(Last.get(timer.key), (last) => ({
                outputs: [{ key: timer.key, value: `silent, last ${Option.getOrElse(last, () => -1)}` }]
              }))
          }),
          KStream.to(Out)
        )
      ])
      const runInstance = (stateDir: string) =>
        Effect.forkScoped(
          Topology.run(topology).pipe(Effect.provide(SkeinConfig.layer({ applicationId, brokers: brokers(), stateDir })))
        )
      const stateDirOf = (name: string) => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), `skein-process-${name}-`))
        return Effect.as(Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))), dir)
      }
      const record = (device: number, id: string, reading: number) => ({
        key: `d${device}`,
        value: JSON.stringify({ id, reading })
      })
      const readingsOut = (records: ReadonlyArray<{ readonly value: string | null }>) =>
        records.filter((r) => r.value?.includes(" reading ") === true).length

      // First instance: 30 readings of 6 devices, 5 of them sent twice.
      const first = Array.from({ length: 30 }, (_, i) => record(i % 6, `a${i}`, i))
      yield* produce(input, [...first, ...first.slice(0, 5)])
      const one = yield* runInstance(yield* stateDirOf("one"))
      yield* eventually(Effect.map(readCommitted(output), (records) => readingsOut(records) >= 30), {
        timeout: 20_000,
        what: "the first instance's 30 readings"
      })
      yield* Fiber.interrupt(one)
      const alertsAtStop = (yield* readCommitted(output)).length - 30

      // Second instance, on an empty state directory: 10 readings sent again (seen before the stop:
      // no output, no timer moved) and 12 of new devices 6-8; devices 0-5's timers are the first's.
      yield* produce(input, [...first.slice(10, 20), ...Array.from({ length: 12 }, (_, i) => record(6 + (i % 3), `b${i}`, 100 + i))])
      yield* runInstance(yield* stateDirOf("two"))
      yield* eventually(Effect.map(readCommitted(output), (records) => records.length >= 42 + 9), {
        timeout: 20_000,
        what: "42 readings and 9 alerts"
      })
      const out = yield* readCommitted(output)
      const values = out.map((r) => `${r.key}: ${r.value}`).sort()
      const expected = [
        ...first.map((r) => `${r.key}: ${JSON.parse(r.value).id} reading ${JSON.parse(r.value).reading}`),
        ...Array.from({ length: 12 }, (_, i) => `d${6 + (i % 3)}: b${i} reading ${100 + i}`),
        "d0: silent, last 24",
        "d1: silent, last 25",
        "d2: silent, last 26",
        "d3: silent, last 27",
        "d4: silent, last 28",
        "d5: silent, last 29",
        "d6: silent, last 109",
        "d7: silent, last 110",
        "d8: silent, last 111"
      ].sort()
      assert.deepStrictEqual(values, expected, "each reading once, each device's alert once with its last reading")
      console.log(`alerts committed by the first instance before its stop: ${alertsAtStop} (the rest fired on the second)`)
    }), 60_000)
})
