import * as Path from "node:path"
import { configDefaults, defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"
import { unitTests } from "./vitest.unit.config.ts"

/**
 * The broker test files that take a minute or more (vitest's per-file durations, 2026-12-04:
 * chaos 232 s, handlers/shutdown 92 s, broker-cluster 87 s, extractor/kill 70 s, workflow/kill
 * 63 s, example 53 s), longest first. They start first, so that the run does not end with one
 * of them alone on a worker while the other waits: without vitest's duration cache (a clean
 * clone, as in CI) files start largest first, and these are small files.
 */
export const slowFiles: ReadonlyArray<string> = [
  "test/chaos.test.ts",
  "test/handlers/shutdown.test.ts",
  "test/broker-cluster.test.ts",
  "test/extractor/kill.test.ts",
  "test/workflow/kill.test.ts",
  "test/example.test.ts",
  // npm run test:compat (vitest.compat.config.ts, this config's sequencer): 68 s of its 114 s.
  "test/compat/aggregate.test.ts"
]

/** vitest's order (failed, then longest by its cache, else largest first) with `slowFiles` first. */
class SlowFilesFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const sorted = await super.sort(files)
    const rank = (file: TestSpecification): number => {
      const index = slowFiles.indexOf(Path.relative(this.ctx.config.root, file.moduleId).split(Path.sep).join("/"))
      return index === -1 ? slowFiles.length : index
    }
    return sorted.sort((a, b) => rank(a) - rank(b))
  }
}

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // test/compat/: the compatibility run's own tests (vitest.compat.config.ts, npm run test:compat);
    // test/soak/: long leak runs (vitest.soak.config.ts, npm run test:soak); the broker-free tests
    // run in `npm run test:unit` (vitest.unit.config.ts), which `npm test` runs first.
    exclude: [...configDefaults.exclude, "test/compat/**", "test/soak/**", ...unitTests],
    globalSetup: ["test/globalSetup.ts", "test/postgresSetup.ts"],
    pool: "forks",
    // Two files at a time, on the one broker (each test makes its own topics, groups and
    // applicationIds with unique names). Broker tests mostly wait for the broker and their
    // child processes: two side by side took 850 s against 1,256 s one by one, on the 2-core
    // CI machine (vitest's default there is one worker: cores - 1).
    fileParallelism: true,
    maxWorkers: 2,
    minWorkers: 1,
    sequence: { sequencer: SlowFilesFirst },
    testTimeout: 120_000,
    hookTimeout: 300_000,
  }
})
