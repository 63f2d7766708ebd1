/**
 * Test support: a Kafka broker for tests (`KafkaBroker`), a local
 * multi-node cluster with fault injection (`LocalKafka`), and their error.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as KafkaBroker from "./KafkaBroker.ts"

/** @since 0.1.0 */
export * as KafkaBrokerError from "./KafkaBrokerError.ts"

/** @since 0.1.0 */
export * as LocalKafka from "./LocalKafka.ts"
