/**
 * ============================================================================================
 *  SKEIN ADAPTER: skein-eos, skein-alos (Node), and skein-eos-bun, skein-eos-deno (issue 36).
 *
 *  Setup builds dist/ (bench/lib/build.ts); each run spawns
 *                node --import tsx bench/apps/skein-count.ts --mode eos|alos
 *                     --brokers B --input T --output T --group G --state-dir D --commit-interval-ms N
 *  or, for the Bun and Deno rows, the same app with the same arguments under the runtimes the
 *  project installs from npm (package.json devDependencies `bun`, `deno`; as test:package and the
 *  chaos harness run them):
 *                node_modules/.bin/bun bench/apps/skein-count.ts --mode eos ...
 *                node_modules/.bin/deno run -A bench/apps/skein-count.ts --mode eos ...
 *  Each runtime compiles the app's own TypeScript itself (tsx for Node); Skein comes from the one
 *  build, dist/, for all three, so the rows differ by the runtime only.
 *  The app must follow the contender protocol described in bench/contenders/types.ts:
 *  count per key, output value = running count as a decimal string, commit offsets to --group,
 *  run until SIGTERM/SIGKILL; optionally print {"event":"first-read"|"restore-start"|"restore-end"}
 *  JSON lines on stdout.
 *
 *  --mode eos runs SkeinConfig processingGuarantee "exactly-once", --mode alos "at-least-once"
 *  (with commitInterval = --commit-interval-ms). The harness's output check accepts at-least-once:
 *  duplicates are reported in the output-check column ("complete (+d dup)"), not as a failure.
 *
 *  skein-eos also runs the windowed job (`--job windowed`): bench/apps/skein-windowed.ts, Skein's
 *  stream DSL, with the same arguments plus --grace-ms (bench/contenders/types.ts WindowedAppSpec),
 *  and the enrichment job (`--job enrichment`): bench/apps/skein-enrichment.ts, plus --table.
 *
 *  The app loads Skein's build (dist/, its types from src/index.ts). While the app (or the
 *  Skein API it needs) is missing, a contender is reported as "unavailable: <reason>" in the
 *  results table.
 * ============================================================================================
 */
import { execFile } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { promisify } from "node:util"
import { buildSkein } from "../lib/build.ts"
import { appArgs } from "./types.ts"
import type { Command } from "../lib/proc.ts"
import type { Availability, EnrichmentAppSpec, ProcessContender, SetupContext, WindowedAppSpec } from "./types.ts"

const APP = join("bench", "apps", "skein-count.ts")

/** One build per benchmark run, shared by the Skein contenders. */
let built: Promise<void> | undefined

/** Skein's build (dist/), once per benchmark run for every Skein contender (also bench/contenders/postgres.ts). */
export const buildOnce = (root: string): Promise<void> => (built ??= buildSkein(root))

/** The runtime a Skein row runs on: Node (tsx for the app's TypeScript), or Bun or Deno from npm. */
export type Runtime = "node" | "bun" | "deno"

/** The npm-installed runtime's executable, as test:package and the chaos harness run it. */
const runtimeBinary = (runtime: "bun" | "deno"): string => join(process.cwd(), "node_modules", ".bin", runtime)

/** The runtime's version for the report: Node's own, Bun's and Deno's from their npm packages. */
const runtimeVersion = (runtime: Runtime): string => {
  if (runtime === "node") return process.version.replace(/^v/, "")
  try {
    const pkg = JSON.parse(readFileSync(join(process.cwd(), "node_modules", runtime, "package.json"), "utf8")) as { readonly version?: unknown }
    return typeof pkg.version === "string" ? pkg.version : "(version unknown)"
  } catch {
    return "(not installed)"
  }
}

/** Bun or Deno answers `--version`; otherwise the reason, with the fix. */
const probeRuntime = async (runtime: "bun" | "deno"): Promise<Availability> => {
  const bin = runtimeBinary(runtime)
  if (!existsSync(bin)) {
    return { ok: false, reason: `${bin} is missing: run npm install (package.json's devDependency ${runtime} provides it)` }
  }
  return promisify(execFile)(bin, ["--version"], { timeout: 30_000 }).then(
    (): Availability => ({ ok: true }),
    (e: unknown): Availability => ({ ok: false, reason: `${bin} --version failed: ${String(e).slice(0, 300)}` }),
  )
}

const probe = async (ctx: SetupContext, mode: "eos" | "alos", runtime: Runtime): Promise<Availability> => {
  if (runtime !== "node") {
    const r = await probeRuntime(runtime)
    if (!r.ok) return r
  }
  let exported: ReadonlyArray<string> = []
  let mod: Record<string, unknown> = {}
  try {
    mod = (await import(pathToFileURL(join(ctx.root, "src", "index.ts")).href)) as Record<string, unknown>
    exported = Object.keys(mod)
  } catch (e) {
    return { ok: false, reason: `src/index.ts does not load: ${String(e).slice(0, 200)}` }
  }
  if (!existsSync(join(ctx.root, APP))) {
    return {
      ok: false,
      reason:
        exported.length === 0
          ? `Skein runtime not ready: src/index.ts exports nothing yet, so ${APP} is not written`
          : `${APP} not written yet (src/index.ts now exports: ${exported.slice(0, 8).join(", ")})`,
    }
  }
  try {
    await buildOnce(ctx.root)
  } catch (e) {
    return { ok: false, reason: String(e).slice(0, 400) }
  }
  if (mode === "alos") {
    // An older Skein (exactly-once only) has no processing-guarantee setting to switch.
    const config = mod["SkeinConfig"] as { readonly defaults?: Record<string, unknown> } | undefined
    if (config?.defaults?.["processingGuarantee"] === undefined) {
      return {
        ok: false,
        reason: "Skein runs exactly-once only (SkeinConfig has no processingGuarantee setting)",
      }
    }
  }
  return { ok: true }
}

