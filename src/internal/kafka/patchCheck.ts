/**
 * The kafkajs patch check.
 *
 * Exactly-once rests on the fixes in `patches/kafkajs+<version>.patch`, which
 * `scripts/patch-kafkajs.mjs` applies from `postinstall`. Installs that skip
 * install scripts (`npm ci --ignore-scripts`, pnpm 10+, Bun's untrusted
 * dependencies, Deno) leave the original kafkajs files in place, and a send
 * spanning several brokers can then duplicate or drop records without any
 * error. Before a Kafka client is built, every file the patch changes is
 * compared with the patch's new side; any other content fails with
 * `ConfigurationError` naming the fix. There is deliberately no switch to
 * skip it: exactly-once must not be weakened silently.
 *
 * Plain `node:fs` and `node:module` (kafkajs is located with `createRequire`,
 * the way it is loaded), so the check behaves the same on Node, Bun and Deno.
 *
 * @internal
 */
import { Effect, Schema } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { ConfigurationError } from "../../SkeinError.ts"

/** One file of the patch: its content before and after. */
interface FilePatch {
  /** Path inside the kafkajs package, e.g. `src/producer/sendMessages.js`. */
  readonly file: string
  readonly original: string
  readonly patched: string
}

const packagePrefix = "node_modules/kafkajs/"
const hunkHeader = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/

const joinLines = (lines: ReadonlyArray<string>, endsWithNewline: boolean): string =>
  lines.join("\n") + (endsWithNewline && lines.length > 0 ? "\n" : "")

/**
 * The files of a patch made of whole-file hunks (`git diff -U100000`, the
 * format `scripts/patch-kafkajs.mjs` requires), with both sides of each.
 * `undefined` when the patch is not of that form.
 */
