/**
 * The process entry point behind `Runner.runMain`: `@effect/platform`'s
 * `runMain` (error reporting, pretty logger, teardown and exit codes) with a
 * signal policy that a repeated signal does not cut short.
 *
 * `@effect/platform-node`'s (and `-bun`'s) `runMain` removes its SIGINT and
 * SIGTERM listeners on the first signal, so the next one gets the runtime's
 * default action and kills the process mid-shutdown. Repeats are the rule,
 * not the exception: a process-group signal (Ctrl-C, systemd's
 * `KillMode=control-group`) reaches every process of `npm run` / `tsx`, and
 * each parent relays it again to its child (the `tsx` CLI's child also exits
 * 128 + signal on a signal it sees no listener for). Here the listeners stay
 * until the teardown is done:
 *
 * - the first signal interrupts the main fiber (the graceful stop);
 * - signals within `repeatWindowMillis` of the one counted before are the
 *   same request (relayed, or one Ctrl-C reaching several processes): logged,
 *   ignored, not counted;
 * - a second request is logged and ignored;
 * - a third forces an exit with code 128 + the signal's number, saying so.
 *
 * Only `process.on` / `process.exit` are used, which Node, Bun and Deno (node
 * compatibility) all have.
 */
import { makeRunMain } from "@effect/platform/Runtime"
import type { RunMain } from "@effect/platform/Runtime"
import { Effect } from "effect"
import { constVoid } from "effect/Function"

type StopSignal = "SIGINT" | "SIGTERM"

const signalNumbers: Record<StopSignal, number> = { SIGINT: 2, SIGTERM: 15 }

/** Signals closer together than this (ms) are one request to stop. */
export const repeatWindowMillis = 1000

/** The requests to stop (counted signals) at which the process exits without waiting. */
export const forceAt = 3

export const runMain: RunMain = makeRunMain(({ fiber, teardown }) => {
  // The main fiber alone may not keep the event loop alive (e.g. while it only awaits a Deferred).
  const keepAlive = setInterval(constVoid, 2 ** 31 - 1)
  let requests = 0
  /** When the last counted signal arrived (epoch ms); undefined before the first. */
  let lastRequestAt: number | undefined = undefined

  /**
   * Logs with the main fiber's loggers, log level and annotations (the pretty logger, an app's
   * own logger); a failing logger is ignored rather than thrown out of a signal handler.
   */
  const log = (effect: Effect.Effect<void>) => {
    Effect.runSync(Effect.exit(Effect.zipRight(Effect.setFiberRefs(fiber.getFiberRefs()), effect)))
  }

  const onSignal = (signal: StopSignal) => {
    const now = Date.now()
    if (lastRequestAt !== undefined && now - lastRequestAt < repeatWindowMillis) {
      log(Effect.logInfo(`${signal} received again within ${repeatWindowMillis} ms: the same request, already stopping gracefully`))
      return
    }
    requests++
    lastRequestAt = now
    if (requests === 1) {
      log(Effect.logInfo(
        `${signal} received: stopping gracefully (running handlers get shutdownGrace, finished work commits, ` +
          `the consumer leaves the group); signal ${forceAt} times to force an exit`
      ))
      fiber.unsafeInterruptAsFork(fiber.id())
    } else if (requests < forceAt) {
      log(Effect.logWarning(`${signal} received again: ignored, still stopping gracefully; one more forces an exit`))
    } else {
      const code = 128 + signalNumbers[signal]
      log(Effect.logError(
        `${signal} received ${requests} times: forcing an exit with code ${code} before the graceful stop finished ` +
          `(uncommitted work runs again on the next owner; the group keeps this member's partitions until its session times out)`
      ))
      process.exit(code)
    }
  }
  const onSigint = () => onSignal("SIGINT")
  const onSigterm = () => onSignal("SIGTERM")

  fiber.addObserver((exit) => {
    clearInterval(keepAlive)
    teardown(exit, (code) => {
      process.removeListener("SIGINT", onSigint)
      process.removeListener("SIGTERM", onSigterm)
      // As @effect/platform's runMain: after a signal, or on a failure, the process exits now;
      // a clean end without a signal lets the event loop drain.
      if (requests > 0 || code !== 0) process.exit(code)
    })
  })

  process.on("SIGINT", onSigint)
  process.on("SIGTERM", onSigterm)
})