const WINDOWED_APP = join("bench", "apps", "skein-windowed.ts")
const ENRICHMENT_APP = join("bench", "apps", "skein-enrichment.ts")

/** Node's flags of every Skein run on Node (Bun and Deno take none): the CPU profile and the diagnosis flags of the environment. */
const nodeFlags = (): ReadonlyArray<string> => [
  // SKEIN_BENCH_CPU_PROF=<dir>: a V8 CPU profile of each Skein run, for `node --cpu-prof` analysis.
  ...(process.env["SKEIN_BENCH_CPU_PROF"] ? ["--cpu-prof", `--cpu-prof-dir=${process.env["SKEIN_BENCH_CPU_PROF"]}`] : []),
  // SKEIN_BENCH_NODE_FLAGS="<flags>": more node flags for each Skein run, for diagnosis only
  // (e.g. "--trace-gc"; node refuses those in NODE_OPTIONS). Unset in the benchmark.
  ...(process.env["SKEIN_BENCH_NODE_FLAGS"] ?? "").split(" ").filter((f) => f !== ""),
]

/** Node's flags for an entry point, or the Bun/Deno command line running it (the same app, the same build). */
const commandFor = (runtime: Runtime, app: string, args: ReadonlyArray<string>): Command => {
  switch (runtime) {
    case "node":
      return { cmd: process.execPath, args: [...nodeFlags(), "--import", "tsx", app, ...args] }
    case "bun":
      return { cmd: runtimeBinary("bun"), args: [app, ...args] }
    case "deno":
      // deno.json (repository root) has nodeModulesDir "manual": Deno resolves effect, kafkajs
      // (patched) and classic-level from the same node_modules as Node and Bun.
      return { cmd: runtimeBinary("deno"), args: ["run", "-A", app, ...args], env: { DENO_NO_UPDATE_CHECK: "1" } }
  }
}

const runtimeLabel = (runtime: Runtime): string =>
  `${{ node: "Node", bun: "Bun", deno: "Deno" }[runtime]} ${runtimeVersion(runtime)}${runtime === "node" ? "" : ` (node_modules/.bin/${runtime})`}`

const skein = (mode: "eos" | "alos", runtime: Runtime): ProcessContender => ({
  kind: "process",
  name: `skein-${mode}${runtime === "node" ? "" : `-${runtime}`}`,
  description:
    (mode === "eos"
      ? runtime === "node"
        ? "Skein exactly-once (transactions, changelog-backed store)"
        : "Skein exactly-once: skein-eos's app and build (dist/)"
      : "Skein at-least-once (no transactions, offsets committed every --commit-interval-ms after acks, changelog-backed store)") +
    `; ${runtimeLabel(runtime)}, 1 thread`,
  hasState: true,
  restartPhase: mode === "eos",
  setup: (ctx) => probe(ctx, mode, runtime),
  command: (s) => commandFor(runtime, APP, ["--mode", mode, ...appArgs(s, { stateful: true })]),
  // The windowed and enrichment jobs (bench/apps/skein-windowed.ts, skein-enrichment.ts: Skein's stream DSL) run exactly-once only.
  ...(mode === "eos"
    ? {
        windowedDescription:
          "Skein exactly-once, stream DSL: groupBy (repartition topic) → windowedBy(TimeWindows 1 min + grace) → count({ emit: \"onWindowClose\" }); " +
          `${runtimeLabel(runtime)}, 1 thread`,
        windowed: (s: WindowedAppSpec) =>
          commandFor(runtime, WINDOWED_APP, [...appArgs(s, { stateful: true }), "--grace-ms", String(s.graceMs)]),
        enrichmentDescription:
          "Skein exactly-once, stream DSL: KStream.leftJoin(KTable.from(table topic)) (LevelDB + changelog); " +
          `${runtimeLabel(runtime)}, 1 thread`,
        enrichment: (s: EnrichmentAppSpec) =>
          commandFor(runtime, ENRICHMENT_APP, [...appArgs(s, { stateful: true }), "--table", s.table]),
      }
    : {}),
})

export const skeinEos = skein("eos", "node")
export const skeinAlos = skein("alos", "node")
/** skein-eos's app and build on Bun (issue 36). */
export const skeinEosBun = skein("eos", "bun")
/** skein-eos's app and build on Deno (issue 36). */
export const skeinEosDeno = skein("eos", "deno")
