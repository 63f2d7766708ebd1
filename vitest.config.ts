import { configDefaults, defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // test/compat/: the compatibility run's own tests (vitest.compat.config.ts, npm run test:compat);
    // test/soak/: long leak runs (vitest.soak.config.ts, npm run test:soak).
    exclude: [...configDefaults.exclude, "test/compat/**", "test/soak/**"],
    globalSetup: ["test/globalSetup.ts"],
    pool: "forks",
    testTimeout: 120_000,
    hookTimeout: 300_000,
  }
})
