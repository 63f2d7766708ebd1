/**
 * How a benchmark app runs its program: until it ends, or until SIGTERM or
 * SIGINT interrupts it (the harness stops a contender with SIGTERM); exit
 * code 0 for either, 1 with the cause printed for a failure.
 */
import { Cause, Effect, Exit, Fiber } from "effect"

/**
 * The exit code of a program that ended with `exit`: 0 when it ended or was only interrupted, 1 when
 * it failed, also when interrupted fibers came with the failure (`Exit.isInterrupted` is true then).
 */
export const exitOf = (exit: Exit.Exit<unknown, unknown>): 0 | 1 =>
  Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause) ? 0 : 1

export const runUntilSignalled = <A, E>(program: Effect.Effect<A, E>): void => {
  const fiber = Effect.runFork(program)
  const stop = (): void => {
    Effect.runFork(Fiber.interrupt(fiber))
  }
  process.on("SIGTERM", stop)
  process.on("SIGINT", stop)
  fiber.addObserver((exit) => {
    if (Exit.isSuccess(exit) || exitOf(exit) === 0) process.exit(0)
    console.error(Cause.pretty(exit.cause))
    process.exit(1)
  })
}
