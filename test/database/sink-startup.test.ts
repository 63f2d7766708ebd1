/**
 * `DatabaseSink` startup errors: a database URL that points nowhere, at a
 * missing database or with a wrong password fails the run at once with a
 * `DatabaseError` that names the problem and the fix, and the password is in
 * no message. `PostgresServer` with a `DATABASE_URL` that does not answer says
 * so, naming the URL without its password.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Redacted, Schema } from "effect"
import * as Net from "node:net"
import { DatabaseSink, Runner, SkeinConfig, SkeinError, Topic } from "../../src/index.ts"
import { PostgresServer } from "../../src/testing/index.ts"
import { brokers, unique } from "../helpers/kafka.ts"
import { databaseUrl } from "./helpers.ts"

const password = "s3cret-Pa55word"

/** A port nothing listens on (bound and released). */
const closedPort = Effect.promise(() =>
  new Promise<number>((resolve) => {
    const server = Net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 1
      server.close(() => resolve(port))
    })
  }))

const In = Topic.make({ name: unique("db-startup-in"), key: Schema.String, value: Schema.String })
const sink = DatabaseSink.make({ name: "startup", inputs: [In], handler: () => Effect.void })

/** The run's error with the client of `url`, wired as the docs say. */
const runWith = (url: string) =>
  Runner.run(sink).pipe(
    Effect.provide(DatabaseSink.connect(PgClient.layer({ url: Redacted.make(url) }))),
    Effect.provide(SkeinConfig.layer({ brokers: brokers(), applicationId: unique("db-startup") })),
    Effect.flip
  )

const expectDatabaseError = (
  error: { readonly _tag: string; readonly message: string },
  reason: SkeinError.DatabaseError["reason"],
  ...texts: ReadonlyArray<string>
) => {
  if (!(error instanceof SkeinError.DatabaseError)) return assert.fail(`expected a DatabaseError, got ${error._tag}: ${error.message}`)
  assert.strictEqual(error.reason, reason, error.message)
  for (const text of texts) assert.include(error.message, text)
  assert.notInclude(error.message, password)
  assert.notInclude(JSON.stringify(error), password)
}

describe("DatabaseSink startup errors", () => {
  it.scopedLive("a port nothing listens on: Unavailable, naming the address and the fix", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const error = yield* runWith(`postgres://postgres:${password}@127.0.0.1:${port}/postgres`)
      expectDatabaseError(error, "Unavailable", "ECONNREFUSED", `127.0.0.1:${port}`, "check the host and port")
    }))

  it.scopedLive("a host that does not resolve: Unavailable, naming the host", () =>
    Effect.gen(function*() {
      const error = yield* runWith(`postgres://postgres:${password}@no-such-host.invalid:5432/postgres`)
      expectDatabaseError(error, "Unavailable", "no-such-host.invalid", "check the host name")
    }))

  it.scopedLive("a URL that does not parse: Refused, saying how it is written, the password in no message", () =>
    Effect.gen(function*() {
      const error = yield* runWith(`postgres://postgres:${password}@[bad/postgres`)
      expectDatabaseError(error, "Refused", "is not a URL", "percent-encoded")
    }))

  it.scopedLive("a database that does not exist: Refused, naming it and the fix", () =>
    Effect.gen(function*() {
      const url = new URL(databaseUrl())
      url.pathname = "/no_such_database"
      const error = yield* runWith(url.toString())
      expectDatabaseError(error, "Refused", "no_such_database", "CREATE DATABASE")
    }))

  it.scopedLive("a wrong password: Refused, with the fix, the password in no message", () =>
    Effect.gen(function*() {
      const server = yield* PostgresServer.make({ embedded: true, password: Redacted.make("the-right-one") })
      const url = new URL(Redacted.value(server.url))
      url.password = password
      const error = yield* runWith(url.toString())
      expectDatabaseError(error, "Refused", "password authentication failed", "check the user and password")
    }))

  it.scopedLive("PostgresServer with a DATABASE_URL that does not answer: the URL without its password", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const error = yield* PostgresServer.make().pipe(
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["DATABASE_URL", `postgres://app:${password}@127.0.0.1:${port}/orders`]]))),
        Effect.flip
      )
      assert.strictEqual(error.reason, "Unavailable")
      assert.include(error.message, `postgres://app:***@127.0.0.1:${port}/orders`)
      assert.include(error.message, "DATABASE_URL")
      assert.notInclude(error.message, password)
      assert.notInclude(JSON.stringify(error), password)
    }))
})
