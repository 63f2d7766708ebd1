/**
 * The documentation site (issue 35): built from docs/ with VitePress (`npm run docs:site`, here
 * into a temporary folder, offline), served on a local port, and opened in a real headless
 * Chromium (playwright-core drives the system's Chromium: test/helpers/chromium.ts). From the
 * home page it follows every link of the site: every page of docs/ is reached and renders its
 * main heading, every internal link answers (no 404) and its anchor names an element of its page,
 * the search box opens and finds a known term, and the console shows no error on any page.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { Schema } from "effect"
import { type Browser, chromium, type ConsoleMessage, type Page, type Response } from "playwright-core"
import { findChromium } from "../helpers/chromium.ts"
import { serveStatic, type StaticSite } from "../helpers/staticSite.ts"

const root = fileURLToPath(new URL("../..", import.meta.url))
const vitepress = join(root, "node_modules", "vitepress", "bin", "vitepress.js")

/** The site's path of each page of docs/ (docs/README.md is the home page). */
const expectedPages = readdirSync(join(root, "docs"))
  .filter((name) => name.endsWith(".md"))
  .map((name) => (name === "README.md" ? "/" : `/${name.replace(/\.md$/, ".html")}`))
  .sort()

/** The ids of a page's elements and the (absolute) targets of its links, read in the page. */
const Snapshot = Schema.decodeUnknownSync(
  Schema.Struct({ ids: Schema.Array(Schema.String), links: Schema.Array(Schema.String) })
)

/** What one page showed: its heading, its element ids, its internal links, its console errors. */
interface Visit {
  readonly heading: string
  readonly ids: ReadonlySet<string>
  readonly links: ReadonlyArray<string>
  readonly errors: ReadonlyArray<string>
}

let out = ""
let site: StaticSite | undefined
let browser: Browser | undefined
const visits = new Map<string, Visit>()
const statuses = new Map<string, number>()

/** A page's path without its query and anchor (`/` for the home page, index.html included). */
const pagePath = (url: URL): string => (url.pathname === "/index.html" ? "/" : url.pathname)

/** Collects a page's console errors, uncaught errors and failed responses until the returned stop. */
const watchErrors = (page: Page, errors: Array<string>): () => void => {
  const onConsole = (message: ConsoleMessage) => {
    if (message.type() === "error") errors.push(`console: ${message.text()} (${message.location().url})`)
  }
  const onPageError = (error: Error) => errors.push(`page error: ${error.message}`)
  const onResponse = (response: Response) => {
    if (response.status() >= 400) errors.push(`HTTP ${response.status()}: ${response.url()}`)
  }
  page.on("console", onConsole)
  page.on("pageerror", onPageError)
  page.on("response", onResponse)
  return () => {
    page.off("console", onConsole)
    page.off("pageerror", onPageError)
    page.off("response", onResponse)
  }
}

const visit = async (page: Page, origin: string, path: string): Promise<Visit> => {
  const errors: Array<string> = []
  const stop = watchErrors(page, errors)
  const response = await page.goto(`${origin}${path}`, { waitUntil: "load" })
  statuses.set(path, response?.status() ?? 0)
  const heading = await page.locator(".vp-doc h1").first().innerText({ timeout: 10_000 }).catch(() => "")
  // After hydration (Vue marks its container), so that an error of the client app shows too.
  await page.waitForFunction(`document.querySelector("#app")?.__vue_app__ !== undefined`, undefined, {
    timeout: 10_000
  }).catch(() => errors.push("the page's app never mounted"))
  const { ids, links } = Snapshot(
    await page.evaluate(`({
      ids: Array.from(document.querySelectorAll("[id]"), (element) => element.id),
      links: Array.from(document.querySelectorAll("a[href]"), (a) => a.href)
    })`)
  )
  stop()
  return {
    heading: heading.replace(/\u200b/g, "").trim(),
    ids: new Set(ids),
    links: links.filter((link) => new URL(link).origin === origin),
    errors
  }
}

