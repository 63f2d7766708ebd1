/**
 * The kafkajs Skein runs on, with Skein's patch applied.
 *
 * Exactly-once rests on the fixes in `patches/kafkajs+<version>.patch` (see
 * `scripts/patch-kafkajs.mjs` for what each fixes). Writing them into
 * `node_modules` from an install script is fragile: `npm ci
 * --ignore-scripts`, pnpm 10+ (builds not allowed), pnpm's side-effects cache
 * (a second install of the same version restores the package without running
 * its script), Bun's untrusted dependencies and Deno all leave the original
 * files in place. So Skein applies the patch when it loads kafkajs: each file
 * the patch changes is put into the CommonJS module cache, compiled from its
 * patched text on its first `require`, before kafkajs's entry point is
 * required, so kafkajs's own `require`s get the patched modules (a patched file
 * requiring another patched file too). Files already patched on disk are loaded as they
 * are. A file that is neither the original nor the patched text (another
 * kafkajs version, a local edit) fails with `ConfigurationError`, and so does a
 * runtime whose module cache does not take the patched modules: there is
 * deliberately no switch to skip this, exactly-once must not be weakened
 * silently.
 *
 * Only `node:fs`, `node:module` and `node:path`, so it behaves the same on
 * Node, Bun and Deno. Nothing in Skein imports kafkajs's values directly; they
 * come from `load`.
 *
 * @internal
 */
import { Effect, Schema } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { createRequire, Module } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type * as KafkaJSTypes from "kafkajs"
import { ConfigurationError } from "../../SkeinError.ts"

/** The kafkajs module: its exports, as its type declarations describe them. */
export type KafkaJS = typeof KafkaJSTypes

/** One file of the patch: its content before and after. */
export interface FilePatch {
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
export const parsePatch = (text: string): ReadonlyArray<FilePatch> | undefined => {
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

/** How the patch reached the loaded kafkajs. */
export type Applied =
  /** Every patched file was already patched on disk (Skein's repository runs the script at `npm ci`). */
  | "on-disk"
  /** The files on disk are the originals; Skein compiled the patched ones into the module cache. */
  | "in-memory"

/** A loaded kafkajs and how its patch was applied. */
export interface Loaded {
  readonly kafkajs: KafkaJS
  readonly applied: Applied
  /** The kafkajs package directory. */
  readonly dir: string
  readonly version: string
}

/** The patched files of a kafkajs install whose files were checked: their path and patched text. */
interface Checked {
  readonly dir: string
  readonly version: string
  readonly files: ReadonlyArray<FilePatch>
  /** The files whose content on disk is the original (the rest are patched on disk). */
  readonly original: ReadonlyArray<string>
}

const reinstallFix = (dir: string): string =>
  `Reinstall kafkajs 2.2.4 unmodified (rm -rf ${dir}, then your package manager's install)`

/**
 * Checks the kafkajs that the Skein package at `root` (the directory of its
 * package.json) resolves against `root/patches/kafkajs+<installed version>.patch`:
 * every file the patch changes must be either its original or its patched text.
 */
const checkFiles = (root: string): Effect.Effect<Checked, ConfigurationError> =>
  Effect.gen(function*() {
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
          fix: reinstallFix(dir)
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
        problem: `kafkajs ${version} at ${dir} cannot be patched: ${unknown.join(", ")} match neither ` +
          `the original files nor patches/${patchName}, so exactly-once would not hold`,
        fix: reinstallFix(dir)
      })
    }
    return { dir, version, files, original }
  })

/**
 * A module whose source is compiled on its first `require`, not when it is
 * made: its `exports` is a getter until then. Every patched module is in the
 * module cache before any of them runs, so a patched file that requires
 * another (`sendMessages.js` requires `groupMessagesPerPartition.js`) gets the
 * patched one whatever the order of the patch, as kafkajs's own `require`s do.
 * Runs the source with `Module.prototype._compile`, which Node, Bun and Deno
 * all have; `compiled` tells whether it ran.
 */
const lazyModule = (file: string, source: string): { readonly module: Module; readonly compiled: () => boolean } => {
  const module = new Module(file)
  module.filename = file
  module.paths = createRequire(file).resolve.paths("kafkajs") ?? []
  const compileMethod: unknown = Reflect.get(module, "_compile")
  if (typeof compileMethod !== "function") {
    throw new Error("this runtime's node:module has no Module.prototype._compile")
  }
  let compiled = false
  Object.defineProperty(module, "exports", {
    configurable: true,
    enumerable: true,
    get() {
      // A data property again before the source runs: the module assigns `module.exports`, and
      // a circular require of it meanwhile gets its exports so far, as with any module.
      Object.defineProperty(module, "exports", { configurable: true, enumerable: true, writable: true, value: {} })
      module.loaded = false
      compiled = true
      Reflect.apply(compileMethod, module, [source, file])
      module.loaded = true
      return module.exports
    }
  })
  // Loaded, so a `require` of it takes `exports` from the cache (and runs the getter).
  module.loaded = true
  return { module, compiled: () => compiled }
}

