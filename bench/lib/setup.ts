/**
 * Idempotent, cached setup steps: Maven jar folders, javac, the Python venv.
 * Each step writes a stamp (hash of its inputs) and is skipped while the stamp matches.
 */
import { execFile } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import type { Availability } from "../contenders/types.ts"

export const exec = (
  cmd: string,
  args: ReadonlyArray<string>,
  opts: { cwd?: string; timeoutMs?: number } = {},
): Promise<{ code: number; out: string }> =>
  new Promise((resolve) => {
    execFile(
      cmd,
      [...args],
      { cwd: opts.cwd, timeout: opts.timeoutMs ?? 600_000, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === "number" ? err.code : 1
        resolve({ code, out: `${stdout}${stderr}` })
      },
    )
  })

const hashOf = (parts: ReadonlyArray<string>): string => {
  const h = createHash("sha256")
  for (const p of parts) {
    if (!existsSync(p)) h.update(p)
    else if (statSync(p).isDirectory()) h.update(readdirSync(p).sort().join("\n"))
    else h.update(readFileSync(p))
  }
  return h.digest("hex").slice(0, 16)
}

const stamped = (dir: string, hash: string): boolean => {
  const f = join(dir, ".stamp")
  return existsSync(f) && readFileSync(f, "utf8") === hash
}

const stamp = (dir: string, hash: string): void => writeFileSync(join(dir, ".stamp"), hash)

const tail = (s: string, n = 400): string => s.trim().split("\n").slice(-6).join(" | ").slice(-n)

/** `mvn dependency:copy-dependencies` of a pom into `dir` (cached by the pom's hash). */
export const mavenJars = async (pom: string, dir: string, log: (m: string) => void): Promise<Availability> => {
  const h = hashOf([pom])
  if (stamped(dir, h)) return { ok: true }
  log(`fetching jars for ${pom} into ${dir} (Maven Central)`)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  const r = await exec("mvn", [
    "-B",
    "-q",
    "-f",
    pom,
    "dependency:copy-dependencies",
    "-DincludeScope=runtime",
    `-DoutputDirectory=${dir}`,
  ])
  if (r.code !== 0) return { ok: false, reason: `mvn failed: ${tail(r.out)}` }
  stamp(dir, h)
  return { ok: true }
}

/** javac the sources into `outDir` against the jars of `jarDir` (cached by source hash). */
export const javac = async (
  sources: ReadonlyArray<string>,
  jarDir: string,
  outDir: string,
  log: (m: string) => void,
): Promise<Availability> => {
  const h = hashOf([...sources, jarDir])
  if (stamped(outDir, h)) return { ok: true }
  log(`compiling ${sources.join(" ")}`)
  rmSync(outDir, { recursive: true, force: true })
  mkdirSync(outDir, { recursive: true })
  const r = await exec("javac", ["-d", outDir, "-cp", `${jarDir}/*`, ...sources])
  if (r.code !== 0) return { ok: false, reason: `javac failed: ${tail(r.out)}` }
  stamp(outDir, h)
  return { ok: true }
}

/** bench/.venv with the pinned requirements (cached by the requirements file's hash). */
export const pythonVenv = async (venv: string, requirements: string, log: (m: string) => void): Promise<Availability> => {
  const h = hashOf([requirements])
  if (stamped(venv, h) && existsSync(join(venv, "bin", "python"))) return { ok: true }
  log(`creating ${venv} and installing ${requirements} (PyPI)`)
  if (!existsSync(join(venv, "bin", "python"))) {
    const py = process.env["PYTHON"] ?? "python3"
    const r = await exec(py, ["-m", "venv", venv])
    if (r.code !== 0) return { ok: false, reason: `python -m venv failed: ${tail(r.out)}` }
  }
  const r = await exec(join(venv, "bin", "pip"), ["install", "-q", "-r", requirements])
  if (r.code !== 0) return { ok: false, reason: `pip install failed: ${tail(r.out)}` }
  stamp(venv, h)
  return { ok: true }
}

export const hasFiles = (dir: string): boolean => existsSync(dir) && readdirSync(dir).length > 0
