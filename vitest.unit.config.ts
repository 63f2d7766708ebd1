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
    // Two files at a time on CI's 2 cores (vitest's default there is one worker: cores - 1). Tried
    // once before (1dfe768) and taken back (7fa2551) for a "Timeout calling onTaskUpdate": a worker
    // blocked past vitest's 60 s RPC timeout, which docs.test.ts's spawnSync of the docs check did
    // on a busy machine; it now runs the check asynchronously.
    fileParallelism: true,
    maxWorkers: 2,
    minWorkers: 1,
    testTimeout: 120_000,
    hookTimeout: 300_000
  }
})
