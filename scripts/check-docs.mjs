#!/usr/bin/env node
// Checks the documentation: README.md and docs/**/*.md (docs/api/, generated, excluded).
//
// 1. Every ```ts block type-checks against the sources. Each block is written as a module of
//    its own into .skein/docs-check/ (git-ignored), `skein` and `skein/testing` resolve to
//    src/index.ts and src/testing/index.ts, and the project's TypeScript checks them all in one
//    run (a few seconds). The fence's info string may say:
//      ```ts no-check             a fragment that is not meant to compile (use sparingly)
//      ```ts prelude=word-count   the names the block uses from docs/snippets/word-count.ts
//                                 (WordCount, Words, Counts, ...) are imported for it, unless
//                                 the block declares or imports them itself. Several preludes:
//                                 prelude=word-count,records
//      ```ts file=src/main.ts     the block is that file of a project of its own (one per page), so
//                                 that blocks import each other as the page shows
//                                 (`import { WordCount } from "./WordCount.js"`)
//      ```ts continues            the names the block uses from the file's previous ```ts block
//                                 (a test after the code it tests) are imported for it
//    The preludes (docs/snippets/*.ts) are checked too.
// 2. Every relative link resolves: the file exists, and an anchor (`file.md#a-heading` or
//    `#a-heading`) names a heading of that file (GitHub's slugs).
// 3. docs/api.md is what scripts/api-index.mjs writes from the sources (a warning only).
// 4. The README's test command is the `npm` steps of .ci/run.
// 5. Every metric name (`skein_...`) the documentation quotes is in src/, every environment
//    variable (`SKEIN_...`) is read somewhere in the code, and (a warning) every SkeinConfig
//    setting has a row in docs/configuration.md.
//
// Exits 1 with one line per problem (file:line). `node scripts/check-docs.mjs` runs it;
// test/unit/docs.test.ts runs it in `npm test`.

import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const out = join(root, ".skein", "docs-check")
const snippets = join(root, "docs", "snippets")

const markdownFiles = () => {
  const walk = (dir) =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const file = join(dir, entry.name)
      if (entry.isDirectory()) return file === join(root, "docs", "api") ? [] : walk(file)
      return entry.name.endsWith(".md") ? [file] : []
    })
  return [join(root, "README.md"), ...walk(join(root, "docs"))]
}

