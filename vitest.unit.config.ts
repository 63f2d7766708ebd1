import { defineConfig } from "vitest/config"

/**
 * The tests that need no Kafka broker (pure logic, in-memory fakes, TestDriver, local HTTP):
 * `npm run test:unit` runs them with no global setup, so they need no Java, Maven or Docker.
 * `npm test` runs them first, then the broker tests (vitest.config.ts excludes these files).
 * A test that needs the run's broker fails here (`inject("kafkaBrokers")` is undefined).
 */
export const unitTests: ReadonlyArray<string> = [
  "test/unit/**/*.test.ts",
  "test/chaos/verifier.test.ts",
  "test/chaos/enrichmentVerifier.test.ts",
  "test/chaos/postgresVerifier.test.ts",
  "test/extractor/units.test.ts",
  "test/health/prometheus.test.ts",
  "test/health/server.test.ts",
  "test/secure/settings.test.ts",
  "test/testing/dead-letters-example.test.ts",
  "test/testing/test-driver.test.ts",
  "test/workflow/driver.test.ts"
]

export default defineConfig({
  test: {
    include: [...unitTests],
    pool: "forks",
    testTimeout: 120_000,
    hookTimeout: 300_000
  }
})
