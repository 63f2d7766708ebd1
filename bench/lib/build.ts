/**
 * Skein's build for the benchmark: `dist/`, what an installed package runs (`npm run build`,
 * about a second). The Skein app loads it (bench/apps/skein-count.ts), so every run measures
 * the JavaScript users run, not the TypeScript sources compiled by tsx at each start.
 */
import { execFile } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { promisify } from "node:util"

const run = promisify(execFile)

/** Builds `dist/` of the checkout at `root` (`scripts/build.mjs`, what `npm run build` runs); a failure carries tsc's output. */
export const buildSkein = async (root: string): Promise<void> => {
  const script = join(root, "scripts", "build.mjs")
  // An older checkout (a --compare side) may predate the build script: its app runs its sources.
  if (!existsSync(script)) return
  await run(process.execPath, [script], { cwd: root, maxBuffer: 16 * 1024 * 1024 }).catch((error: unknown) => {
    // execFile's message holds the command's stderr; tsc reports on stdout.
    const stdout = error instanceof Error && "stdout" in error ? String(error.stdout) : ""
    throw new Error(`building Skein (npm run build) failed in ${root}: ${error instanceof Error ? error.message : String(error)}${stdout}`)
  })
}
