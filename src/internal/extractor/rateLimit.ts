/**
 * A per-token rate limit: at most `pages` reads in any window of `per`
 * (a sliding window over the start times of the last reads). Uses the
 * `Clock`, so `TestClock` drives it in tests.
 *
 * @internal
 */
import { Clock, Duration, Effect, Option } from "effect"

export interface RateLimiter {
  /** Waits until one more read fits in the window, then takes its slot. */
  readonly take: Effect.Effect<void>
}

const unlimited: RateLimiter = { take: Effect.void }

export const make = (
  limit: Option.Option<{ readonly pages: number; readonly per: Duration.Duration }>
): Effect.Effect<RateLimiter> =>
  Option.match(limit, {
    onNone: () => Effect.succeed(unlimited),
    onSome: ({ pages, per }) =>
      Effect.sync((): RateLimiter => {
        const window = Duration.toMillis(per)
        const starts: Array<number> = []
        const take: Effect.Effect<void> = Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          while (starts.length > 0 && (starts[0] ?? now) <= now - window) starts.shift()
          const oldest = starts[0]
          if (starts.length >= Math.max(1, pages) && oldest !== undefined) {
            yield* Effect.sleep(Duration.millis(oldest + window - now))
            return yield* take
          }
          starts.push(now)
        })
        return { take }
      })
  })
