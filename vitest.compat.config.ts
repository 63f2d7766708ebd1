import { configDefaults, defineConfig } from "vitest/config"
import base from "./vitest.config.ts"

// `npm run test:compat`: the core exactly-once tests against Kafka 3.9.2
// (test/compat/globalSetup.ts) - copy with restarts, zombie fencing, the
// aggregate under kills, and restore after fencing aborted a crashed owner's
// open transaction (the one path the kills hit only by chance), and the durable
// workflow contract (run store fencing, rewinds, retention), and the secured
// exactly-once cases on a secured 3.9.2 broker of their own
// (test/compat/secure.test.ts). The default run (vitest.config.ts) covers 4.4.0.
export default defineConfig({
  test: {
    ...base.test,
    include: [
      "test/transformer/copy.test.ts",
      "test/transformer/zombie.test.ts",
      "test/transformer/restore.test.ts",
      "test/compat/aggregate.test.ts",
      "test/workflow/contract.test.ts",
      "test/compat/secure.test.ts"
    ],
    exclude: configDefaults.exclude,
    globalSetup: ["test/compat/globalSetup.ts"]
  }
})
