/**
 * The benchmark's contender apps (bench/apps/*.ts) load outside the test runner: each one, run
 * without its arguments, gets as far as its usage message (exit 2), instead of failing while
 * its modules load (a helper it shares with the tests that imports vitest, say). A contender
 * that cannot start shows up only as a row of dashes in a benchmark's results.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { readdirSync } from "node:fs"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))
const apps = readdirSync(`${root}/bench/apps`).filter((file) => file.endsWith(".ts")).sort()

describe("the benchmark's contender apps", () => {
  it("are there", () => {
    expect(apps.length).toBeGreaterThanOrEqual(8)
  })

  it.each(apps)("%s loads and prints its usage when run without arguments", (app) => {
    const run = spawnSync(process.execPath, ["--import", "tsx", `bench/apps/${app}`], {
      cwd: root,
      encoding: "utf8",
      env: { ...process.env, DATABASE_URL: "" },
      timeout: 60_000
    })
    expect(run.stderr + run.stdout, `${app} must reach its usage message`).toMatch(/usage/i)
    expect(run.status).toBe(2)
  }, 70_000)
})
