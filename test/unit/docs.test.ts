/**
 * The documentation checks out (scripts/check-docs.mjs, about 4 s of CPU): every TypeScript
 * block of README.md and docs/ type-checks against the sources, every relative link resolves,
 * the README's test command is what .ci/run runs, and every metric and environment variable the
 * pages name exists in the code. A failure lists each problem as file:line.
 */
import { assert, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"

const script = fileURLToPath(new URL("../../scripts/check-docs.mjs", import.meta.url))

it("README.md and docs/: code blocks type-check, links resolve, quoted names exist", () => {
  const result = spawnSync(process.execPath, [script], { encoding: "utf8" })
  assert.strictEqual(result.status, 0, `${result.stderr}${result.stdout}`)
  assert.match(result.stdout, /TypeScript blocks type-check/)
}, 120_000)
