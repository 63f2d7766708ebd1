/**
 * App under test: one stage of the two-stage pipeline, chosen by
 * `--stage 1|2` (or CHAOS_STAGE). Stage 1 aggregates the input per key
 * (count/sum/min/max); stage 2 consumes stage 1's output and audits it per
 * key. Each stage is its own application (its own SKEIN_APPLICATION_ID).
 *
 *   tsx test/apps/pipeline.ts --stage 1 | bun test/apps/pipeline.ts --stage 2 | deno run -A test/apps/pipeline.ts --stage 1
 */
import { runApp } from "./main.ts"
import { aggregator, auditor } from "./transformers.ts"

const flag = process.argv.indexOf("--stage")
const stage = flag >= 0 ? process.argv[flag + 1] : process.env["CHAOS_STAGE"]
if (stage === "1") runApp(aggregator)
else if (stage === "2") runApp(auditor)
else {
  process.stderr.write("pipeline: --stage 1|2 (or CHAOS_STAGE) is required\n")
  process.exit(2)
}
