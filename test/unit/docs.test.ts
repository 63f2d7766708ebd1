/**
 * The documentation checks out (scripts/check-docs.mjs, about 4 s of CPU): every TypeScript
 * block of README.md and docs/ type-checks against the sources, every relative link resolves,
 * the README's test command is what .ci/run runs, and every metric and environment variable the
 * pages name exists in the code. A failure lists each problem as file:line.
 */
import { assert, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"

const script = fileURLToPath(new URL("../../scripts/check-docs.mjs", import.meta.url))

/** Runs the check to its end: its exit code and output. */
const check = () =>
  new Promise<{ readonly code: number; readonly stdout: string; readonly stderr: string }>((resolve) => {
    execFile(process.execPath, [script], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
    })
  })

// Asynchronous, not spawnSync: a worker blocked for the whole check (its type-check takes a minute
// on a busy machine) cannot answer vitest's RPC, which times out after 60 s ("Timeout calling
// onTaskUpdate", vitest-dev/vitest#6479) and fails the run although every test passed.
it("README.md and docs/: code blocks type-check, links resolve, quoted names exist", async () => {
  const result = await check()
  assert.strictEqual(result.code, 0, `${result.stderr}${result.stdout}`)
  assert.match(result.stdout, /TypeScript blocks type-check/)
}, 120_000)
