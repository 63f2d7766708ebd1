#!/usr/bin/env node
// Builds the published package into dist/ (run by `npm run build` and `prepack`).
//
// tsc (tsconfig.build.json) emits ESM JavaScript, source maps, `.d.ts` and declaration maps
// from src/. `rewriteRelativeImportExtensions` turns the sources' `./X.ts` imports into
// `./X.js` in the JavaScript; declarations keep `./X.ts`, which only TypeScript 5+ with
// declaration-file resolution of `.ts` accepts, so this step rewrites their relative
// specifiers to `.js` too. Same length, so the declaration maps stay exact.
//
// Plain Node, no dependency besides the project's TypeScript.

import { execFileSync } from "node:child_process"
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const dist = join(root, "dist")

rmSync(dist, { recursive: true, force: true })
execFileSync(join(root, "node_modules", ".bin", "tsc"), ["-p", join(root, "tsconfig.build.json")], {
  cwd: root,
  stdio: "inherit"
})

// `from "./x.ts"`, `import("../y.ts")`: relative specifiers only, never a package name.
const relativeTs = /((?:from|import)\s*\(?\s*["'])(\.{1,2}\/[^"']*)\.ts(["'])/g

const declarations = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = join(dir, entry.name)
    return entry.isDirectory() ? declarations(file) : entry.name.endsWith(".d.ts") ? [file] : []
  })

let rewritten = 0
for (const file of declarations(dist)) {
  const text = readFileSync(file, "utf8")
  const next = text.replace(relativeTs, "$1$2.js$3")
  if (next !== text) {
    writeFileSync(file, next)
    rewritten++
  }
}
console.log(`[build] dist/: ${declarations(dist).length} declaration files (${rewritten} with .ts imports rewritten to .js)`)
