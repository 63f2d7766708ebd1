/**
 * Test support: a transformer run in memory, without a broker
 * (`TestDriver`), a Kafka broker for tests (`KafkaBroker`), a local
 * multi-node cluster with fault injection (`LocalKafka`), and their error.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { KafkaBroker, KafkaBrokerError, LocalKafka, TestDriver } from "skein/testing"
 *
 * const driver = TestDriver.make(WordCount) // scoped; pipe records in, read outputs and state back
 *
 * const broker = KafkaBroker.layer() // KAFKA_BROKERS, else Docker, else a local broker
 * const cluster = LocalKafka.start({ nodes: 3 }) // scoped; kill and restart its nodes
 * const skipIfNone = (e: KafkaBrokerError.KafkaBrokerError) =>
 *   e.reason === "Unavailable" ? Effect.logWarning(e.detail) : Effect.fail(e)
 * ```
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as KafkaBroker from "./KafkaBroker.ts"

/** @since 0.1.0 */
export * as KafkaBrokerError from "./KafkaBrokerError.ts"

/** @since 0.1.0 */
export * as LocalKafka from "./LocalKafka.ts"

/** @since 0.2.0 */
export * as TestDriver from "./TestDriver.ts"

/** @since 0.6.0 */
export * as PostgresServer from "./PostgresServer.ts"

/** @since 0.6.0 */
export * as PostgresServerError from "./PostgresServerError.ts"
