import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/globalSetup.ts"],
    pool: "forks",
    testTimeout: 120_000,
    hookTimeout: 300_000,
  }
})
