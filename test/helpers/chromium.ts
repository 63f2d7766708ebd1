/**
 * The Chromium a browser test drives (through playwright-core, which downloads no browser):
 * `CHROMIUM_PATH` when set, else the first of the usual system paths (Debian's `chromium`
 * package installs /usr/bin/chromium; scripts/ci-preflight.sh installs it on CI). None found
 * is an error that says how to install one, never a skipped test.
 */
import { existsSync } from "node:fs"

const candidates: ReadonlyArray<string> = [
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
  "/usr/bin/google-chrome-stable",
  "/usr/bin/google-chrome",
  "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
  "/Applications/Chromium.app/Contents/MacOS/Chromium"
]

/** The path of a Chromium executable, or an Error naming what to install. */
export const findChromium = (): string => {
  const configured = process.env["CHROMIUM_PATH"]
  if (configured !== undefined && configured !== "") {
    if (!existsSync(configured)) throw new Error(`CHROMIUM_PATH=${configured}: no such file`)
    return configured
  }
  const found = candidates.find((path) => existsSync(path))
  if (found === undefined) {
    throw new Error(
      `No Chromium for the browser test (looked at ${candidates.join(", ")}): install it ` +
        "(Debian/Ubuntu: apt-get install -y --no-install-recommends chromium) or set CHROMIUM_PATH"
    )
  }
  return found
}
