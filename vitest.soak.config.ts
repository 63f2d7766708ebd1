import { configDefaults, defineConfig } from "vitest/config"
import base from "./vitest.config.ts"

// `npm run test:soak`: the long runs, left out of `npm test` to keep the default suite short
// (test/soak/leaks.test.ts: one runner through 50 rebalances, about 80 s). CI runs it as it is,
// at its default bound: a soak test that repeats over random seeds or rounds reads
// SKEIN_SOAK_BOUND (how many; unset: the small default CI runs) so that a longer run by hand is
// `SKEIN_SOAK_BOUND=<n> npm run test:soak`, and CI's stays short.
export default defineConfig({
  test: {
    ...base.test,
    include: ["test/soak/**/*.test.ts"],
    exclude: configDefaults.exclude,
    // Its files side by side (the leak run measures its own process; the chaos run its own
    // children): the soak stage takes the longer of them, not their sum.
    fileParallelism: true,
    maxWorkers: 2,
    minWorkers: 1
  }
})
