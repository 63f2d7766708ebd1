/**
 * ============================================================================================
 *  SKEIN ADAPTER: contenders 1 and 2 (skein-eos, skein-alos).
 *
 *  Each spawns   node --import tsx bench/apps/skein-count.ts --mode eos|alos
 *                     --brokers B --input T --output T --group G --state-dir D --commit-interval-ms N
 *  The app must follow the contender protocol described in bench/contenders/types.ts:
 *  count per key, output value = running count as a decimal string, commit offsets to --group,
 *  run until SIGTERM/SIGKILL; optionally print {"event":"first-read"|"restore-start"|"restore-end"}
 *  JSON lines on stdout.
 *
 *  The app is written against `import { ... } from "../../src/index.ts"` only once that API
 *  exists. Until bench/apps/skein-count.ts exists these contenders are reported as
 *  "unavailable: <reason>" in the results table.
 * ============================================================================================
 */
import { existsSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import type { Availability, ProcessContender, SetupContext } from "./types.ts"

const APP = join("bench", "apps", "skein-count.ts")

const probe = async (ctx: SetupContext): Promise<Availability> => {
  let exported: ReadonlyArray<string> = []
  try {
    const mod = (await import(pathToFileURL(join(ctx.root, "src", "index.ts")).href)) as Record<string, unknown>
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
  return { ok: true }
}

const skein = (mode: "eos" | "alos"): ProcessContender => ({
  kind: "process",
  name: `skein-${mode}`,
  description:
    mode === "eos"
      ? "Skein exactly-once (transactions, changelog-backed store); Node, 1 thread"
      : "Skein at-least-once (changelog-backed store); Node, 1 thread",
  hasState: true,
  setup: probe,
  command: (s) => ({
    cmd: process.execPath,
    args: [
      "--import",
      "tsx",
      APP,
      "--mode",
      mode,
      "--brokers",
      s.brokers,
      "--input",
      s.input,
      "--output",
      s.output,
      "--group",
      s.group,
      "--state-dir",
      s.stateDir,
      "--commit-interval-ms",
      String(s.commitIntervalMs),
    ],
  }),
})

export const skeinEos = skein("eos")
export const skeinAlos = skein("alos")
