/**
 * App under test: per-key count/sum/min/max with state (see `transformers.ts`).
 *
 *   tsx test/apps/aggregate.ts | bun test/apps/aggregate.ts | deno run -A test/apps/aggregate.ts
 *
 * with SKEIN_APPLICATION_ID, KAFKA_BROKERS, CHAOS_INPUT_TOPIC, CHAOS_OUTPUT_TOPIC
 * (and any other SKEIN_* setting) in the environment.
 */
import { runApp } from "./main.ts"
import { aggregator } from "./transformers.ts"

runApp(aggregator)
