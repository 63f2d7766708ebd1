import * as Path from "node:path"
import { configDefaults, defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"
import { unitTests } from "./vitest.unit.config.ts"

/**
 * The files started first: the longest, so that the run does not end with one of them alone
 * on a worker while the other waits (without vitest's duration cache, as in a clean clone, files
 * start largest first, and this is a small file): compat/aggregate takes 68 s of test:compat's
 * 114 s. test/chaos.test.ts (232 s, some twenty app processes and a 3-broker cluster of its
 * own) runs alone after the others in `npm test` (package.json): beside it, the broker files
 * next to it failed on a busy machine (kafkajs-read-committed: "Failed to find group
 * coordinator"; broker-cluster's 3 brokers took 290 s to start instead of 87 s for the whole file).
 */
export const firstFiles: ReadonlyArray<string> = [
  "test/compat/aggregate.test.ts"
]

/** vitest's order (failed, then longest by its cache, else largest first), `firstFiles` first. */
class FirstFiles extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const sorted = await super.sort(files)
    const rank = (file: TestSpecification): number => {
      const index = firstFiles.indexOf(Path.relative(this.ctx.config.root, file.moduleId).split(Path.sep).join("/"))
      return index === -1 ? firstFiles.length : index
    }
    return sorted.sort((a, b) => rank(a) - rank(b))
  }
}

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // test/compat/: the compatibility run's own tests (vitest.compat.config.ts, npm run test:compat);
    // test/soak/: long leak runs (vitest.soak.config.ts, npm run test:soak); test/proofs/: proofs
    // that take minutes (vitest.proofs.config.ts, npm run test:proofs); the broker-free tests
    // run in `npm run test:unit` (vitest.unit.config.ts), which `npm test` runs first.
    exclude: [...configDefaults.exclude, "test/compat/**", "test/soak/**", "test/proofs/**", ...unitTests],
    globalSetup: ["test/globalSetup.ts", "test/postgresSetup.ts"],
    pool: "forks",
    // Two files at a time, on the one broker (each test makes its own topics, groups and
    // applicationIds with unique names). Broker tests mostly wait for the broker and their
    // child processes: two side by side took 850 s against 1,256 s one by one, on the 2-core
    // CI machine (vitest's default there is one worker: cores - 1).
    fileParallelism: true,
    maxWorkers: 2,
    minWorkers: 1,
    sequence: { sequencer: FirstFiles },
    testTimeout: 120_000,
    hookTimeout: 300_000,
  }
})
