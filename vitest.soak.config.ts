import { configDefaults, defineConfig } from "vitest/config"
import base from "./vitest.config.ts"

// `npm run test:soak`: long resource-leak runs, left out of `npm test` to keep the default
// suite short (test/chaos/leaks.test.ts: one runner through 50 rebalances, about 90 s).
export default defineConfig({
  test: {
    ...base.test,
    include: ["test/soak/**/*.test.ts"],
    exclude: configDefaults.exclude
  }
})
