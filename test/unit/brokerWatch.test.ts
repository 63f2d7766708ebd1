/**
 * The run's broker watch (test/utils/brokerWatch.ts, used by test/globalSetup.ts
 * to cancel a run whose broker went away), against a local TCP server playing
 * the broker: no verdict while it accepts connections, "gone" after the
 * configured number of refused attempts in a row once it closes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option } from "effect"
import * as Net from "node:net"
import * as BrokerWatch from "../utils/brokerWatch.ts"

describe("broker watch", () => {
  it.live("waits while the broker accepts connections, reports it gone after 3 refused attempts in a row", () =>
    Effect.gen(function*() {
      let connections = 0
      const fiveSeen = yield* Deferred.make<void>()
      const server = Net.createServer((socket) => {
        connections += 1
        socket.destroy()
        if (connections === 5) Deferred.unsafeDone(fiveSeen, Effect.void)
      })
      yield* Effect.async<void>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.void))
      })
      const address = server.address()
      assert.isTrue(address !== null && typeof address === "object")
      const port = address !== null && typeof address === "object" ? address.port : 0
      const target = `127.0.0.1:${port}`

      const watch = yield* Effect.fork(
        BrokerWatch.untilGone([target], { interval: "50 millis", failures: 3, connectTimeout: "2 seconds" })
      )
      // Five probes accepted, or the watch ended first (a false alarm, caught just below).
      yield* Effect.race(Deferred.await(fiveSeen), Effect.asVoid(Fiber.await(watch))).pipe(
        Effect.timeoutFail({ duration: "60 seconds", onTimeout: () => "no 5 probes within 60 s" })
      )
      assert.isTrue(Option.isNone(yield* Fiber.poll(watch)), "the watch ended while the broker accepted connections")

      yield* Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
      })
      const gone = yield* Fiber.join(watch).pipe(
        Effect.timeoutFail({ duration: "60 seconds", onTimeout: () => "the watch never saw the broker go" })
      )
      console.log(`gone after ${connections} accepted probes: ${JSON.stringify(gone)}`)
      assert.deepStrictEqual(gone.brokers, [target])
      assert.strictEqual(gone.attempts, 3)
      assert.include(gone.lastError, "ECONNREFUSED")
    }))
})
