#!/usr/bin/env node
// Writes docs/api.md, the index of the public API, from the sources: for each module that
// src/index.ts and src/testing/index.ts export (`export * as Name from "./Name.ts"`), the first
// sentence of its module doc comment and the names it exports (values, then types).
//
//   node scripts/api-index.mjs           writes docs/api.md
//   node scripts/api-index.mjs --check   exits 1 when docs/api.md is not what it would write
//
// scripts/check-docs.mjs (npm test) warns when docs/api.md is stale. The full reference, with
// each export's doc comment and example, is `npm run docs` (deno doc --html, docs/api/).

import { readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const target = join(root, "docs", "api.md")

const header = `# API index

The public modules of \`skein\` and \`skein/testing\`, what each is for, and what it exports. Each
module is a namespace of the package root (\`import { Runner, Topic } from "skein"\`); everything
under \`src/internal/\` is private. The doc comments of the sources are the full reference, with
an example per export: \`npm run docs\` renders them to HTML in \`docs/api/\` (offline, with search;
\`deno doc --html\`), and editors show them on hover.

This page is written by \`node scripts/api-index.mjs\` from the sources (each module's first
sentence and its exports); \`npm test\` warns when it is stale.
`

const withoutDocComments = (text) => text.replace(/\/\*\*[\s\S]*?\*\//g, "")

/** The first sentence (two when the first is short) of a module's leading doc comment. */
const summary = (text) => {
  const comment = /^\s*\/\*\*([\s\S]*?)\*\//.exec(text)
  if (comment === null) return ""
  const prose = comment[1].split("\n").map((line) => line.trim().replace(/^\*\s?/, "").trim()).join(" ")
    .split(/@example|@since|```/)[0].trim()
  const sentences = prose.split(/(?<=\.)\s+(?=[A-Z`*])/)
  let result = sentences[0] ?? ""
  if (result.length < 80 && sentences.length > 1) result += ` ${sentences[1]}`
  if (result.length > 320) result = `${result.slice(0, 320).replace(/\s+\S*$/, "")} ...`
  // A cut inside inline code: close it.
  if ((result.match(/`/g) ?? []).length % 2 === 1) result = result.replace(/ \.\.\.$/, "` ...")
  return result
}

/** Exported names: [name, isType], in source order, each once per kind. */
const exportsOf = (text) => {
  const source = withoutDocComments(text)
  const found = []
  for (const m of source.matchAll(/^export (?:declare )?(const|function|class|interface|type|namespace)\s+([A-Za-z_$][\w$]*)/gm)) {
    found.push([m[2], m[1] === "interface" || m[1] === "type"])
  }
  for (const m of source.matchAll(/^export (type )?\{([^}]*)\}/gm)) {
    for (const part of m[2].split(",")) {
      const name = part.trim().split(/\s+as\s+/).pop()?.trim()
      if (name) found.push([name, m[1] !== undefined])
    }
  }
  const seen = new Set()
  return found.filter(([name, isType]) => {
    const key = `${isType}:${name}`
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}

export const render = () => {
  const out = [header]
  for (const [index, pkg] of [["src/index.ts", "skein"], ["src/testing/index.ts", "skein/testing"]]) {
    out.push(`## \`${pkg}\`\n`)
    const text = readFileSync(join(root, index), "utf8")
    for (const m of text.matchAll(/^export \* as (\w+) from "\.\/([\w/]+)\.ts"/gm)) {
      const path = `${dirname(index)}/${m[2]}.ts`
      const source = readFileSync(join(root, path), "utf8")
      const names = exportsOf(source)
      const values = names.filter(([, isType]) => !isType).map(([n]) => `\`${n}\``)
      const types = names.filter(([, isType]) => isType).map(([n]) => `\`${n}\``)
      out.push(`### ${m[1]}\n\n[\`${path}\`](../${path}): ${summary(source)}\n`)
      if (values.length > 0) out.push(`- values: ${values.join(", ")}`)
      if (types.length > 0) out.push(`- types: ${types.join(", ")}`)
      out.push("")
    }
  }
  return out.join("\n")
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const next = render()
  if (process.argv.includes("--check")) {
    const current = readFileSync(target, "utf8")
    if (current !== next) {
      console.error("[api-index] docs/api.md is stale: run node scripts/api-index.mjs")
      process.exit(1)
    }
  } else {
    writeFileSync(target, next)
    console.log(`[api-index] wrote docs/api.md`)
  }
}
