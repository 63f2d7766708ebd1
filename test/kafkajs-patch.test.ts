/**
 * An unpatched kafkajs must not go unnoticed.
 *
 * `patches/kafkajs+2.2.4.patch` is applied by the `postinstall` script, which `npm ci
 * --ignore-scripts`, pnpm 10, Bun (untrusted dependencies) and Deno skip: kafkajs then runs its
 * original files and multi-broker sends can duplicate records inside committed transactions.
 * Skein checks the installed files before it builds a Kafka client and fails with
 * `ConfigurationError` naming the fix.
 *
 * The unpatched install is made the way those installs make it: Skein's own files (package.json,
 * src, scripts, patches) in a temporary directory, every dependency linked from this project
 * except kafkajs, which is unpacked from the registry tarball (`npm pack kafkajs@2.2.4`, from the
 * npm cache): the files as published, no install script run.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as PatchCheck from "../src/internal/kafka/patchCheck.ts"
import { ConfigurationError } from "../src/SkeinError.ts"
import { brokers } from "./utils/broker.ts"

const projectRoot = fileURLToPath(new URL("..", import.meta.url))
const patchedFiles = ["src/consumer/filterAbortedMessages.js", "src/producer/sendMessages.js", "src/producer/groupMessagesPerPartition.js"]

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs a command to completion (never fails: the exit code is part of the result). */
const run = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: Record<string, string>; readonly timeout?: number }
): Effect.Effect<Ran> =>
  Effect.async<Ran>((resume) => {
    const child = execFile(
      command,
      [...args],
      { cwd: options.cwd, env: { ...process.env, ...options.env }, timeout: options.timeout ?? 60_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : null
        resume(Effect.succeed({ code, stdout, stderr }))
      }
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** A Skein install whose kafkajs is the published 2.2.4, unpatched; removed with the scope. */
const unpatchedInstall = Effect.acquireRelease(
  Effect.gen(function*() {
    const root = yield* Effect.promise(() => fs.mkdtemp(path.join(os.tmpdir(), "skein-unpatched-")))
    yield* Effect.promise(async () => {
      for (const entry of ["package.json", "deno.json", "src", "scripts", "patches"]) {
        await fs.cp(path.join(projectRoot, entry), path.join(root, entry), { recursive: true })
      }
      const modules = path.join(root, "node_modules")
      await fs.mkdir(modules)
      for (const entry of await fs.readdir(path.join(projectRoot, "node_modules"))) {
        if (entry !== "kafkajs") await fs.symlink(path.join(projectRoot, "node_modules", entry), path.join(modules, entry))
      }
    })
    const packed = yield* run("npm", ["pack", "kafkajs@2.2.4", "--prefer-offline", "--pack-destination", root], {
      cwd: root
    })
    assert.strictEqual(packed.code, 0, packed.stderr)
    yield* Effect.promise(() => fs.mkdir(path.join(root, "node_modules", "kafkajs")))
    const unpacked = yield* run(
      "tar",
      ["xzf", path.join(root, "kafkajs-2.2.4.tgz"), "-C", path.join(root, "node_modules", "kafkajs"), "--strip-components=1"],
      { cwd: root }
    )
    assert.strictEqual(unpacked.code, 0, unpacked.stderr)
    // The project's own checker agrees that this is the original kafkajs.
    const checked = yield* run("node", ["scripts/patch-kafkajs.mjs", "--check"], { cwd: root })
    assert.strictEqual(checked.code, 1, checked.stdout + checked.stderr)
    assert.include(checked.stdout, "src/producer/sendMessages.js: original")
    return root
  }),
  (root) => Effect.promise(() => fs.rm(root, { recursive: true, force: true }))
)

/** The failure of a check that must fail (a success fails the test). */
const configurationError = (effect: Effect.Effect<void, ConfigurationError>): Effect.Effect<ConfigurationError> =>
  Effect.flip(effect).pipe(
    Effect.catchAll(() => Effect.dieMessage("expected the check to fail with ConfigurationError")),
    Effect.tap((error) => assert.instanceOf(error, ConfigurationError))
  )

describe("kafkajs patch check", () => {
  it.effect("passes on this project's install (postinstall applied the patch)", () =>
    Effect.gen(function*() {
      yield* PatchCheck.check(projectRoot)
      yield* PatchCheck.verifyPatched
    }))

  it.scoped("fails on an install without the patch, naming every unpatched file and the fix", () =>
    Effect.gen(function*() {
      const root = yield* unpatchedInstall
      const error = yield* configurationError(PatchCheck.check(root))
      for (const file of patchedFiles) assert.include(error.problem, file)
      assert.include(error.problem, "not patched")
      assert.include(error.fix, `node ${path.join(root, "scripts", "patch-kafkajs.mjs")}`)
      // First the setting of the tool that made this tree (npm: a flat node_modules under Node),
      // then the others'.
      assert.include(error.fix, "To patch at every install with npm: `npm rebuild skein`")
      assert.include(error.fix, "allowBuilds")
      assert.include(error.fix, "trustedDependencies")
      assert.include(error.fix, "--allow-scripts=npm:skein")

      // The fix it names works: after running the script the same install passes.
      const patched = yield* run("node", [path.join(root, "scripts", "patch-kafkajs.mjs")], { cwd: os.tmpdir() })
      assert.strictEqual(patched.code, 0, patched.stderr)
      yield* PatchCheck.check(root)
    }))

  it.scoped("fails on a kafkajs file that is neither the original nor the patched one", () =>
    Effect.gen(function*() {
      const root = yield* unpatchedInstall
      const applied = yield* run("node", ["scripts/patch-kafkajs.mjs"], { cwd: root })
      assert.strictEqual(applied.code, 0, applied.stderr)
      yield* PatchCheck.check(root)
      const edited = path.join(root, "node_modules", "kafkajs", "src", "producer", "sendMessages.js")
      yield* Effect.promise(() => fs.appendFile(edited, "// local edit\n"))
      const error = yield* configurationError(PatchCheck.check(root))
      assert.include(error.problem, "src/producer/sendMessages.js")
      assert.include(error.problem, "neither")
      assert.notInclude(error.problem, "groupMessagesPerPartition.js")
    }))

  // The user's way: a program that runs a transformer, started from the unpatched install, under
  // each runtime. It must stop before any broker work with the error and a non-zero exit code.
  const probe = `
import { Effect, Schema } from "effect"
import { Runner, SkeinConfig, Topic, Transformer } from "./src/index.ts"

const Input = Topic.make({ name: "kafkajs-patch-probe-" + Date.now(), key: Schema.String, value: Schema.String })
const Echo = Transformer.stateless({ name: "echo", inputs: [Input], transform: () => Effect.succeed({}) })

Runner.run(Echo).pipe(
  Effect.scoped,
  Effect.provide(SkeinConfig.layerConfig()),
  Effect.runPromise
).then(
  () => process.exit(0),
  (error) => {
    console.error(String(error))
    process.exit(1)
  }
)
`
  const runtimes: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
    ["node (tsx)", ["tsx", "probe.ts"]],
    ["bun", ["bun", "probe.ts"]],
    ["deno", ["deno", "run", "-A", "probe.ts"]]
  ]
  for (const [runtime, args] of runtimes) {
    it.scoped(`a program run with ${runtime} from the unpatched install exits non-zero with the fix`, () =>
      Effect.gen(function*() {
        const root = yield* unpatchedInstall
        yield* Effect.promise(() => fs.writeFile(path.join(root, "probe.ts"), probe))
        const ran = yield* run("npx", [...args], {
          cwd: root,
          env: { SKEIN_APPLICATION_ID: "kafkajs-patch-probe", KAFKA_BROKERS: brokers().join(",") },
          timeout: 60_000
        })
        assert.notStrictEqual(ran.code, 0, ran.stdout + ran.stderr)
        assert.include(ran.stderr, "ConfigurationError")
        assert.include(ran.stderr, "kafkajs")
        assert.include(ran.stderr, "not patched")
        assert.include(ran.stderr, "patch-kafkajs.mjs")
      }), 90_000)
  }
})
