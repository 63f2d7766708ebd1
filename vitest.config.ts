import { configDefaults, defineConfig } from "vitest/config"
import { unitTests } from "./vitest.unit.config.ts"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // test/compat/: the compatibility run's own tests (vitest.compat.config.ts, npm run test:compat);
    // test/soak/: long leak runs (vitest.soak.config.ts, npm run test:soak); the broker-free tests
    // run in `npm run test:unit` (vitest.unit.config.ts), which `npm test` runs first.
    exclude: [...configDefaults.exclude, "test/compat/**", "test/soak/**", ...unitTests],
    globalSetup: ["test/globalSetup.ts", "test/postgresSetup.ts"],
    pool: "forks",
    testTimeout: 120_000,
    hookTimeout: 300_000,
  }
})