const parsePatch = (text: string): ReadonlyArray<FilePatch> | undefined => {
  const lines = text.split("\n")
  const files: Array<FilePatch> = []
  let target: string | undefined
  let i = 0
  while (i < lines.length) {
    const line = lines[i]
    const header = hunkHeader.exec(line)
    if (line.startsWith("+++ ")) {
      target = line.slice(4).replace(/^b\//, "")
      i++
    } else if (header !== null) {
      if (target === undefined || !target.startsWith(packagePrefix)) return undefined
      if (Number(header[1]) > 1 || Number(header[3]) > 1) return undefined
      let oldLeft = header[2] === undefined ? 1 : Number(header[2])
      let newLeft = header[4] === undefined ? 1 : Number(header[4])
      const original: Array<string> = []
      const patched: Array<string> = []
      let originalEol = true
      let patchedEol = true
      let last: "old" | "new" | "both" = "both"
      i++
      while (i < lines.length && (oldLeft > 0 || newLeft > 0 || lines[i].startsWith("\\ "))) {
        const body = lines[i].slice(1)
        switch (lines[i][0]) {
          case " ":
            original.push(body)
            patched.push(body)
            oldLeft--
            newLeft--
            last = "both"
            break
          case "-":
            original.push(body)
            oldLeft--
            last = "old"
            break
          case "+":
            patched.push(body)
            newLeft--
            last = "new"
            break
          case "\\": // "\ No newline at end of file", about the line before it
            if (last !== "new") originalEol = false
            if (last !== "old") patchedEol = false
            break
          default:
            return undefined
        }
        i++
      }
      if (oldLeft !== 0 || newLeft !== 0) return undefined
      files.push({
        file: target.slice(packagePrefix.length),
        original: joinLines(original, originalEol),
        patched: joinLines(patched, patchedEol)
      })
      target = undefined
    } else {
      i++
    }
  }
  return files.length === 0 ? undefined : files
}

const Manifest = Schema.parseJson(Schema.Struct({ version: Schema.String }))

const readText = (file: string): string | undefined => {
  try {
    return readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

const readdirSafe = (dir: string): ReadonlyArray<string> => {
  try {
    return readdirSync(dir)
  } catch {
    return []
  }
}

/** The tools that install a node_modules tree, told apart by the tree's layout or the runtime. */
type Installer = "npm" | "pnpm" | "bun" | "deno"

/**
 * Which tool most likely installed the kafkajs at `dir`: pnpm and Deno keep
 * packages under `node_modules/.pnpm/` and `node_modules/.deno/` (or Deno's
 * own cache); a flat tree run by Bun was most likely installed by Bun.
 */
const installer = (dir: string): Installer => {
  const parts = dir.split(path.sep)
  if (parts.includes(".pnpm")) return "pnpm"
  if (parts.includes(".deno") || "Deno" in globalThis) return "deno"
  if (process.versions.bun !== undefined) return "bun"
  return "npm"
}

/**
 * How each tool runs Skein's install script in an existing tree, and the
 * setting that makes it run at every install (all checked by
 * `npm run test:package`).
 */
const allowInstallScript: Record<Installer, string> = {
  npm: "`npm rebuild skein`; npm runs it at install unless --ignore-scripts " +
    "(record the approval with `npm install-scripts approve skein`: package.json `allowScripts`)",
  pnpm: "`allowBuilds: { skein: true }` in pnpm-workspace.yaml, then `pnpm install`",
  bun: "`bun pm trust skein` (package.json `trustedDependencies`)",
  deno: "`deno install --allow-scripts=npm:skein`"
}

/** The setting for the tool that made the tree at `dir` first, then the others'. */
const allowInstallScriptFix = (dir: string): string => {
  const current = installer(dir)
  const others = (Object.keys(allowInstallScript) as Array<Installer>).filter((tool) => tool !== current)
  return `To patch at every install with ${current}: ${allowInstallScript[current]}. Other tools: ` +
    others.map((tool) => `${tool} ${allowInstallScript[tool]}`).join("; ")
}

/**
 * Checks the kafkajs that the Skein package at `root` (the directory of its
 * package.json) resolves: fails with `ConfigurationError` unless every file of
 * `root/patches/kafkajs+<installed version>.patch` has its patched content.
 */
export const check = (root: string): Effect.Effect<void, ConfigurationError> =>
  Effect.gen(function*() {
    const script = path.join(root, "scripts", "patch-kafkajs.mjs")
    const manifestPath = yield* Effect.try({
      try: () => createRequire(path.join(root, "package.json")).resolve("kafkajs/package.json"),
      catch: () =>
        new ConfigurationError({
          problem: `kafkajs cannot be found from ${root}`,
          fix: "Install Skein's dependencies (npm install)"
        })
    })
    const dir = path.dirname(manifestPath)
    const { version } = yield* Schema.decodeUnknown(Manifest)(readText(manifestPath)).pipe(
      Effect.mapError(() =>
        new ConfigurationError({
          problem: `${manifestPath} is not a readable package.json`,
          fix: `Reinstall kafkajs (rm -rf ${dir} && npm install), then run \`node ${script}\``
        })
      )
    )
    const patchName = `kafkajs+${version}.patch`
    const patchText = readText(path.join(root, "patches", patchName))
    if (patchText === undefined) {
      const available = readdirSafe(path.join(root, "patches"))
        .filter((name) => name.startsWith("kafkajs+")).join(", ")
      return yield* new ConfigurationError({
        problem: `kafkajs ${version} is installed (${dir}) but Skein has no patch for it (has: ${available || "none"})`,
        fix: "Install the kafkajs version Skein depends on (npm ls kafkajs shows what pulled in another)"
      })
    }
    const files = parsePatch(patchText)
    if (files === undefined) {
      return yield* new ConfigurationError({
        problem: `${path.join(root, "patches", patchName)} is not a whole-file patch of kafkajs`,
        fix: "Reinstall Skein"
      })
    }
    const original: Array<string> = []
    const unknown: Array<string> = []
    for (const { file, original: before, patched: after } of files) {
      const content = readText(path.join(dir, file))
      if (content === after) continue
      if (content === before) original.push(file)
      else unknown.push(file)
    }
    if (unknown.length > 0) {
      return yield* new ConfigurationError({
        problem: `kafkajs ${version} at ${dir} is not patched (${unknown.join(", ")} match neither ` +
          `the original files nor patches/${patchName})`,
        fix: `Reinstall kafkajs (rm -rf ${dir} && npm install), then run \`node ${script}\``
      })
    }
    if (original.length > 0) {
      return yield* new ConfigurationError({
        problem: `kafkajs ${version} at ${dir} is not patched (${original.join(", ")} are the original files: ` +
          "Skein's install script did not run), so exactly-once does not hold",
        fix: `Run \`node ${script}\` (or bun, or deno run -A) and restart. ${allowInstallScriptFix(dir)}`
      })
    }
  })

/**
 * The root of the Skein package this module belongs to (`src/` and `dist/`
 * are both two levels below it), or the URL it was loaded from when that is
 * not a file (e.g. JSR's https modules): no node_modules tree to check then.
 */
const packageRoot = new URL("../../../", import.meta.url)

const checkPackageRoot = (root: URL): Effect.Effect<void, ConfigurationError> =>
  root.protocol === "file:"
    ? check(fileURLToPath(root))
    : new ConfigurationError({
      problem: `Skein is loaded from ${root.href}, not from an installed package, so the kafkajs it uses ` +
        "cannot be checked for Skein's patch",
      fix: "Install Skein from npm (npm install skein, or deno add npm:skein) and import it from there"
    })

/**
 * Fails with `ConfigurationError` unless the kafkajs Skein loads carries
 * Skein's patch. Checked once per process; the result is kept.
 */
export const verifyPatched: Effect.Effect<void, ConfigurationError> = Effect.runSync(
  Effect.cached(checkPackageRoot(packageRoot))
)
