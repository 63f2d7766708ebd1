/**
 * What keeps a local broker from running on this host, and the live clock
 * its processes are timed with.
 *
 * @internal
 */
import { Clock, Effect, Option } from "effect"
import * as Distribution from "./distribution.ts"
import { findJava, findMaven, type HostEnvironment } from "./environment.ts"

/** The missing tools, as phrases for an error message ([] when none is missing). */
export const localProblems = (env: HostEnvironment, version: Distribution.KafkaVersion): ReadonlyArray<string> => [
  ...(Option.isNone(findJava(env)) ? ["a Java 17+ runtime (java is not on PATH nor in JAVA_HOME)"] : []),
  ...(Option.isNone(findMaven(env)) && !Distribution.isCached(env.cacheDir, version)
    ? [`Maven (mvn is not on PATH; it fetches the Kafka ${version} jars once into ${env.cacheDir})`]
    : [])
]

/** What to do about missing tools. */
export const installHint =
  "Install Java 17+ and Maven (e.g. apt-get install openjdk-17-jre-headless maven), " +
  "start Docker, or set KAFKA_BROKERS=host:port to use a running cluster."

const clock = Clock.make()

/**
 * Runs `self` on the real clock, so that brokers start and stop in real
 * time even inside tests that run on a `TestClock` (`it.effect`).
 */
export const live = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => Effect.withClock(self, clock)
