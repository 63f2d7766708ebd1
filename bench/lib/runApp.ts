/**
 * How a benchmark app runs its program: until it ends, or until SIGTERM or
 * SIGINT interrupts it (the harness stops a contender with SIGTERM); exit
 * code 0 for either, 1 with the cause printed for a failure.
 */
import { Cause, Effect, Exit, Fiber } from "effect"

export const runUntilSignalled = <A, E>(program: Effect.Effect<A, E>): void => {
  const fiber = Effect.runFork(program)
  const stop = (): void => {
    Effect.runFork(Fiber.interrupt(fiber))
  }
  process.on("SIGTERM", stop)
  process.on("SIGINT", stop)
  fiber.addObserver((exit) => {
    if (Exit.isSuccess(exit) || Exit.isInterrupted(exit)) process.exit(0)
    console.error(Cause.pretty(exit.cause))
    process.exit(1)
  })
}
