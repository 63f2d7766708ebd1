import * as Path from "node:path"
import { configDefaults, defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"
import { unitTests } from "./vitest.unit.config.ts"

/**
 * The files started first, longest first, so that a run does not end with one long file alone
 * on a worker while the other waits: without vitest's duration cache (a clean clone, as in CI)
 * files start largest first, and most of these are small files (extractor/kill, 72 s, is the
 * smallest broker file: it started last in the clean-clone CI run of 145dc22 and ended the
 * broker files' run, the other worker done). The durations are that run's (npm test's broker
 * files on a busy machine, every file of 18 s or more); compat/aggregate takes 68 s of
 * test:compat's 114 s.
 * test/chaos.test.ts (232 s, some twenty app processes and a 3-broker cluster of its own) runs
 * alone after the others in `npm test` (package.json): beside it, the broker files next to it
 * failed on a busy machine (kafkajs-read-committed: "Failed to find group coordinator";
 * broker-cluster's 3 brokers took 290 s to start instead of 87 s for the whole file).
 */
export const firstFiles: ReadonlyArray<string> = [
  "test/compat/aggregate.test.ts",
  "test/broker-cluster.test.ts", // 100 s
  "test/streams/table-join-driver.test.ts", // 92
  "test/extractor/kill.test.ts", // 72
  "test/example.test.ts", // 66
  "test/workflow/kill.test.ts", // 56
  "test/broker.test.ts", // 45
  "test/state/source-changelog-kill.test.ts", // 43
  "test/shutdown/signals.test.ts", // 38
  "test/state/kept-state.test.ts", // 33
  "test/secure/secure.test.ts", // 32
  "test/streams/windowed-differential.test.ts", // 32
  "test/extractor/instances.test.ts", // 32
  "test/agent/kill.test.ts", // 31
  "test/handlers/delivery.test.ts", // 31
  "test/edges/interrupt-startup.test.ts", // 26
  "test/state/kill-after-commit.test.ts", // 26
  "test/transformer/run-all-kill.test.ts", // 25
  "test/kafkajs-patch.test.ts", // 24
  "test/agent/example.test.ts", // 22
  "test/handlers/shutdown.test.ts", // 21
  "test/handlers/long-handler.test.ts", // 21
  "test/state/store-cleanup.test.ts", // 20
  "test/streams/join-driver.test.ts", // 20
  "test/streams/windowed-driver.test.ts", // 20
  "test/streams/source-changelog.test.ts", // 19
  "test/handlers/delivery-modes.test.ts", // 19
  "test/database/sink-zombie.test.ts", // 19
  "test/secure/scram-sha-256.test.ts" // 18
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
