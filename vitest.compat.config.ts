import { configDefaults, defineConfig } from "vitest/config"
import base from "./vitest.config.ts"

// `npm run test:compat`: the core exactly-once tests against Kafka 3.9.2
// (test/compat/globalSetup.ts) - copy with restarts, zombie fencing, and the
// aggregate under kills. The default run (vitest.config.ts) covers 4.4.0.
export default defineConfig({
  test: {
    ...base.test,
    include: ["test/transformer/copy.test.ts", "test/transformer/zombie.test.ts", "test/compat/aggregate.test.ts"],
    exclude: configDefaults.exclude,
    globalSetup: ["test/compat/globalSetup.ts"]
  }
})
