/**
 * App under test: the tagged per-key count of `queryCountTopology.ts`, for the SIGKILL query
 * proof (`test/proofs/query-kill.test.ts`).
 *
 *   node --import tsx test/apps/query-count.ts
 *
 * with SKEIN_APPLICATION_ID, KAFKA_BROKERS, CHAOS_INPUT_TOPIC, CHAOS_OUTPUT_TOPIC, SKEIN_QUERY_PORT
 * (and any other SKEIN_* setting) in the environment; QUERY_APP_INSTANCE names the instance in
 * the values it writes (default "child"), QUERY_APP_STALL=1 holds a "stall" record's transaction
 * open for good.
 */
import { runApp } from "./main.ts"
import { queryCounter } from "./queryCountTopology.ts"

runApp((names) =>
  queryCounter(names, { name: process.env["QUERY_APP_INSTANCE"] ?? "child", stall: process.env["QUERY_APP_STALL"] === "1" })
)
