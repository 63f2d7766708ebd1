/**
 * The "Timers" snippets of docs/streams.md, as written there (imports from the
 * sources instead of the package): they compile, and the test driver's runs.
 */
import { assert, it } from "@effect/vitest"
import { Clock, Effect, Option, Schema } from "effect"
import { Runner, SkeinConfig, Timer, Topic, Transformer } from "../../src/index.ts"
import { TestDriver } from "../../src/testing/index.ts"

const Readings = Topic.make({ name: "readings", key: Schema.String, value: Topic.json(Schema.Number) })
const Alerts = Topic.make({ name: "silent-devices", key: Schema.String, value: Schema.String })
const silence = 5 * 60_000

/** An alert when a device has sent no reading for 5 minutes of wall-clock time. */
export const Watchdog = Transformer.make({
  name: "watchdog",
  inputs: [Readings],
  state: Schema.Number, // the device's last reading
  transform: (record) =>
    Effect.map(Clock.currentTimeMillis, (now) => ({
      state: Transformer.set(record.value),
      timers: [Timer.wallClock("silent", now + silence)] // moves the device's timer on every reading
    })),
  onTimer: (timer, last) =>
    Effect.succeed({
      emit: [Topic.record(Alerts, timer.key, `silent for 5 minutes, last reading ${Option.getOrElse(last, () => 0)}`)]
    })
})

/** The snippet's program (not run here: it needs a broker). */
export const main = () => Runner.run(Watchdog).pipe(Effect.provide(SkeinConfig.layerConfig()), Runner.runMain)

it.scoped("an alert after 5 silent minutes", () =>
  Effect.gen(function*() {
    const driver = yield* TestDriver.make(Watchdog)
    yield* driver.pipe(Readings, "d1", 20.5)
    yield* driver.advanceWallClock("4 minutes")
    yield* driver.pipe(Readings, "d1", 21) // the timer moves to 4 + 5 minutes
    yield* driver.advanceWallClock("5 minutes")
    const alerts = yield* driver.outputs(Alerts)
    assert.deepStrictEqual(alerts.map((alert) => [alert.key, alert.value]), [["d1", "silent for 5 minutes, last reading 21"]])
  }))
