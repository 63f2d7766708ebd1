/**
 * App under test: orders left-joined with a customers table whose topic is
 * its changelog (`sourceChangelogTopology.ts`), the enrichment sub-topology
 * run alone (test/state/source-changelog-kill.test.ts).
 *
 *   tsx test/apps/sourceChangelog.ts
 *
 * with SKEIN_APPLICATION_ID (the sub-topology's group), KAFKA_BROKERS,
 * CHAOS_INPUT_TOPIC (the orders), CHAOS_OUTPUT_TOPIC and
 * SOURCE_CHANGELOG_TABLE (the customers) in the environment.
 */
import { runApp } from "./main.ts"
import { enrichmentTransformer } from "./sourceChangelogTopology.ts"

runApp(({ input, output }) => enrichmentTransformer({ customers: process.env["SOURCE_CHANGELOG_TABLE"] ?? "", orders: input, output }))
