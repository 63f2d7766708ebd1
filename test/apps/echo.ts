/**
 * App under test: the stateless copier (see `transformers.ts`).
 *
 *   tsx test/apps/echo.ts | bun test/apps/echo.ts | deno run -A test/apps/echo.ts
 *
 * with SKEIN_APPLICATION_ID, KAFKA_BROKERS, CHAOS_INPUT_TOPIC, CHAOS_OUTPUT_TOPIC
 * (and any other SKEIN_* setting) in the environment.
 */
import { runApp } from "./main.ts"
import { echo } from "./transformers.ts"

runApp(echo)
