/**
 * The test run's Kafka broker (started once by test/globalSetup.ts).
 */
import { Layer } from "effect"
import { inject } from "vitest"
import * as KafkaBroker from "../../src/testing/KafkaBroker.ts"

/** The run's broker addresses, `host:port`. */
export const brokers = (): ReadonlyArray<string> => inject("kafkaBrokers").split(",")

/** `KafkaBroker` backed by the run's broker (kind "external": tests never stop it). */
export const layer: Layer.Layer<KafkaBroker.KafkaBroker> = Layer.suspend(() => KafkaBroker.layerExternal(brokers()))
