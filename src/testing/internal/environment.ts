/**
 * What this host offers for running a Kafka broker: read through `Config`, so
 * tests can inject a different environment with a `ConfigProvider`.
 *
 * @internal
 */
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import { Config, Effect, Option } from "effect"
import { KafkaBrokerError } from "../KafkaBrokerError.ts"
import * as Proc from "./process.ts"

/** How to pick a broker: `auto` tries external, then Docker, then local. */
export type Provider = "auto" | "external" | "docker" | "local"

export interface HostEnvironment {
  /** `KAFKA_BROKERS`: an existing cluster, comma-separated `host:port`. */
  readonly kafkaBrokers: Option.Option<ReadonlyArray<string>>
  /** `SKEIN_KAFKA_PROVIDER`: force one way of getting a broker. */
  readonly provider: Provider
  /** `SKEIN_KAFKA_VERSION`: the Kafka version a started broker runs, as written (`3.9.x`, `4.4.0`, ...). */
  readonly kafkaVersion: Option.Option<string>
  /** `PATH`, split. */
  readonly path: ReadonlyArray<string>
  readonly javaHome: Option.Option<string>
  /** `SKEIN_CACHE_DIR`, else `$XDG_CACHE_HOME/skein`, else `~/.cache/skein`. */
  readonly cacheDir: string
  readonly dockerHost: Option.Option<string>
  readonly home: string
}

const optionalString = (name: string, description: string) =>
  Config.option(Config.string(name)).pipe(
    Config.map(Option.filter((value) => value.trim() !== "")),
    Config.withDescription(description)
  )

/** The host environment, read from the current `ConfigProvider`. */
export const hostEnvironment: Config.Config<HostEnvironment> = Config.all({
  kafkaBrokers: optionalString("KAFKA_BROKERS", "An existing Kafka cluster to use, host:port[,host:port...]"),
  provider: Config.literal("auto", "external", "docker", "local")("SKEIN_KAFKA_PROVIDER").pipe(
    Config.withDefault("auto" as const),
    Config.withDescription("How to get a test broker: auto, external, docker or local")
  ),
  kafkaVersion: optionalString("SKEIN_KAFKA_VERSION", "The Kafka version of a test broker Skein starts: 4.4 (default) or 3.9"),
  path: Config.string("PATH").pipe(Config.withDefault(""), Config.withDescription("Where to find java, mvn and docker")),
  javaHome: optionalString("JAVA_HOME", "A JDK or JRE to run the local broker with"),
  skeinCacheDir: optionalString("SKEIN_CACHE_DIR", "Where Kafka jars and CLI broker state are kept"),
  xdgCacheHome: optionalString("XDG_CACHE_HOME", "The user's cache directory"),
  home: optionalString("HOME", "The user's home directory"),
  dockerHost: optionalString("DOCKER_HOST", "The Docker daemon to use")
}).pipe(
  Config.map((raw) => {
    const home = Option.getOrElse(raw.home, () => Os.homedir())
    const cacheDir = Option.getOrElse(
      raw.skeinCacheDir,
      () => Path.join(Option.getOrElse(raw.xdgCacheHome, () => Path.join(home, ".cache")), "skein")
    )
    return {
      kafkaBrokers: Option.map(raw.kafkaBrokers, parseBrokerList),
      provider: raw.provider,
      kafkaVersion: raw.kafkaVersion,
      path: raw.path.split(Path.delimiter).filter((entry) => entry !== ""),
      javaHome: raw.javaHome,
      cacheDir: Path.resolve(cacheDir),
      dockerHost: raw.dockerHost,
      home
    }
  })
)

/** Reads the host environment, turning a bad value into a typed error. */
export const readHostEnvironment: Effect.Effect<HostEnvironment, KafkaBrokerError> = Effect.mapError(
  hostEnvironment,
  (cause) => new KafkaBrokerError({ reason: "InvalidArgument", detail: String(cause), cause })
)

/** Splits `host:port,host:port` into addresses. */
export const parseBrokerList = (value: string): ReadonlyArray<string> =>
  value.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "")

const isExecutable = (file: string): boolean => {
  try {
    Fs.accessSync(file, Fs.constants.X_OK)
    return Fs.statSync(file).isFile()
  } catch {
    return false
  }
}

/** Finds an executable on the given PATH entries. */
export const which = (path: ReadonlyArray<string>, name: string): Option.Option<string> => {
  const names = process.platform === "win32" ? [`${name}.exe`, `${name}.cmd`, name] : [name]
  for (const dir of path) {
    for (const candidate of names) {
      const file = Path.join(dir, candidate)
      if (isExecutable(file)) return Option.some(file)
    }
  }
  return Option.none()
}

/** The java executable: `$JAVA_HOME/bin/java`, else `java` on PATH. */
export const findJava = (env: HostEnvironment): Option.Option<string> =>
  Option.orElse(
    Option.flatMap(env.javaHome, (home) => which([Path.join(home, "bin")], "java")),
    () => which(env.path, "java")
  )

/** The Maven executable on PATH. */
export const findMaven = (env: HostEnvironment): Option.Option<string> => which(env.path, "mvn")

const pingSocket = (socketPath: string): Effect.Effect<boolean> =>
  Effect.async<boolean>((resume) => {
    if (!Fs.existsSync(socketPath)) {
      resume(Effect.succeed(false))
      return
    }
    const request = Http.get({ socketPath, path: "/_ping", timeout: 2_000 }, (response) => {
      response.resume()
      resume(Effect.succeed(response.statusCode === 200))
    })
    request.on("timeout", () => request.destroy(new Error("timeout")))
    request.on("error", () => resume(Effect.succeed(false)))
    return Effect.sync(() => request.destroy())
  })

/**
 * Whether a Docker daemon answers (not just whether a client is installed):
 * pings its unix socket, else asks the `docker` CLI for the server version.
 */
export const dockerAvailable = (env: HostEnvironment): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    const sockets = Option.match(env.dockerHost, {
      onNone: () => [
        "/var/run/docker.sock",
        Path.join(env.home, ".docker", "run", "docker.sock"),
        Path.join(env.home, ".docker", "desktop", "docker.sock")
      ],
      onSome: (host) => (host.startsWith("unix://") ? [host.slice("unix://".length)] : [])
    })
    for (const socket of sockets) {
      if (yield* pingSocket(socket)) return true
    }
    // Docker contexts, TCP or TLS hosts: let the CLI resolve them, if there is one.
    const docker = which(env.path, "docker")
    if (Option.isNone(docker)) return false
    const result = yield* Proc.run({
      command: docker.value,
      args: ["version", "--format", "{{.Server.Version}}"],
      env: Option.match(env.dockerHost, {
        onNone: () => ({}),
        onSome: (host): Record<string, string> => ({ DOCKER_HOST: host })
      }),
      timeoutMs: 10_000
    }).pipe(Effect.option)
    return Option.exists(result, (r) => r.exitCode === 0 && r.output.trim() !== "")
  })
