/**
 * Skein: exactly-once Kafka stream processing for TypeScript, built on Effect.
 *
 * @since 0.1.0
 */
export {}