/** Fenced blocks of a markdown file: language, attributes, first line, text. */
const blocks = (text) => {
  const found = []
  const lines = text.split("\n")
  let open
  lines.forEach((line, index) => {
    const fence = /^(\s*)(`{3,}|~{3,})(.*)$/.exec(line)
    if (open === undefined) {
      if (fence === null) return
      const [lang = "", ...attrs] = fence[3].trim().split(/\s+/)
      open = { marker: fence[2], indent: fence[1].length, lang, attrs, line: index + 1, body: [] }
    } else if (fence !== null && fence[2].startsWith(open.marker) && fence[3].trim() === "") {
      found.push({ ...open, text: open.body.join("\n") })
      open = undefined
    } else {
      open.body.push(line.slice(Math.min(open.indent, line.length - line.trimStart().length)))
    }
  })
  return found
}

// ---------------------------------------------------------------------------------------------
// 1. TypeScript blocks

const exportedNames = (text) => [
  ...[...text.matchAll(/^export\s+(?:declare\s+)?(?:const|let|class|function\*?|type|interface|enum)\s+([A-Za-z_$][\w$]*)/gm)]
    .map((match) => match[1]),
  // export { A, B as C } from "..."
  ...[...text.matchAll(/^export\s+(?:type\s+)?\{([^}]*)\}/gm)]
    .flatMap((match) => match[1].split(",").map((part) => part.trim().split(/\s+as\s+/).pop()?.trim() ?? ""))
    .filter((name) => name !== "")
]

/** Top-level declarations of a block: [name, exported]. */
const declarations = (text) =>
  [...text.matchAll(/^(export\s+)?(?:declare\s+)?(?:const|let|var|class|function\*?|type|interface|enum)\s+([A-Za-z_$][\w$]*)/gm)]
    .map((match) => [match[2], match[1] !== undefined])

const uses = (text, name) => new RegExp(`(?<![\\w$.])${name.replace(/\$/g, "\\$")}(?![\\w$])`).test(text)

/** Names a block binds itself: imports and top-level declarations. */
const ownNames = (text) => {
  const names = new Set()
  for (const match of text.matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s+from/g)) {
    for (const part of match[1].split(",")) {
      const name = part.trim().replace(/^type\s+/, "").split(/\s+as\s+/).pop()?.trim()
      if (name) names.add(name)
    }
  }
  for (const match of text.matchAll(/import\s+(?:\*\s+as\s+)?([A-Za-z_$][\w$]*)\s+from/g)) names.add(match[1])
  for (const match of text.matchAll(/^(?:export\s+)?(?:declare\s+)?(?:const|let|var|class|function\*?|type|interface|enum)\s+([A-Za-z_$][\w$]*)/gm)) {
    names.add(match[1])
  }
  return names
}

const problems = []
rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })

const preludes = new Map()
if (existsSync(snippets)) {
  for (const name of readdirSync(snippets)) {
    if (name.endsWith(".ts")) {
      const text = readFileSync(join(snippets, name), "utf8")
      preludes.set(name.slice(0, -3), { path: join(snippets, name), names: exportedNames(text) })
    }
  }
}

const files = markdownFiles()

const written = new Map() // generated file -> "doc.md:line"
let checked = 0
let skipped = 0
for (const file of files) {
  const doc = relative(root, file)
  let previous // the file's previous checked block: { generated, declared }
  for (const block of blocks(readFileSync(file, "utf8"))) {
    if (block.lang !== "ts" && block.lang !== "typescript") continue
    if (block.attrs.includes("no-check")) {
      skipped++
      continue
    }
    const where = `${doc}:${block.line}`
    const fileAttr = block.attrs.find((attr) => attr.startsWith("file="))?.slice(5)
    const generated = fileAttr === undefined
      ? join(out, `${doc.replace(/[^\w]+/g, "_")}_${block.line}.ts`)
      : join(out, doc.replace(/[^\w]+/g, "_"), fileAttr)
    mkdirSync(dirname(generated), { recursive: true })
    const own = ownNames(block.text.replace(/\/\/.*$/gm, ""))
    const header = [`// ${where}`]
    const wanted = block.attrs.flatMap((attr) => attr.startsWith("prelude=") ? attr.slice(8).split(",") : [])
    for (const name of wanted) {
      const prelude = preludes.get(name)
      if (prelude === undefined) {
        problems.push(`${where}: unknown prelude "${name}" (docs/snippets/${name}.ts)`)
        continue
      }
      const used = prelude.names.filter((n) => !own.has(n) && uses(block.text, n))
      const from = relative(dirname(generated), prelude.path).replaceAll("\\", "/")
      if (used.length > 0) header.push(`import { ${used.join(", ")} } from "${from}"`)
      used.forEach((n) => own.add(n))
    }
    if (block.attrs.includes("continues")) {
      if (previous === undefined) {
        problems.push(`${where}: "continues", but no checked \`\`\`ts block comes before it`)
      } else {
        const used = previous.declared.filter((n) => !own.has(n) && uses(block.text, n))
        if (used.length > 0) header.push(`import { ${used.join(", ")} } from "./${previous.generated.split(/[\\/]/).pop()}"`)
      }
    }
    // What the block declares without exporting is exported, for a block that continues it.
    const declared = declarations(block.text)
    const unexported = declared.filter(([, exported]) => !exported).map(([n]) => n)
    const footer = unexported.length > 0 ? `export { ${[...new Set(unexported)].join(", ")} }` : "export {}"
    writeFileSync(generated, `${header.join("\n")}\n${block.text}\n${footer}\n`)
    previous = { generated, declared: declared.map(([n]) => n) }
    written.set(generated, { where, headerLines: header.length })
    checked++
  }
}

writeFileSync(join(out, "tsconfig.json"), JSON.stringify({
  extends: relative(out, join(root, "tsconfig.json")).replaceAll("\\", "/"),
  compilerOptions: {
    // Examples declare what they show; an unused one is no error here.
    noUnusedLocals: false,
    noUnusedParameters: false,
    paths: {
      "skein": [relative(out, join(root, "src", "index.ts")).replaceAll("\\", "/")],
      "skein/testing": [relative(out, join(root, "src", "testing", "index.ts")).replaceAll("\\", "/")]
    }
  },
  include: ["**/*.ts", relative(out, snippets).replaceAll("\\", "/") + "/*.ts"]
}, null, 2))

let tscOutput = ""
try {
  execFileSync(join(root, "node_modules", ".bin", "tsc"), ["--noEmit", "-p", join(out, "tsconfig.json"), "--pretty", "false"], {
    cwd: root,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"]
  })
} catch (error) {
  tscOutput = `${error.stdout ?? ""}${error.stderr ?? ""}`
}
for (const line of tscOutput.split("\n").filter((l) => l.trim() !== "")) {
  // .skein/docs-check/README_md_130.ts(12,5): error TS2304: Cannot find name 'x'.
  const match = /^(.*?\.ts)\((\d+),(\d+)\): (.*)$/.exec(line)
  const generated = match ? resolve(root, match[1]) : undefined
  const origin = generated ? written.get(generated) : undefined
  if (match && origin) {
    const [doc, start] = origin.where.split(/:(?=\d+$)/)
    problems.push(`${doc}:${Number(start) + Number(match[2]) - origin.headerLines}: ${match[4]}`)
  } else if (match && resolve(root, match[1]).startsWith(snippets)) {
    problems.push(`${relative(root, resolve(root, match[1]))}:${match[2]}: ${match[4]}`)
  } else if (match) {
    // An error in src/ itself: `npm run typecheck` reports it, not the documentation.
  } else if (!line.startsWith(" ")) {
    problems.push(line)
  }
}

// ---------------------------------------------------------------------------------------------
// 2. Relative links

/** GitHub's heading anchor. */
const slug = (heading) =>
  heading.trim().toLowerCase().replace(/<[^>]*>/g, "").replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-")

const anchorsOf = new Map()
const anchors = (file) => {
  let set = anchorsOf.get(file)
  if (set === undefined) {
    set = new Set()
    const counts = new Map()
    const fenced = new Set(blocks(readFileSync(file, "utf8")).flatMap((b) => Array.from({ length: b.body.length + 2 }, (_, i) => b.line + i)))
    readFileSync(file, "utf8").split("\n").forEach((line, index) => {
      const heading = /^#{1,6}\s+(.*)$/.exec(line)
      if (heading === null || fenced.has(index + 1)) return
      const base = slug(heading[1])
      const n = counts.get(base) ?? 0
      counts.set(base, n + 1)
      set.add(n === 0 ? base : `${base}-${n}`)
    })
    anchorsOf.set(file, set)
  }
  return set
}

let links = 0
for (const file of files) {
  const doc = relative(root, file)
  const text = readFileSync(file, "utf8")
  const fenced = new Set(blocks(text).flatMap((b) => Array.from({ length: b.body.length + 2 }, (_, i) => b.line + i)))
  text.split("\n").forEach((line, index) => {
    if (fenced.has(index + 1)) return
    const code = line.replace(/`[^`]*`/g, "")
    for (const match of code.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = match[1]
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue // https:, mailto:
      links++
      const [path, anchor] = target.split("#")
      const resolved = path === "" ? file : resolve(dirname(file), decodeURIComponent(path))
      if (!existsSync(resolved)) {
        problems.push(`${doc}:${index + 1}: link to a missing file: ${target}`)
      } else if (anchor !== undefined && resolved.endsWith(".md") && statSync(resolved).isFile() && !anchors(resolved).has(anchor)) {
        problems.push(`${doc}:${index + 1}: link to a missing heading: ${target}`)
      }
    }
  })
}

// ---------------------------------------------------------------------------------------------
// 3. docs/api.md against the sources (a warning: a module may land before its index is rewritten)

const { render: renderApiIndex } = await import("./api-index.mjs")
if (readFileSync(join(root, "docs", "api.md"), "utf8") !== renderApiIndex()) {
  console.warn("[check-docs] docs/api.md is stale (a public module or export changed): run node scripts/api-index.mjs")
}

// ---------------------------------------------------------------------------------------------
// 5. Names the documentation quotes exist: every metric (`skein_...`) in src/, every environment
//    variable (`SKEIN_...`) in the repository's code; and every SkeinConfig setting has a row in
//    docs/configuration.md (a warning: a setting may land before its row).

const codeText = (dirs) => {
  const walk = (dir) =>
    existsSync(dir)
      ? readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
        const file = join(dir, entry.name)
        if (entry.isDirectory()) return entry.name === "node_modules" ? [] : walk(file)
        return /\.(ts|mjs|js|sh)$/.test(entry.name) ? [readFileSync(file, "utf8")] : []
      })
      : []
  return dirs.flatMap((dir) => walk(join(root, dir))).join("\n")
}
const srcText = codeText(["src"])
const repoText = `${srcText}\n${codeText(["test", "scripts", "bench", "examples", ".ci"])}\n${
  readdirSync(root).filter((f) => /^vitest.*\.ts$/.test(f)).map((f) => readFileSync(join(root, f), "utf8")).join("\n")
}`
for (const file of files) {
  const doc = relative(root, file)
  readFileSync(file, "utf8").split("\n").forEach((line, index) => {
    for (const [name] of line.matchAll(/\bskein_[a-z_]*[a-z]\b/g)) {
      // `skein_partition_*`: a family prefix, not a name
      if (!srcText.includes(`"${name}`) && !line.includes(`${name}_*`)) {
        problems.push(`${doc}:${index + 1}: metric ${name} appears nowhere in src/`)
      }
    }
    for (const [name] of line.matchAll(/\bSKEIN_[A-Z0-9_]*[A-Z0-9]\b/g)) {
      if (!repoText.includes(name)) problems.push(`${doc}:${index + 1}: environment variable ${name} is read nowhere in the code`)
    }
  })
}
const configDoc = readFileSync(join(root, "docs", "configuration.md"), "utf8")
const settingsInterface = /export interface SkeinConfig \{([\s\S]*?)\n\}/.exec(readFileSync(join(root, "src", "SkeinConfig.ts"), "utf8"))
for (const [, setting] of (settingsInterface?.[1] ?? "").matchAll(/^  readonly (\w+)\??:/gm)) {
  if (!new RegExp(`^\\|[^|\\n]*\`${setting}\``, "m").test(configDoc)) {
    console.warn(`[check-docs] docs/configuration.md: no row for the setting ${setting} (src/SkeinConfig.ts)`)
  }
}

