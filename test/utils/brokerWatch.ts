/**
 * Watches the test run's broker: a TCP connect to each bootstrap address
 * every second. When no address accepts a connection several times in a row,
 * the broker is gone (killed, crashed, or the cluster went away) and the run
 * should stop instead of letting every later test wait out its timeout.
 */
import * as Net from "node:net"
import { Duration, Effect, Schedule } from "effect"

/** Why the watch ended: the broker stopped answering. */
export interface Gone {
  readonly brokers: ReadonlyArray<string>
  /** The failed attempts, the last error of each. */
  readonly attempts: number
  readonly lastError: string
  /** When the first of the failed attempts in a row was made. */
  readonly since: Date
}

/** One TCP connect: succeeds if `address` accepts a connection within `timeout`. */
const accepts = (address: string, timeout: Duration.Duration): Effect.Effect<void, string> =>
  Effect.async<void, string>((resume) => {
    const separator = address.lastIndexOf(":")
    const socket = Net.connect({ host: address.slice(0, separator), port: Number(address.slice(separator + 1)) })
    socket.setTimeout(Duration.toMillis(timeout))
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.void)
    })
    socket.once("timeout", () => {
      socket.destroy()
      resume(Effect.fail(`${address}: no connection within ${Duration.format(timeout)}`))
    })
    socket.once("error", (cause) => {
      socket.destroy()
      resume(Effect.fail(`${address}: ${cause.message}`))
    })
    return Effect.sync(() => socket.destroy())
  })

/**
 * Runs until the broker is gone: `failures` attempts in a row, `interval`
 * apart, in which none of `brokers` accepted a connection.
 */
export const untilGone = (
  brokers: ReadonlyArray<string>,
  options: { readonly interval: Duration.DurationInput; readonly failures: number; readonly connectTimeout: Duration.DurationInput }
): Effect.Effect<Gone> =>
  Effect.gen(function*() {
    const connectTimeout = Duration.decode(options.connectTimeout)
    let failed = 0
    let since = new Date()
    let lastError = ""
    const attempt = Effect.gen(function*() {
      const started = new Date()
      const result = yield* Effect.either(Effect.firstSuccessOf(brokers.map((address) => accepts(address, connectTimeout))))
      if (result._tag === "Right") {
        failed = 0
        return false
      }
      if (failed === 0) since = started
      failed += 1
      lastError = result.left
      return failed >= options.failures
    })
    yield* attempt.pipe(Effect.repeat({ schedule: Schedule.spaced(options.interval), until: (gone) => gone }))
    return { brokers, attempts: failed, lastError, since }
  })