describe("the documentation site", () => {
  beforeAll(async () => {
    out = mkdtempSync(join(tmpdir(), "skein-docs-site-"))
    const started = Date.now()
    await promisify(execFile)(process.execPath, [vitepress, "build", "docs", "--outDir", out], { cwd: root })
    console.log(`[docs-site] built in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    const served = await serveStatic(out)
    site = served
    const chrome = await chromium.launch({ executablePath: findChromium(), args: ["--no-sandbox"] })
    browser = chrome
    // Three tabs open the pages of each step of the crawl; everything the site loads is local
    // (a request elsewhere would be a network dependency, so it fails).
    const tabs = await Promise.all([1, 2, 3].map(() => chrome.newPage()))
    const origin = served.origin
    for (const tab of tabs) await tab.route((url) => url.origin !== origin, (route) => route.abort())
    const crawl = Date.now()
    let frontier = ["/"]
    while (frontier.length > 0) {
      const step = frontier
      await Promise.all(tabs.map(async (tab, i) => {
        for (let j = i; j < step.length; j += tabs.length) {
          const path = step[j] ?? "/"
          visits.set(path, await visit(tab, origin, path))
        }
      }))
      const next = new Set<string>()
      for (const path of step) {
        for (const link of visits.get(path)?.links ?? []) {
          const target = pagePath(new URL(link))
          if ((target === "/" || target.endsWith(".html")) && !visits.has(target)) next.add(target)
        }
      }
      frontier = [...next]
    }
    await Promise.all(tabs.map((tab) => tab.close()))
    console.log(`[docs-site] ${visits.size} pages opened in ${((Date.now() - crawl) / 1000).toFixed(1)} s`)
  }, 300_000)

  afterAll(async () => {
    await browser?.close()
    await site?.close()
    if (out !== "") rmSync(out, { recursive: true, force: true })
  })

  it("every page of docs/ is reached from the home page and renders its main heading", () => {
    assert.deepStrictEqual([...visits.keys()].sort(), expectedPages)
    const problems = [...visits].flatMap(([path, seen]) => [
      ...(statuses.get(path) === 200 ? [] : [`${path}: HTTP ${statuses.get(path)}`]),
      ...(seen.heading === "" ? [`${path}: no main heading (.vp-doc h1)`] : [])
    ])
    assert.deepStrictEqual(problems, [])
    assert.strictEqual(visits.get("/getting-started.html")?.heading, "Getting started")
  })

  it("every internal link resolves: its page answers and its anchor is on that page", () => {
    const problems: Array<string> = []
    let checked = 0
    for (const [path, seen] of visits) {
      for (const link of seen.links) {
        checked++
        const url = new URL(link)
        const target = visits.get(pagePath(url))
        if (target === undefined) {
          problems.push(`${path}: ${url.pathname} is not a page of the site`)
        } else if (url.hash !== "" && !target.ids.has(decodeURIComponent(url.hash.slice(1)))) {
          problems.push(`${path}: ${url.pathname}${url.hash}: no such anchor`)
        }
      }
    }
    assert.deepStrictEqual(problems, [])
    assert.isAbove(checked, 100)
  })

  it("the console shows no error on any page", () => {
    const problems = [...visits].flatMap(([path, seen]) => seen.errors.map((error) => `${path}: ${error}`))
    assert.deepStrictEqual(problems, [])
  })

  it("the search box opens and finds a known term", async () => {
    const origin = site?.origin ?? ""
    const page = await (browser ?? assert.fail("no browser")).newPage()
    const errors: Array<string> = []
    watchErrors(page, errors)
    await page.goto(`${origin}/`, { waitUntil: "load" })
    await page.locator(".VPNavBarSearch button").first().click()
    const input = page.locator(".VPLocalSearchBox input")
    await input.waitFor({ timeout: 10_000 })
    await input.fill("TaskMigrated")
    const first = page.locator(".VPLocalSearchBox .results a.result").first()
    await first.waitFor({ timeout: 10_000 })
    const hrefs = Schema.decodeUnknownSync(Schema.Array(Schema.String))(
      await page.evaluate(`Array.from(document.querySelectorAll(".VPLocalSearchBox .results a.result"), (a) => a.pathname)`)
    )
    assert.include(hrefs, "/errors.html")
    await page.close()
    assert.deepStrictEqual(errors, [])
  }, 60_000)
})