// ---------------------------------------------------------------------------------------------
// 4. The README's test command is what CI runs: the `npm ...` steps of .ci/run, in order

const readme = readFileSync(join(root, "README.md"), "utf8")
const testCommand = /^# The tests[^\n]*\n(.+)$/m.exec(readme)?.[1]
if (testCommand === undefined) {
  problems.push("README.md: no \"# The tests\" command line (the set-up section's second command)")
} else {
  const readmeSteps = testCommand.split("&&").map((step) => step.trim())
  const ciSteps = readFileSync(join(root, ".ci", "run"), "utf8").split("\n").map((line) => line.trim())
    .filter((line) => line.startsWith("npm "))
  if (readmeSteps.join(" && ") !== ciSteps.join(" && ")) {
    problems.push(`README.md: the test command (${readmeSteps.join(" && ")}) is not what .ci/run runs (${ciSteps.join(" && ")})`)
  }
}

if (problems.length > 0) {
  console.error(problems.join("\n"))
  console.error(`[check-docs] ${problems.length} problem(s) in ${files.length} files (${checked} TypeScript blocks, ${links} relative links)`)
  process.exit(1)
}
console.log(`[check-docs] ${files.length} files: ${checked} TypeScript blocks type-check (${skipped} marked no-check), ${links} relative links resolve`)
