/**
 * ============================================================================================
 *  SKEIN ADAPTER: contenders 1 and 2 (skein-eos, skein-alos).
 *
 *  Setup builds dist/ (bench/lib/build.ts); each run spawns
 *                node --import tsx bench/apps/skein-count.ts --mode eos|alos
 *                     --brokers B --input T --output T --group G --state-dir D --commit-interval-ms N
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
 *  stream DSL, with the same arguments plus --grace-ms (bench/contenders/types.ts WindowedAppSpec).
 *
 *  The app loads Skein's build (dist/, its types from src/index.ts). While the app (or the
 *  Skein API it needs) is missing, a contender is reported as "unavailable: <reason>" in the
 *  results table.
 * ============================================================================================
 */
import { existsSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { buildSkein } from "../lib/build.ts"
import { appArgs } from "./types.ts"
import type { Availability, ProcessContender, SetupContext, WindowedAppSpec } from "./types.ts"

const APP = join("bench", "apps", "skein-count.ts")

/** One build per benchmark run, shared by the Skein contenders. */
let built: Promise<void> | undefined

const probe = async (ctx: SetupContext, mode: "eos" | "alos"): Promise<Availability> => {
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
    built ??= buildSkein(ctx.root)
    await built
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

/** Node's flags of every Skein run: the CPU profile and the diagnosis flags of the environment. */
const nodeFlags = (): ReadonlyArray<string> => [
  // SKEIN_BENCH_CPU_PROF=<dir>: a V8 CPU profile of each Skein run, for `node --cpu-prof` analysis.
  ...(process.env["SKEIN_BENCH_CPU_PROF"] ? ["--cpu-prof", `--cpu-prof-dir=${process.env["SKEIN_BENCH_CPU_PROF"]}`] : []),
  // SKEIN_BENCH_NODE_FLAGS="<flags>": more node flags for each Skein run, for diagnosis only
  // (e.g. "--trace-gc"; node refuses those in NODE_OPTIONS). Unset in the benchmark.
  ...(process.env["SKEIN_BENCH_NODE_FLAGS"] ?? "").split(" ").filter((f) => f !== ""),
]

const skein = (mode: "eos" | "alos"): ProcessContender => ({
  kind: "process",
  name: `skein-${mode}`,
  description:
    mode === "eos"
      ? "Skein exactly-once (transactions, changelog-backed store); Node, 1 thread"
      : "Skein at-least-once (no transactions, offsets committed every --commit-interval-ms after acks, changelog-backed store); Node, 1 thread",
  hasState: true,
  restartPhase: mode === "eos",
  setup: (ctx) => probe(ctx, mode),
  command: (s) => ({
    cmd: process.execPath,
    args: [
      ...nodeFlags(),
      "--import",
      "tsx",
      APP,
      "--mode",
      mode,
      ...appArgs(s, { stateful: true }),
    ],
  }),
  // The windowed job (bench/apps/skein-windowed.ts, Skein's stream DSL) runs exactly-once only.
  ...(mode === "eos"
    ? {
        windowedDescription:
          "Skein exactly-once, stream DSL: groupBy (repartition topic) → windowedBy(TimeWindows 1 min + grace) → count({ emit: \"onWindowClose\" }); Node, 1 thread",
        windowed: (s: WindowedAppSpec) => ({
          cmd: process.execPath,
          args: [...nodeFlags(), "--import", "tsx", WINDOWED_APP, ...appArgs(s, { stateful: true }), "--grace-ms", String(s.graceMs)],
        }),
      }
    : {}),
})

export const skeinEos = skein("eos")
export const skeinAlos = skein("alos")
