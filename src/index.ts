/**
 * Skein: exactly-once Kafka stream processing for TypeScript, built on Effect.
 * Every module is a namespace of the package's root.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { ErrorRule, Extractor, Health, Runner, SkeinConfig } from "skein"
 * import { SkeinError, Topic, TopicPartition, Transformer } from "skein"
 *
 * const Words = Topic.make({ name: "words", key: Schema.String, value: Schema.String })
 * // a Transformer.make or Transformer.stateless over [Words], then:
 * Runner.run(WordCount).pipe(Effect.provide(SkeinConfig.layerConfig()), Runner.runMain)
 * ```
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Extractor from "./Extractor.ts"
/** @since 0.1.0 */
export * as ErrorRule from "./ErrorRule.ts"
/** @since 0.1.0 */
export * as Health from "./Health.ts"
/** @since 0.1.0 */
export * as Runner from "./Runner.ts"
/** @since 0.1.0 */
export * as SkeinConfig from "./SkeinConfig.ts"
/** @since 0.1.0 */
export * as SkeinError from "./SkeinError.ts"
/** @since 0.1.0 */
export * as Topic from "./Topic.ts"
/** @since 0.1.0 */
export * as TopicPartition from "./TopicPartition.ts"
/** @since 0.1.0 */
export * as Transformer from "./Transformer.ts"
/** @since 0.3.0 */
export * as KafkaWorkflow from "./KafkaWorkflow.ts"
/** @since 0.3.0 */
export * as KafkaAgent from "./KafkaAgent.ts"
/** @since 0.4.0 */
export * as KStream from "./KStream.ts"
/** @since 0.4.0 */
export * as KGroupedStream from "./KGroupedStream.ts"
/** @since 0.4.0 */
export * as KTable from "./KTable.ts"
/** @since 0.6.0 */
export * as GlobalKTable from "./GlobalKTable.ts"
/** @since 0.4.0 */
export * as Topology from "./Topology.ts"
/** @since 0.4.0 */
export * as TimeWindows from "./TimeWindows.ts"
/** @since 0.4.0 */
export * as JoinWindows from "./JoinWindows.ts"
/** @since 0.4.0 */
export * as SessionWindows from "./SessionWindows.ts"
/** @since 0.4.0 */
export * as SessionWindowedKStream from "./SessionWindowedKStream.ts"
/** @since 0.4.0 */
export * as SlidingWindows from "./SlidingWindows.ts"
/** @since 0.4.0 */
export * as TimeWindowedKStream from "./TimeWindowedKStream.ts"
/** @since 0.4.0 */
export * as Windowed from "./Windowed.ts"
/** @since 0.4.0 */
export * as Timer from "./Timer.ts"
/** @since 0.5.0 */
export * as KeyValueStore from "./KeyValueStore.ts"
/** @since 0.5.0 */
export * as WindowStore from "./WindowStore.ts"
/** @since 0.5.0 */
export * as SessionStore from "./SessionStore.ts"
/** @since 0.6.0 */
export * as QueryClient from "./QueryClient.ts"
/** @since 0.6.0 */
export * as DatabaseSink from "./DatabaseSink.ts"
