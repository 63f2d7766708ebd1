import * as Path from "node:path"
import { configDefaults, defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"
import { unitTests } from "./vitest.unit.config.ts"

/**
 * The files started first: the longest, so that the run does not end with one of them alone
 * on a worker while the other waits. Without vitest's duration cache (a clean clone, as in CI)
 * files start largest first, and these are small files. Per-file durations on 2026-12-04:
 * chaos 232 s (its own 3-broker cluster, some twenty app processes), compat/aggregate 68 s of
 * test:compat's 114 s.
 */
export const firstFiles: ReadonlyArray<string> = [
  "test/chaos.test.ts",
  "test/compat/aggregate.test.ts"
]

/**
 * The files started last, in this order: the other files of a minute or more (handlers/shutdown
 * 92 s, extractor/kill 70 s, workflow/kill 63 s, example 53 s, broker-cluster 87 s), which spawn
 * processes or brokers of their own, so that they run once chaos.test.ts is done rather than
 * beside it: with chaos.test.ts's cluster beside broker-cluster's, both clusters took minutes to
 * start (broker-cluster 290 s, chaos's cluster case past its 10-minute timeout) on the busy
 * machine. broker-cluster (3 brokers) comes last.
 */
export const lastFiles: ReadonlyArray<string> = [
  "test/handlers/shutdown.test.ts",
  "test/extractor/kill.test.ts",
  "test/workflow/kill.test.ts",
  "test/example.test.ts",
  "test/broker-cluster.test.ts"
]

/** vitest's order (failed, then longest by its cache, else largest first), `firstFiles` first, `lastFiles` last. */
class FirstAndLastFiles extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const sorted = await super.sort(files)
    const rank = (file: TestSpecification): number => {
      const path = Path.relative(this.ctx.config.root, file.moduleId).split(Path.sep).join("/")
      const first = firstFiles.indexOf(path)
      if (first !== -1) return first
      const last = lastFiles.indexOf(path)
      return last === -1 ? firstFiles.length : firstFiles.length + 1 + last
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
    sequence: { sequencer: FirstAndLastFiles },
    testTimeout: 120_000,
    hookTimeout: 300_000,
  }
})