/**
 * Loads kafkajs with every patched file compiled from its patched text.
 * A kafkajs the application loaded before (from the original files) is
 * dropped from the module cache first, so Skein gets an instance of its own;
 * the application keeps the objects it already has.
 */
const loadPatchedInMemory = (root: string, checked: Checked): Effect.Effect<KafkaJS, ConfigurationError> =>
  Effect.try({
    try: () => {
      const require = createRequire(path.join(root, "package.json"))
      for (const key of Object.keys(require.cache)) {
        if (key.startsWith(checked.dir + path.sep)) delete require.cache[key]
      }
      // Every patched module is in the cache before kafkajs runs any of them (see lazyModule)
      const modules = checked.files.map(({ file, patched }) => {
        const filename = path.join(checked.dir, file)
        const lazy = lazyModule(filename, patched)
        require.cache[filename] = lazy.module
        return { filename, ...lazy }
      })
      const kafkajs: KafkaJS = require("kafkajs")
      const notTaken = modules.filter(({ filename, module }) => require.cache[filename] !== module)
      if (notTaken.length > 0) {
        throw new Error(`the module cache did not keep ${notTaken.map(({ filename }) => filename).join(", ")}`)
      }
      // A patched file kafkajs did not require on load runs now (its getter), so none runs later.
      for (const { module } of modules) Reflect.get(module, "exports")
      const notRun = modules.filter(({ compiled }) => !compiled())
      // Where the runtime records a module's children (Node does), none may be an original file.
      const patchedFiles = new Set(modules.map(({ filename }) => filename))
      const inside = checked.dir + path.sep
      const original = Object.entries(require.cache).flatMap(([key, module]) =>
        key.startsWith(inside) && module !== undefined && Array.isArray(module.children)
          ? module.children.filter((child) => patchedFiles.has(child.filename) && child !== require.cache[child.filename])
            .map((child) => `${key} required the original ${child.filename}`)
          : []
      )
      if (notRun.length > 0 || original.length > 0) {
        throw new Error(
          [...notRun.map(({ filename }) => `${filename} did not run`), ...original].join(", ")
        )
      }
      return kafkajs
    },
    catch: (error) =>
      new ConfigurationError({
        problem: `Skein could not apply its kafkajs patch in memory (${
          error instanceof Error ? error.message : String(error)
        }), and kafkajs ${checked.version} at ${checked.dir} has the original ${checked.original.join(", ")}`,
        fix: `Patch the files on disk: node ${path.join(root, "scripts", "patch-kafkajs.mjs")}`
      })
  })

/**
 * Loads the kafkajs that the Skein package at `root` (the directory of its
 * package.json) resolves, with Skein's patch: as installed when the files are
 * patched on disk, otherwise compiled from the patch into the module cache.
 */
export const loadFrom = (root: string): Effect.Effect<Loaded, ConfigurationError> =>
  Effect.gen(function*() {
    const checked = yield* checkFiles(root)
    const { dir, version } = checked
    if (checked.original.length === 0) {
      const kafkajs: KafkaJS = createRequire(path.join(root, "package.json"))("kafkajs")
      return { kafkajs, applied: "on-disk", dir, version }
    }
    const kafkajs = yield* loadPatchedInMemory(root, checked)
    return { kafkajs, applied: "in-memory", dir, version }
  })

/**
 * The root of the Skein package this module belongs to (`src/` and `dist/`
 * are both two levels below it), or the URL it was loaded from when that is
 * not a file (e.g. JSR's https modules): no node_modules tree to load from then.
 */
const packageRoot = new URL("../../../", import.meta.url)

const loadFromPackageRoot = (root: URL): Effect.Effect<Loaded, ConfigurationError> =>
  root.protocol === "file:"
    ? loadFrom(fileURLToPath(root))
    : new ConfigurationError({
      problem: `Skein is loaded from ${root.href}, not from an installed package, so it cannot load kafkajs ` +
        "with Skein's patch",
      fix: "Install Skein from npm (npm install skein, or deno add npm:skein) and import it from there"
    })

/**
 * Skein's kafkajs, with the patch applied (see `loadFrom`). Loaded once per
 * process, on first use; the result is kept.
 */
export const loaded: Effect.Effect<Loaded, ConfigurationError> = Effect.runSync(
  Effect.cached(loadFromPackageRoot(packageRoot))
)

/** Skein's kafkajs module (see `loaded`). */
export const load: Effect.Effect<KafkaJS, ConfigurationError> = Effect.map(loaded, ({ kafkajs }) => kafkajs)

/**
 * Skein's kafkajs module where a Kafka client already exists: the client was
 * built from it, so the load succeeded (and is cached).
 */
export const ofExistingClient: Effect.Effect<KafkaJS> = Effect.orDie(load)
