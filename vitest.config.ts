import { configDefaults, defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // test/compat/: the compatibility run's own tests (vitest.compat.config.ts, npm run test:compat).
    exclude: [...configDefaults.exclude, "test/compat/**"],
    globalSetup: ["test/globalSetup.ts"],
    pool: "forks",
    testTimeout: 120_000,
    hookTimeout: 300_000,
  }
})
