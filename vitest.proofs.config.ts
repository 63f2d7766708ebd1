import { configDefaults, defineConfig } from "vitest/config"
import base from "./vitest.config.ts"

// `npm run test:proofs`: proofs on the local broker that take minutes on a busy machine, left out
// of `npm test` and CI (test/proofs/query-kill.test.ts: three instances of a counting app, one a
// child process SIGKILLed with a transaction open while queries run; some 200 s at a load of 30
// on 2 cores). Run them by hand after a change to what they prove.
export default defineConfig({
  test: {
    ...base.test,
    include: ["test/proofs/**/*.test.ts"],
    exclude: configDefaults.exclude,
    fileParallelism: false
  }
})
